//! Issue 12, "Hardening": the verifiers never pass when they checked
//! nothing, report damage as damage, see rows no walk reaches, judge a copy
//! that starts after `--after` only by the heads above it, and never echo a
//! Kafka secret.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common::*;
use tempfile::TempDir;

const ORIGIN: &str = "harden/agentrt";

/// A database exported to a file in batches of 100, with signed heads kept.
/// `events` events exported in four steps (a fast export keeps only the
/// newest delivered head): at least four heads are kept.
fn export_anchored(events: u64) -> Anchored {
    let step = events / 4;
    let a = Anchored::new(events - 3 * step, "harden/chainship");
    for n in 0..4 {
        if n > 0 {
            append(&a.db, step);
        }
        let out = bin()
            .args(["follow", "--once", "--from-start", "--batch-size", "100"])
            .args(["--db", path_str(&a.db), "--origin", ORIGIN])
            .args([
                "--sink",
                &format!("file:{}", path_str(&a.dir.path().join("events.jsonl"))),
            ])
            .args(["--cursor", path_str(&a.dir.path().join("cursor"))])
            .args(["--anchor", &a.anchor_url()])
            .args(["--signing-key", path_str(&a.key)])
            .output()
            .unwrap();
        assert_eq!(code(&out), 0, "{}", stderr(&out));
    }
    a
}

/// What these tests ask of an anchored export.
trait Harden {
    fn anchor_verify(&self, db: &Path, origin: &str, extra: &[&str]) -> Output;
    fn verify_export(&self, copy: &Path, extra: &[&str]) -> Output;
    fn kept_heads(&self) -> Vec<(u64, String)>;
    fn write_copy(&self, name: &str, lines: &[String]) -> PathBuf;
}

impl Harden for Anchored {
    fn anchor_verify(&self, db: &Path, origin: &str, extra: &[&str]) -> Output {
        bin()
            .args(["anchor", "verify", "--db", path_str(db), "--origin", origin])
            .args(["--anchor", &self.anchor_url(), "--trusted-key", &self.verifier])
            .args(extra)
            .output()
            .unwrap()
    }

    fn verify_export(&self, copy: &Path, extra: &[&str]) -> Output {
        bin()
            .args(["verify-export", "--from", &format!("file:{}", path_str(copy))])
            .args(["--anchor", &self.anchor_url(), "--trusted-key", &self.verifier])
            .args(extra)
            .output()
            .unwrap()
    }

    /// The kept heads as (seq, hash), ascending, as the store lists them.
    fn kept_heads(&self) -> Vec<(u64, String)> {
        let out = run(&[
            "anchor",
            "list",
            "--json",
            "--origin",
            ORIGIN,
            "--anchor",
            &self.anchor_url(),
            "--trusted-key",
            &self.verifier,
        ]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        json_of(&out)["heads"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| (h["seq"].as_u64().unwrap(), h["hash"].as_str().unwrap().to_owned()))
            .collect()
    }

    fn write_copy(&self, name: &str, lines: &[String]) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        path
    }
}

fn json_of(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}{}", stdout(out), stderr(out)))
}

fn kinds(json: &serde_json::Value) -> Vec<(String, Option<u64>)> {
    json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["kind"].as_str().unwrap().to_owned(), f["seq"].as_u64()))
        .collect()
}

fn all_output(out: &Output) -> String {
    format!("{}{}", stdout(out), stderr(out))
}

// Item 2: a check that covered no trusted head is not a pass.

