//! The independent implementations the tests check our output with: the
//! C2SP tlog verifier, the OCSF and ECS schema validators, a re-hash of an
//! exported copy written apart from ours.

use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::*;

/// The independent C2SP transparency-log verifier the test script installs
/// (`aics-tlog`): a tool, not a server, so no lock. Panics when missing.
pub fn aics_tlog() -> Command {
    Command::new(service_env(
        "CHAINSHIP_TEST_AICS_TLOG",
        "the aics-tlog tool (an independent C2SP tlog verifier)",
    ))
}

/// Every stored hash of `db`, in seq order, one a line (aics-tlog's leaves file).
pub fn hashes_file(db: &Path, out: &Path) {
    let conn = Connection::open(db).unwrap();
    let mut stmt = conn.prepare("SELECT hash FROM events ORDER BY seq").unwrap();
    let hashes: Vec<String> = stmt.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
    std::fs::write(out, hashes.iter().map(|h| format!("{h}\n")).collect::<String>()).unwrap();
}

/// Validates a JSON Lines file against the published OCSF schema with the
/// independent validator the test script installs (tests/validators).
pub fn ocsf_validate(file: &Path) -> Output {
    let python = service_env(
        "CHAINSHIP_TEST_OCSF_PYTHON",
        "Python with ocsf-json-schema and jsonschema",
    );
    Command::new(python)
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/validators/ocsf_validate.py"
        ))
        .arg(file)
        .output()
        .expect("running the OCSF validator")
}

/// Validates a JSON Lines file against Elastic's ECS field definitions
/// (@elastic/ecs), with the validator in tests/validators.
pub fn ecs_validate(file: &Path) -> Output {
    let node = service_env("CHAINSHIP_TEST_NODE", "node");
    let package = service_env("CHAINSHIP_TEST_ECS_PACKAGE", "the @elastic/ecs package");
    Command::new(node)
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/validators/ecs_validate.js"))
        .arg(package)
        .arg(file)
        .output()
        .expect("running the ECS validator")
}

/// Re-verifies an exported JSON Lines file from scratch, record by record:
/// every record's hash recomputed from its own fields and `prev_hash`, each
/// `prev_hash` the previous record's `hash`, seqs 1, 2, 3, ... Returns the
/// last record's `SEQ:HASH`, and panics naming the first problem.
pub fn reverify_jsonl(path: &Path, origin: &str) -> (u64, String) {
    use chainship_chain::record::Record;
    let text = std::fs::read(path).expect("reading the exported file");
    assert!(
        text.is_empty() || text.ends_with(b"\n"),
        "the export ends with a torn line"
    );
    let mut prev_hash = String::new();
    let mut last_seq = 0u64;
    for (i, line) in text.split(|b| *b == b'\n').filter(|l| !l.is_empty()).enumerate() {
        let r = Record::parse(line).unwrap_or_else(|e| panic!("line {}: not a record: {e}", i + 1));
        assert_eq!(r.origin, origin, "line {}", i + 1);
        assert_eq!(
            r.seq,
            last_seq + 1,
            "line {}: seq {} follows seq {last_seq}: a gap or a duplicate",
            i + 1,
            r.seq
        );
        assert_eq!(
            r.prev_hash, prev_hash,
            "seq {}: prev_hash is not the previous record's hash",
            r.seq
        );
        assert_eq!(
            r.expected_hash()[..],
            *r.hash.as_bytes(),
            "seq {}: hash does not match the record's fields",
            r.seq
        );
        prev_hash = r.hash.to_string();
        last_seq = r.seq;
    }
    (last_seq, prev_hash)
}

/// What aics-tlog printed (it prints one JSON object).
pub fn aics(cmd: &mut Command) -> serde_json::Value {
    let out = cmd.output().unwrap();
    let text = stdout(&out);
    serde_json::from_str(text.trim())
        .unwrap_or_else(|e| panic!("aics-tlog printed no JSON ({e}): {text} {}", stderr(&out)))
}

/// A `tlog-proof` split into what aics-tlog reads: the proof hashes file,
/// the checkpoint note file (both in `dir`), and the index.
pub fn split_proof(dir: &Path, proof: &str) -> (PathBuf, PathBuf, u64) {
    let (head, note) = proof.split_once("\n\n").unwrap();
    let mut lines = head.lines().skip(1);
    let index: u64 = lines.next().unwrap().strip_prefix("index ").unwrap().parse().unwrap();
    let hashes: String = lines.map(|l| format!("{l}\n")).collect();
    let (h, n) = (dir.join("proof.txt"), dir.join("checkpoint.note"));
    std::fs::write(&h, hashes).unwrap();
    std::fs::write(&n, note).unwrap();
    (h, n, index)
}