#[test]
fn anchor_verify_of_an_origin_with_no_heads_fails_unless_allowed() {
    let a = export_anchored(200);
    let out = a.anchor_verify(&a.db, "harden/agentrtt", &[]);
    assert_eq!(code(&out), 1, "{}", all_output(&out));
    assert!(
        stdout(&out).contains("no trusted head for origin harden/agentrtt"),
        "{}",
        stdout(&out)
    );
    assert!(!stdout(&out).contains("ok:"), "{}", stdout(&out));

    let out = a.anchor_verify(&a.db, "harden/agentrtt", &["--json"]);
    assert_eq!(code(&out), 1);
    let json = json_of(&out);
    assert_eq!(json["status"], "failed");
    assert_eq!(kinds(&json), vec![("no-trusted-head".to_owned(), None)], "{json}");
    assert!(
        json["findings"][0]["message"]
            .as_str()
            .unwrap()
            .contains("no trusted head for origin harden/agentrtt")
    );

    // A first run may pass, saying that no head was checked.
    let out = a.anchor_verify(&a.db, "harden/agentrtt", &["--allow-no-heads"]);
    assert_eq!(code(&out), 0, "{}", all_output(&out));
    assert!(stdout(&out).contains("no head was checked"), "{}", stdout(&out));
    let out = a.anchor_verify(&a.db, "harden/agentrtt", &["--allow-no-heads", "--json"]);
    assert_eq!(code(&out), 0, "{}", all_output(&out));
    let json = json_of(&out);
    assert_eq!(json["heads"]["checked"], 0, "{json}");
    assert!(
        json["warnings"][0].as_str().unwrap().contains("no head was checked"),
        "{json}"
    );
    // Never from the environment: a variable left in a nightly job's
    // environment must not make it pass on nothing.
    let out = bin()
        .env("CHAINSHIP_ALLOW_NO_HEADS", "true")
        .args(["anchor", "verify", "--json", "--db", path_str(&a.db)])
        .args(["--origin", "harden/agentrtt", "--anchor", &a.anchor_url()])
        .args(["--trusted-key", &a.verifier])
        .output()
        .unwrap();
    assert_eq!(code(&out), 1, "{}", all_output(&out));

    // The right origin still passes, its heads checked.
    let out = a.anchor_verify(&a.db, ORIGIN, &["--json"]);
    assert_eq!(code(&out), 0, "{}", all_output(&out));
    assert!(json_of(&out)["heads"]["checked"].as_u64().unwrap() > 0);
}

#[test]
fn verify_export_checks_the_origin_the_copy_names() {
    let a = export_anchored(200);
    let renamed: Vec<String> = a.lines().iter().map(|l| l.replace(ORIGIN, "other/agentrt")).collect();
    let other = a.write_copy("other.jsonl", &renamed);

    // Its origin taken from the copy: no heads there, so nothing was checked.
    let out = a.verify_export(&other, &[]);
    assert_eq!(code(&out), 1, "{}", all_output(&out));
    assert!(
        stdout(&out).contains("no trusted head for origin other/agentrt"),
        "{}",
        stdout(&out)
    );
    let out = a.verify_export(&other, &["--allow-no-heads"]);
    assert_eq!(code(&out), 0, "{}", all_output(&out));
    assert!(stdout(&out).contains("no head was checked"), "{}", stdout(&out));

    // With --origin, a copy naming another origin is refused in one finding naming both.
    let out = a.verify_export(&other, &["--origin", ORIGIN, "--json"]);
    assert_eq!(code(&out), 1, "{}", all_output(&out));
    let json = json_of(&out);
    let found = json["findings"].as_array().unwrap();
    assert_eq!(found.len(), 1, "{json}");
    let message = found[0]["message"].as_str().unwrap();
    assert!(
        message.contains("other/agentrt") && message.contains(ORIGIN) && message.contains("line 1"),
        "{message}"
    );

    // An origin that is no origin (it would be a path in the anchor store).
    let escaped: Vec<String> = a.lines().iter().map(|l| l.replace(ORIGIN, "../x")).collect();
    let escaped = a.write_copy("escaped.jsonl", &escaped);
    for extra in [&[][..], &["--allow-no-heads"][..]] {
        let out = a.verify_export(&escaped, extra);
        assert_eq!(code(&out), 1, "{}", all_output(&out));
        assert!(
            stdout(&out).contains("line 1") && stdout(&out).contains("\"../x\""),
            "{}",
            stdout(&out)
        );
    }

    // The copy as exported still passes, with or without --origin.
    let whole = a.dir.path().join("events.jsonl");
    assert_eq!(code(&a.verify_export(&whole, &[])), 0);
    assert_eq!(code(&a.verify_export(&whole, &["--origin", ORIGIN])), 0);
}

// Item 4: heads at or below --after cannot be checked by such a run.

#[test]
fn verify_export_after_a_head_skips_the_heads_below_it() {
    let a = export_anchored(1000);
    let heads = a.kept_heads();
    let (start, hash) = heads
        .iter()
        .find(|(s, _)| *s >= 400 && *s < 1000)
        .cloned()
        .expect("a kept head between 400 and 1000");
    assert!(heads.iter().any(|(s, _)| *s < start), "{heads:?}");
    let lines = a.lines();
    let tail = a.write_copy("tail.jsonl", &lines[start as usize..]);

    let after = format!("{start}:{hash}");
    let out = a.verify_export(&tail, &["--after", &after, "--json"]);
    assert_eq!(code(&out), 0, "{}", all_output(&out));
    let json = json_of(&out);
    assert_eq!(kinds(&json), vec![], "no gap below the start: {json}");
    assert_eq!(json["last_trusted_head"]["seq"], 1000, "{json}");
    let above = heads.iter().filter(|(s, _)| *s > start).count();
    assert_eq!(json["heads"]["checked"].as_u64(), Some(above as u64), "{json}");

    // The head at --after's seq must be the start given.
    let wrong = format!("{start}:{}", "0".repeat(64));
    let out = a.verify_export(&tail, &["--after", &wrong, "--json"]);
    assert_eq!(code(&out), 1, "{}", all_output(&out));
    let json = json_of(&out);
    assert_eq!(kinds(&json)[0], ("fork".to_owned(), Some(start)), "{json}");
    assert!(json["last_trusted_head"].is_null(), "{json}");

    // Past the last head nothing is left to check: not a pass.
    let (last, last_hash) = heads.last().cloned().unwrap();
    let empty = a.write_copy("empty.jsonl", &[]);
    let out = a.verify_export(&empty, &["--origin", ORIGIN, "--after", &format!("{last}:{last_hash}")]);
    assert_eq!(code(&out), 1, "{}", all_output(&out));
    assert!(
        stdout(&out).contains(&format!(
            "no trusted head for origin {ORIGIN} above the starting head at seq {last}"
        )),
        "{}",
        stdout(&out)
    );
}

// Items 6c and 9c: damaged rows are findings, not setup errors.

/// Rebuilds `events` without column types or constraints, so a test can
/// store what the real schema forbids (NULL, numbers and blobs in text
/// columns, a seq that is not an integer).
fn untyped(db: &Path) -> rusqlite::Connection {
    let conn = tamper(db);
    conn.execute_batch(
        "ALTER TABLE events RENAME TO typed;
         CREATE TABLE events (seq, run_id, step_id, at, type, payload_json, hash);
         INSERT INTO events SELECT seq, run_id, step_id, at, type, payload_json, hash FROM typed;
         DROP TABLE typed;",
    )
    .unwrap();
    conn
}

fn copy_db(a: &Anchored, name: &str) -> PathBuf {
    let copy = a.dir.path().join(name);
    std::fs::copy(&a.db, &copy).unwrap();
    copy
}

fn verify(db: &Path, json: bool) -> Output {
    let mut cmd = bin();
    cmd.args(["verify", "--db", path_str(db)]);
    if json {
        cmd.arg("--json");
    }
    cmd.output().unwrap()
}

#[test]
fn a_field_that_is_not_text_is_a_finding_with_its_seq_and_column() {
    let a = export_anchored(300);
    let cases = [
        ("payload_json", "NULL"),
        ("run_id", "42"),
        ("at", "1.5"),
        ("hash", "x'00ff'"),
    ];
    for (column, value) in cases {
        let db = copy_db(&a, &format!("{column}.db"));
        untyped(&db)
            .execute(&format!("UPDATE events SET {column} = {value} WHERE seq = 150"), [])
            .unwrap();

        let out = verify(&db, false);
        assert_eq!(code(&out), 1, "{column}: {}", all_output(&out));
        let text = stdout(&out);
        assert!(
            text.contains("broken at seq 150") && text.contains(&format!("\"{column}\"")),
            "{column}: {text}"
        );
        assert!(text.contains("last good: seq 149 "), "{column}: {text}");

        let out = verify(&db, true);
        assert_eq!(code(&out), 1, "{column}: {}", all_output(&out));
        let json = json_of(&out);
        assert_eq!(json["status"], "broken");
        assert_eq!(json["break"]["seq"], 150, "{json}");
        assert_eq!(json["break"]["column"], column, "{json}");
        assert_eq!(json["last_good"]["seq"], 149, "{json}");

        let out = a.anchor_verify(&db, ORIGIN, &["--json"]);
        assert_eq!(code(&out), 1, "{column}: {}", all_output(&out));
        let json = json_of(&out);
        assert!(kinds(&json).contains(&("altered".into(), Some(150))), "{json}");
        let message = json["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["kind"] == "altered")
            .unwrap()["message"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(message.contains(column) && message.contains("seq 149"), "{message}");
        assert!(json["last_trusted_head"]["seq"].as_u64().unwrap() < 150, "{json}");
    }
}

/// `--from N` trusts the event before N as stored: its hash must be text
/// (else the walk stops there, named), and a missing one is a gap its
/// successor shows, never an empty hash a rebuilt chain could link to.
#[test]
fn the_event_before_from_is_damage_or_a_gap_when_it_cannot_be_trusted() {
    let a = export_anchored(300);
    let run = |db: &Path, jobs: &str| {
        let out = bin()
            .args([
                "verify",
                "--db",
                path_str(db),
                "--from",
                "150",
                "--jobs",
                jobs,
                "--json",
            ])
            .output()
            .unwrap();
        (code(&out), json_of(&out))
    };
    let intact = copy_db(&a, "intact.db");
    assert_eq!(run(&intact, "1").0, 0, "the control passes");

    // A stored hash that is not a hash, or a second row of seq 149 (the
    // untyped table has no primary key), cannot be trusted: the walk starts
    // at 149 and names it, as a walk from seq 1 does. The chain from 150 on
    // is rebuilt to link to what an attacker would have it link to.
    let forged = "ab".repeat(32);
    let cases: [(&str, String, u64, &str); 6] = [
        (
            "null",
            "UPDATE events SET hash = NULL WHERE seq = 149".into(),
            149,
            "bad-field",
        ),
        (
            "blob",
            "UPDATE events SET hash = CAST(hash AS BLOB) WHERE seq = 149".into(),
            149,
            "bad-field",
        ),
        ("missing", "DELETE FROM events WHERE seq = 149".into(), 150, "seq-gap"),
        (
            "empty",
            "UPDATE events SET hash = '' WHERE seq = 149".into(),
            149,
            "hash-mismatch",
        ),
        (
            "upper",
            "UPDATE events SET hash = upper(hash) WHERE seq = 149".into(),
            149,
            "hash-mismatch",
        ),
        (
            "twice",
            format!(
                "INSERT INTO events SELECT seq, run_id, step_id, at, type, payload_json, '{forged}' \
                 FROM events WHERE seq = 149"
            ),
            149,
            "",
        ),
    ];
    for (name, change, at, kind) in cases {
        let db = copy_db(&a, &format!("{name}.db"));
        untyped(&db).execute_batch(&change).unwrap();
        rechain_from(&db, 150);
        let (code, json) = run(&db, "1");
        assert_eq!(code, 1, "{name}: {json}");
        assert_eq!(json["break"]["seq"], at, "{name}: {json}");
        if !kind.is_empty() {
            assert_eq!(json["break"]["kind"], kind, "{name}: {json}");
        }
        assert_eq!(run(&db, "3"), (1, json), "{name}: the same with --jobs 3");
    }
}

/// Re-hashes the events from `from` on so they link to whatever hash the
/// last row below `from` holds (the one a `--from` walk would trust), as a
/// writer forging the tail would.
fn rechain_from(db: &Path, from: u64) {
    let conn = tamper(db);
    let mut prev: String = conn
        .query_row(
            "SELECT coalesce(CAST(hash AS TEXT), '') FROM events WHERE seq < ?1 ORDER BY seq DESC LIMIT 1",
            [from as i64],
            |r| r.get(0),
        )
        .unwrap_or_default();
    let rows: Vec<(i64, [String; 5])> = conn
        .prepare("SELECT seq, run_id, step_id, at, type, payload_json FROM events WHERE seq >= ?1 ORDER BY seq")
        .unwrap()
        .query_map([from as i64], |r| {
            Ok((r.get(0)?, [r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?]))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for (seq, [run, step, at, kind, payload]) in rows {
        let hash = chainship_chain::event_hash(
            prev.as_bytes(),
            seq as u64,
            run.as_bytes(),
            step.as_bytes(),
            at.as_bytes(),
            kind.as_bytes(),
            payload.as_bytes(),
        );
        let hash = String::from_utf8(hash.to_vec()).unwrap();
        conn.execute("UPDATE events SET hash = ?1 WHERE seq = ?2", (&hash, seq))
            .unwrap();
        prev = hash;
    }
}

#[test]
fn a_seq_that_is_not_an_integer_is_a_finding() {
    let a = export_anchored(300);
    // A real number in place of a seq, and a row with a text seq (text sorts
    // above every number, so it is the "highest" row).
    let cases = [
        ("real", "UPDATE events SET seq = 150.5 WHERE seq = 151"),
        (
            "text",
            "INSERT INTO events SELECT 'x', run_id, step_id, at, type, payload_json, hash FROM events WHERE seq = 1",
        ),
    ];
    for (name, sql) in cases {
        let db = copy_db(&a, &format!("seq-{name}.db"));
        untyped(&db).execute(sql, []).unwrap();
        let out = verify(&db, true);
        assert_eq!(code(&out), 1, "{name}: {}", all_output(&out));
        let json = json_of(&out);
        assert_eq!(json["break"]["kind"], "bad-seq", "{name}: {json}");
        assert_eq!(json["break"]["column"], "seq", "{name}: {json}");

        let out = a.anchor_verify(&db, ORIGIN, &["--json"]);
        assert_eq!(code(&out), 1, "{name}: {}", all_output(&out));
        let json = json_of(&out);
        assert!(
            json["findings"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f["kind"] == "altered" && f["message"].as_str().unwrap().contains("seq column")),
            "{name}: {json}"
        );
    }
}

#[test]
fn rows_with_a_seq_no_walk_reaches_are_findings() {
    let a = export_anchored(200);
    // A copy of event 1 with another seq.
    let insert = |db: &rusqlite::Connection, seq: &str| {
        db.execute(
            &format!("INSERT INTO events SELECT {seq}, run_id, step_id, at, type, payload_json, hash FROM events WHERE seq = 1"),
            [],
        )
        .unwrap();
    };
    for value in ["0", "-5"] {
        let db = copy_db(&a, &format!("seq{value}.db"));
        insert(&tamper(&db), value);
        let out = verify(&db, false);
        assert_eq!(code(&out), 1, "seq {value}: {}", all_output(&out));
        assert!(
            stdout(&out).contains(&format!("a row has seq {value}, which no chain position can hold")),
            "{}",
            stdout(&out)
        );
        assert!(!stdout(&out).contains("intact"), "{}", stdout(&out));
        let json = json_of(&verify(&db, true));
        assert_eq!(json["status"], "broken");
        assert_eq!(json["unreachable_seq"]["seq"], value, "{json}");

        let out = a.anchor_verify(&db, ORIGIN, &[]);
        assert_eq!(code(&out), 1, "{}", all_output(&out));
        assert!(
            stdout(&out).contains(&format!("a row has seq {value}")),
            "{}",
            stdout(&out)
        );
    }
    let db = copy_db(&a, "seq-null.db");
    insert(&untyped(&db), "NULL");
    let out = verify(&db, false);
    assert_eq!(code(&out), 1, "{}", all_output(&out));
    assert!(stdout(&out).contains("a row has seq NULL"), "{}", stdout(&out));
}

// Item 9e: a Kafka secret is never echoed.

#[test]
fn a_malformed_kafka_opt_never_echoes_its_value() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "audit.db", 5);
    let sink = format!("file:{}", path_str(&dir.path().join("out.jsonl")));
    let cursor = path_str(&dir.path().join("cursor")).to_owned();
    let follow = |extra: &[&str], env: Option<&str>| {
        let mut cmd = bin();
        cmd.args(["follow", "--once", "--from-start", "--db", path_str(&db)])
            .args(["--origin", ORIGIN, "--sink", &sink, "--cursor", &cursor])
            .args(extra);
        if let Some(opts) = env {
            cmd.env("CHAINSHIP_KAFKA_OPT", opts);
        }
        cmd.output().unwrap()
    };
    let cases: [(&[&str], Option<&str>); 4] = [
        (&["--kafka-opt", "sasl.password:hunter2"], None),
        (&["--kafka-opt=sasl.password hunter2"], None),
        (&["--kafka-opt", "hunter2"], None),
        (&[], Some("security.protocol=sasl_ssl;sasl.password:hunter2")),
    ];
    for (extra, env) in cases {
        let out = follow(extra, env);
        assert_eq!(code(&out), 2, "{extra:?} {env:?}: {}", all_output(&out));
        assert!(!all_output(&out).contains("hunter2"), "{}", all_output(&out));
        assert!(stderr(&out).contains("--kafka-opt"), "{}", stderr(&out));
    }
    let out = follow(&["--kafka-opt", "sasl.password:hunter2"], None);
    assert!(
        stderr(&out).contains("sasl.password"),
        "the setting is named: {}",
        stderr(&out)
    );

    // The same value in a config file.
    let config = dir.path().join("c.toml");
    std::fs::write(&config, "kafka-opt = [\"sasl.password:hunter2\"]\n").unwrap();
    for args in [&["config", "check"][..], &["verify", "--db", path_str(&db)][..]] {
        let out = bin().args(args).args(["--config", path_str(&config)]).output().unwrap();
        assert_eq!(code(&out), 2, "{args:?}: {}", all_output(&out));
        assert!(!all_output(&out).contains("hunter2"), "{}", all_output(&out));
    }
}

#[test]
fn records_past_the_last_trusted_head_are_never_called_whole() {
    let a = export_anchored(600);
    // Five more events shipped without anchoring: well chained, no head covers them.
    append(&a.db, 5);
    let out = bin()
        .args(["follow", "--once", "--db", path_str(&a.db), "--origin", ORIGIN])
        .args([
            "--sink",
            &format!("file:{}", path_str(&a.dir.path().join("events.jsonl"))),
        ])
        .args(["--cursor", path_str(&a.dir.path().join("cursor"))])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let copy = a.dir.path().join("events.jsonl");
    let tail = "5 record(s) after the last trusted head (seq 601..605) are not vouched for by any head";

    // Within the allowance: a pass, but not "whole", and the tail is said.
    let out = a.verify_export(&copy, &[]);
    assert_eq!(code(&out), 0, "{}", all_output(&out));
    assert!(stdout(&out).contains(tail), "{}", stdout(&out));
    assert!(!stdout(&out).contains("whole"), "{}", stdout(&out));
    let out = a.verify_export(&copy, &["--json"]);
    let json = json_of(&out);
    assert_eq!(json["unvouched"]["records"], 5, "{json}");
    assert_eq!(
        (json["unvouched"]["from"].as_u64(), json["unvouched"]["to"].as_u64()),
        (Some(601), Some(605))
    );
    assert!(json["warnings"].to_string().contains(tail), "{json}");

    // Past --max-unvouched: a finding naming the range, in text, JSON and the textfile.
    let textfile = a.dir.path().join("job.prom");
    let out = a.verify_export(
        &copy,
        &["--max-unvouched", "4", "--metrics-textfile", path_str(&textfile)],
    );
    assert_eq!(code(&out), 1, "{}", all_output(&out));
    assert!(
        stdout(&out).contains(tail)
            && stdout(&out).contains("more than the 4 allowed")
            && stdout(&out).contains("(--max-unvouched)"),
        "{}",
        stdout(&out)
    );
    let prom = std::fs::read_to_string(&textfile).unwrap();
    assert!(
        prom.contains("chainship_job_unvouched_records{") && prom.contains("} 5\n"),
        "{prom}"
    );
    assert!(prom.contains("kind=\"unvouched\"} 1"), "{prom}");
    let out = a.verify_export(&copy, &["--max-unvouched", "0", "--json"]);
    assert_eq!(kinds(&json_of(&out)), vec![("unvouched".to_owned(), Some(601))]);

    // Once anchored, the same records are vouched for: whole again.
    let out = a.verify_export(&copy, &[]);
    assert!(stdout(&out).contains(tail));
    let anchored = bin()
        .args(["follow", "--once", "--db", path_str(&a.db), "--origin", ORIGIN])
        .args(["--sink", &format!("file:{}", path_str(&copy))])
        .args(["--cursor", path_str(&a.dir.path().join("cursor"))])
        .args(["--anchor", &a.anchor_url(), "--signing-key", path_str(&a.key)])
        .output()
        .unwrap();
    assert_eq!(code(&anchored), 0, "{}", stderr(&anchored));
    let out = a.verify_export(&copy, &["--max-unvouched", "0"]);
    assert_eq!(code(&out), 0, "{}", all_output(&out));
    assert!(stdout(&out).contains("the copy is whole"), "{}", stdout(&out));
}

#[test]
fn diff_never_calls_an_unvouched_tail_a_cut() {
    let a = export_anchored(600);
    let before = a.dir.path().join("before.db");
    std::fs::copy(&a.db, &before).unwrap();
    // Five well-chained records past the last trusted head, which the
    // database compared (`before`) does not hold.
    append(&a.db, 5);
    let extra = a.dir.path().join("extra.jsonl");
    let out = Follow::new(&a.db, ORIGIN)
        .file_sink(&extra)
        .cursor(&a.dir.path().join("cursor-extra"))
        .start_at_seq_1()
        .once()
        .output();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let mut lines = a.lines();
    lines.extend(
        std::fs::read_to_string(&extra)
            .unwrap()
            .lines()
            .skip(600)
            .map(str::to_owned),
    );
    let copy = a.write_copy("tail.jsonl", &lines);
    let diff = |json: bool| {
        bin()
            .args([
                "diff",
                "--db",
                path_str(&before),
                "--from",
                &format!("file:{}", path_str(&copy)),
            ])
            .args(["--anchor", &a.anchor_url(), "--trusted-key", &a.verifier])
            .args(if json { &["--json"][..] } else { &[][..] })
            .output()
            .unwrap()
    };
    let out = diff(false);
    let text = stdout(&out);
    assert!(text.contains("seqs 601 to 605"), "{text}");
    assert!(!text.contains("(cut"), "an unvouched tail is no cut: {text}");
    assert!(text.contains("no head vouches for them, so they show no cut"), "{text}");
    let json = json_of(&diff(true));
    assert_eq!(json["missing"][0]["why"], "unvouched", "{json}");
}

/// Rewrites, in place, the rowid of row `seq` in the table's leaf pages to
/// `to` (both two-byte varints): a damaged b-tree whose order no longer
/// reaches the rows after it, though each row is intact.
fn rewrite_rowid(db: &Path, seq: u64, to: u64) {
    let mut bytes = std::fs::read(db).unwrap();
    let page_size = match u16::from_be_bytes([bytes[16], bytes[17]]) {
        1 => 65536,
        n => n as usize,
    };
    let varint = |b: &[u8]| -> (u64, usize) {
        let mut v = 0u64;
        for (i, x) in b.iter().take(8).enumerate() {
            v = (v << 7) | u64::from(x & 0x7f);
            if x & 0x80 == 0 {
                return (v, i + 1);
            }
        }
        panic!("long varint")
    };
    let two_bytes = |n: u64| [0x80 | (n >> 7) as u8, (n & 0x7f) as u8];
    for page in 1..bytes.len() / page_size {
        let base = page * page_size;
        if bytes[base] != 0x0d {
            continue;
        }
        let cells = u16::from_be_bytes([bytes[base + 3], bytes[base + 4]]) as usize;
        for i in 0..cells {
            let at = base + 8 + 2 * i;
            let cell = base + u16::from_be_bytes([bytes[at], bytes[at + 1]]) as usize;
            let (_, n) = varint(&bytes[cell..]);
            let (rowid, m) = varint(&bytes[cell + n..]);
            if rowid == seq {
                assert_eq!(m, 2, "seq {seq} is not a two-byte varint");
                bytes[cell + n..cell + n + 2].copy_from_slice(&two_bytes(to));
                std::fs::write(db, &bytes).unwrap();
                return;
            }
        }
    }
    panic!("seq {seq} not found in a leaf page");
}

#[test]
fn a_walk_that_ends_below_the_head_with_no_break_is_never_intact() {
    let a = export_anchored(300);
    let db = copy_db(&a, "btree.db");
    // Row 200 claims rowid 16000 where 200 sat: reading in seq order from
    // 199 finds nothing more, yet the table's last row is 300.
    rewrite_rowid(&db, 200, 16000);
    for jobs in ["1", "2"] {
        let out = bin()
            .args(["verify", "--db", path_str(&db), "--jobs", jobs])
            .output()
            .unwrap();
        assert_eq!(code(&out), 1, "--jobs {jobs}: {}", all_output(&out));
        assert!(
            stdout(&out).contains("not reached: the database's head seq 300"),
            "{}",
            stdout(&out)
        );
        assert!(!stdout(&out).contains("intact"), "{}", stdout(&out));
    }
    let json = json_of(&verify(&db, true));
    assert_eq!(json["head_not_reached"], 300, "{json}");
    // anchor verify walks the same way and names it.
    let out = a.anchor_verify(&db, ORIGIN, &[]);
    assert_eq!(code(&out), 1, "{}", all_output(&out));
    assert!(
        stdout(&out).contains("reading in seq order ended at seq 199"),
        "{}",
        stdout(&out)
    );
}
