//! Issue 29, "one verification engine": every verifier that reads a store
//! judges it through the same pass, so one tampered store gets the same
//! findings, kind for kind, from `anchor verify` (against the database),
//! `verify-export`, `restore` and `diff` (against an intact copy).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::common::*;
use serde_json::Value;

const ORIGIN: &str = "verdict/agentrt";

/// 1,200 events exported in four batches of 300: heads and checkpoints at
/// 300, 600, 900 and 1200, full level-0 tiles 000 to 003.
fn exported() -> Anchored {
    let a = Anchored::new(300, "verdict/chainship");
    for n in 0..4 {
        if n > 0 {
            append(&a.db, 300);
        }
        let out = bin()
            .args(["follow", "--once", "--from-start", "--batch-size", "300"])
            .args(["--db", path_str(&a.db), "--origin", ORIGIN])
            .args([
                "--sink",
                &format!("file:{}", path_str(&a.dir.path().join("events.jsonl"))),
            ])
            .args(["--cursor", path_str(&a.dir.path().join("cursor"))])
            .args(["--anchor", &a.anchor_url(), "--signing-key", path_str(&a.key)])
            .output()
            .unwrap();
        assert_eq!(code(&out), 0, "{}", stderr(&out));
    }
    a
}

fn flip(path: &Path, at: usize) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[at] ^= 1;
    std::fs::write(path, bytes).unwrap();
}

/// The finding kinds of one JSON answer with its last trusted head, and its exit code.
fn kinds(out: &std::process::Output) -> (i32, (BTreeSet<String>, Option<u64>)) {
    let json: Value = serde_json::from_str(stdout(out).trim())
        .unwrap_or_else(|e| panic!("no JSON ({e}): {} {}", stdout(out), stderr(out)));
    let kinds = json["findings"]
        .as_array()
        .unwrap_or_else(|| panic!("no findings: {json}"))
        .iter()
        .map(|f| f["kind"].as_str().unwrap().to_owned())
        .collect();
    (code(out), (kinds, json["last_trusted_head"]["seq"].as_u64()))
}

/// Every verifier's answer on `store`: (command, exit code, (finding kinds, last trusted head)).
type Answer = (i32, (BTreeSet<String>, Option<u64>));
fn verdicts(a: &Anchored, store: &Path, extra: &[&str]) -> Vec<(&'static str, Answer)> {
    let anchor = format!("file:{}", path_str(store));
    let copy = format!("file:{}", path_str(&a.dir.path().join("events.jsonl")));
    let trust = ["--anchor", &anchor, "--trusted-key", &a.verifier, "--json"];
    static RUN: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let restored = a.dir.path().join(format!("restored-{n}.db"));
    let runs: [(&str, Vec<String>); 4] = [
        (
            "anchor verify",
            ["anchor", "verify", "--db", path_str(&a.db), "--origin", ORIGIN]
                .map(str::to_owned)
                .to_vec(),
        ),
        (
            "verify-export",
            ["verify-export", "--from", &copy].map(str::to_owned).to_vec(),
        ),
        (
            "restore",
            ["restore", "--from", &copy, "--out", path_str(&restored)]
                .map(str::to_owned)
                .to_vec(),
        ),
        (
            "diff",
            ["diff", "--from", &copy, "--db", path_str(&a.db)]
                .map(str::to_owned)
                .to_vec(),
        ),
    ];
    runs.into_iter()
        .map(|(name, args)| {
            let out = bin().args(&args).args(trust).args(extra).output().unwrap();
            (name, kinds(&out))
        })
        .collect()
}

/// Signs `text` as a note with the export's own key (an insider's forgery).
fn key(a: &Anchored) -> chainship_anchor::SignerKey {
    chainship_anchor::SignerKey::load(&a.key).unwrap()
}

#[test]
fn every_verifier_names_the_same_findings_for_the_same_tampered_store() {
    let a = exported();
    let log = |store: &Path| store.join(ORIGIN);
    let other = chainship_anchor::SignerKey::generate("verdict/stranger").unwrap();
    let head_at = |seq: u64| format!("{seq:020}.head");
    type Tamper = Box<dyn Fn(&Path)>;
    let forged_head = |a: &Anchored, seq: u64, hash: &str, later: u64| {
        let head: chainship_chain::Head = format!("{seq}:{hash}").parse().unwrap();
        let at = std::time::SystemTime::now() + std::time::Duration::from_secs(later);
        chainship_anchor::SignedHead::new(ORIGIN, head, at)
            .sign(&[key(a).shared()])
            .unwrap()
    };
    let conflicting = forged_head(&a, 600, &"ab".repeat(32), 0);
    let backwards = forged_head(&a, 450, &"cd".repeat(32), 3600);
    let stranger = {
        let head: chainship_chain::Head = format!("600:{}", "ef".repeat(32)).parse().unwrap();
        chainship_anchor::SignedHead::new(ORIGIN, head, std::time::SystemTime::now())
            .sign(&[other.shared()])
            .unwrap()
    };
    let checkpoint = |origin: &str, size: u64, root: [u8; 32]| {
        chainship_anchor::checkpoint::Checkpoint {
            origin: origin.into(),
            size,
            root,
        }
        .sign(&[key(&a).shared()])
        .unwrap()
    };
    let planted = checkpoint(ORIGIN, 750, [7; 32]);
    let conflicting_cp = checkpoint(ORIGIN, 900, [9; 32]);
    let foreign_cp = checkpoint("verdict/elsewhere", 1200, [1; 32]);
    let tampers: Vec<(&str, Tamper)> = vec![
        ("an edited head", {
            let name = head_at(600);
            Box::new(move |s| {
                let path = log(s).join(&name);
                let text = std::fs::read_to_string(&path).unwrap().replacen("600", "601", 1);
                std::fs::write(path, text).unwrap();
            })
        }),
        ("a conflicting head beside one", {
            let note = conflicting.clone();
            Box::new(move |s| {
                std::fs::write(log(s).join("00000000000000000600.00000000001999999999.head"), &note).unwrap()
            })
        }),
        ("a head below an earlier one", {
            let (note, name) = (backwards.clone(), head_at(450));
            Box::new(move |s| std::fs::write(log(s).join(&name), &note).unwrap())
        }),
        ("a bad signature", {
            let name = head_at(900);
            Box::new(move |s| {
                let path = log(s).join(&name);
                let len = std::fs::metadata(&path).unwrap().len() as usize;
                flip(&path, len - 6);
            })
        }),
        ("an untrusted key's head", {
            let note = stranger.clone();
            Box::new(move |s| {
                std::fs::write(log(s).join("00000000000000000600.00000000001999999999.head"), &note).unwrap()
            })
        }),
        (
            "a damaged full level-0 tile",
            Box::new(move |s| flip(&log(s).join("tile/0/001"), 5)),
        ),
        (
            "a damaged bundle",
            Box::new(move |s| flip(&log(s).join("tile/entries/002"), 40)),
        ),
        (
            "a missing tile",
            Box::new(move |s| std::fs::remove_file(log(s).join("tile/0/002")).unwrap()),
        ),
        ("a planted checkpoint", {
            let note = planted.clone();
            Box::new(move |s| std::fs::write(log(s).join("checkpoints/00000000000000000750"), &note).unwrap())
        }),
        ("a conflicting checkpoint", {
            let note = conflicting_cp.clone();
            Box::new(move |s| {
                std::fs::write(
                    log(s).join("checkpoints/00000000000000000900.00000000001999999999"),
                    &note,
                )
                .unwrap()
            })
        }),
        ("a checkpoint of another origin", {
            let note = foreign_cp.clone();
            Box::new(move |s| {
                std::fs::write(
                    log(s).join("checkpoints/00000000000000001200.00000000001999999999"),
                    &note,
                )
                .unwrap()
            })
        }),
        ("a rolled-back pointer", {
            Box::new(move |s| {
                let older = std::fs::read(log(s).join("checkpoints/00000000000000000600")).unwrap();
                std::fs::write(log(s).join("checkpoint"), older).unwrap();
            })
        }),
    ];
    // The intact store: every verifier passes.
    for (name, (code, (kinds, last))) in verdicts(&a, &a.anchors, &[]) {
        assert_eq!(
            (code, kinds.len(), last),
            (0, 0, Some(1200)),
            "{name} on the intact store: {kinds:?}"
        );
    }
    // Under a witness quorum nobody met: `uncosigned` from every verifier.
    let witness = chainship_anchor::cosignature::witness_key(&ed25519_dalek::SigningKey::from_bytes(&[3; 32]), "w1");
    let all = verdicts(&a, &a.anchors, &["--witness-key", &witness.to_text()]);
    for (name, (code, (kinds, _))) in &all {
        let expected: BTreeSet<String> = ["uncosigned".to_owned()].into();
        assert_eq!((*code, kinds), (1, &expected), "{name} under an unmet quorum");
    }
    let mut report = Vec::new();
    for (i, (what, tamper)) in tampers.iter().enumerate() {
        let store: PathBuf = a.dir.path().join(format!("store-{i}"));
        copy_tree(&a.anchors, &store);
        tamper(&store);
        let all = verdicts(&a, &store, &[]);
        let (_, first) = &all[0];
        assert_eq!(first.0, 1, "{what}: anchor verify passed: {first:?}");
        assert!(!first.1.0.is_empty(), "{what}: no finding");
        // Kind for kind, and the same last trusted head.
        for (name, answer) in &all[1..] {
            assert_eq!(answer, first, "{what}: {name} and anchor verify disagree");
        }
        report.push(format!("{what}: {first:?}"));
    }
    eprintln!("{}", report.join("\n"));

    // The junk name must not stop the walk short, with one job or several:
    // an altered row is still found.
    let store = a.dir.path().join("junk-store");
    copy_tree(&a.anchors, &store);
    std::fs::write(store.join(ORIGIN).join("18446744073709551615.head"), "x").unwrap();
    let db = a.dir.path().join("junk.db");
    std::fs::copy(&a.db, &db).unwrap();
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute("UPDATE events SET payload_json = '{}' WHERE seq = 700", [])
        .unwrap();
    for jobs in ["1", "2"] {
        let out = bin()
            .args([
                "anchor",
                "verify",
                "--db",
                path_str(&db),
                "--origin",
                ORIGIN,
                "--json",
                "--jobs",
                jobs,
            ])
            .args([
                "--anchor",
                &format!("file:{}", path_str(&store)),
                "--trusted-key",
                &a.verifier,
            ])
            .output()
            .unwrap();
        let json: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
        assert_eq!(
            json["database"]["checked"], 699,
            "--jobs {jobs}: the walk reaches the break"
        );
        assert_eq!(
            ranges(&json),
            vec![("altered".to_owned(), 700, 700)],
            "--jobs {jobs}: {json}"
        );
    }
}

/// 3,000 events exported in two steps, heads (and, unless `heads_only`,
/// checkpoints and tiles) at 500 and 3000.
fn exported_at_500_and_3000(heads_only: bool) -> Anchored {
    let a = Anchored::new(500, "verdict/chainship");
    for n in 0..2 {
        if n > 0 {
            append(&a.db, 2500);
        }
        let mut cmd = bin();
        cmd.args(["follow", "--once", "--from-start", "--batch-size", "5000"])
            .args(["--db", path_str(&a.db), "--origin", ORIGIN])
            .args([
                "--sink",
                &format!("file:{}", path_str(&a.dir.path().join("events.jsonl"))),
            ])
            .args(["--cursor", path_str(&a.dir.path().join("cursor"))])
            .args(["--anchor", &a.anchor_url(), "--signing-key", path_str(&a.key)]);
        if heads_only {
            cmd.arg("--no-checkpoints");
        }
        let out = cmd.output().unwrap();
        assert_eq!(code(&out), 0, "{}", stderr(&out));
    }
    let heads: Vec<String> = std::fs::read_dir(a.anchors.join(ORIGIN))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".head"))
        .collect();
    assert_eq!(heads.len(), 2, "{heads:?}");
    a
}

/// `anchor verify --json` of `db` (a tampered copy of the export's database).
fn anchor_verify_json(a: &Anchored, db: &Path) -> (i32, Value) {
    json_answer(
        a,
        &a.anchor_url(),
        &["anchor", "verify", "--db", path_str(db), "--origin", ORIGIN],
    )
}

/// A command's `--json` answer and exit code, against the store at `anchor`.
fn json_answer(a: &Anchored, anchor: &str, command: &[&str]) -> (i32, Value) {
    let out = bin()
        .args(command)
        .args(["--anchor", anchor, "--trusted-key", &a.verifier, "--json"])
        .output()
        .unwrap();
    let json = serde_json::from_str(stdout(&out).trim())
        .unwrap_or_else(|e| panic!("no JSON ({e}): {} {}", stdout(&out), stderr(&out)));
    (code(&out), json)
}

/// A copy of the export's store without its head notes (and, with `tiles`
/// false, without its tiles): its `file:` URL.
fn store_without_heads(a: &Anchored, name: &str, tiles: bool) -> String {
    let store = a.dir.path().join(name);
    copy_tree(&a.anchors, &store);
    if !tiles {
        std::fs::remove_dir_all(store.join(ORIGIN).join("tile")).unwrap();
    }
    for e in std::fs::read_dir(store.join(ORIGIN)).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_some_and(|x| x == "head") {
            std::fs::remove_file(path).unwrap();
        }
    }
    format!("file:{}", path_str(&store))
}

fn tampered(a: &Anchored, name: &str, sql: &str) -> PathBuf {
    let db = a.dir.path().join(name);
    std::fs::copy(&a.db, &db).unwrap();
    rusqlite::Connection::open(&db).unwrap().execute_batch(sql).unwrap();
    db
}

fn ranges(json: &Value) -> Vec<(String, u64, u64)> {
    json["invalid_ranges"]
        .as_array()
        .unwrap_or_else(|| panic!("no invalid_ranges: {json}"))
        .iter()
        .map(|r| {
            (
                r["kind"].as_str().unwrap().to_owned(),
                r["from"].as_u64().unwrap(),
                r["to"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// One altered event is that event: the stored hashes after it still link
/// to the head at 3000, and the checkpoint's leaves vouch for those before
/// it, so only seq 1500 is invalid, with its one run.
#[test]
fn one_altered_event_is_named_alone_and_the_head_after_it_stays_trusted() {
    let a = exported_at_500_and_3000(false);
    let db = tampered(
        &a,
        "altered.db",
        "UPDATE events SET payload_json = '{\"x\":1}' WHERE seq = 1500",
    );
    let run_of_1500: String = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row("SELECT run_id FROM events WHERE seq = 1500", [], |r| r.get(0))
        .unwrap();
    let (code, json) = anchor_verify_json(&a, &db);
    assert_eq!(code, 1, "{json}");
    assert_eq!(ranges(&json), vec![("altered".to_owned(), 1500, 1500)], "{json}");
    let findings = json["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{json}");
    assert_eq!(
        (findings[0]["kind"].as_str(), findings[0]["seq"].as_u64()),
        (Some("altered"), Some(1500))
    );
    assert_eq!(json["invalid_ranges"][0]["trusted_again_from"], 1501, "{json}");
    let runs: Vec<&str> = json["affected"]["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["run_id"].as_str().unwrap())
        .collect();
    assert_eq!(runs, [run_of_1500.as_str()], "{json}");
    assert_eq!(json["affected"]["events"], 1);

    // A row removed: its seq is missing; the next row is checked against
    // the log's entry before it (the checkpoint's entry bundle) and vouched
    // for, as everything else is.
    let db = tampered(&a, "deleted.db", "DELETE FROM events WHERE seq = 2000");
    let (code, json) = anchor_verify_json(&a, &db);
    assert_eq!(code, 1);
    assert_eq!(ranges(&json), vec![("missing".to_owned(), 2000, 2000)], "{json}");

    // Two rows changed far apart: both named, nothing between.
    let db = tampered(
        &a,
        "two.db",
        "UPDATE events SET at = '2020-01-01T00:00:00Z' WHERE seq IN (700, 2500)",
    );
    let (_, json) = anchor_verify_json(&a, &db);
    assert_eq!(
        ranges(&json),
        vec![("altered".to_owned(), 700, 700), ("altered".to_owned(), 2500, 2500)],
        "{json}"
    );

    // A consistent rewrite from seq 1500 to the end: no later head matches,
    // so everything from the first changed event on is invalid (a fork); the
    // checkpoint's leaves say exactly where it starts.
    let rewritten = a.dir.path().join("rewritten.db");
    std::fs::copy(&a.db, &rewritten).unwrap();
    {
        let c = rusqlite::Connection::open(&rewritten).unwrap();
        c.execute("UPDATE events SET payload_json = '{\"x\":2}' WHERE seq = 1500", [])
            .unwrap();
        let mut prev: String = c
            .query_row("SELECT hash FROM events WHERE seq = 1499", [], |r| r.get(0))
            .unwrap();
        for seq in 1500..=3000u64 {
            let (run, step, at, kind, payload): (String, String, String, String, String) = c
                .query_row(
                    "SELECT run_id, step_id, at, type, payload_json FROM events WHERE seq = ?1",
                    [seq as i64],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
                )
                .unwrap();
            let h = chainship_chain::event_hash(
                prev.as_bytes(),
                seq,
                run.as_bytes(),
                step.as_bytes(),
                at.as_bytes(),
                kind.as_bytes(),
                payload.as_bytes(),
            );
            prev = String::from_utf8(h.to_vec()).unwrap();
            c.execute(
                "UPDATE events SET hash = ?1 WHERE seq = ?2",
                rusqlite::params![prev, seq as i64],
            )
            .unwrap();
        }
    }
    let (code, json) = anchor_verify_json(&a, &rewritten);
    assert_eq!(code, 1);
    let kinds: BTreeSet<&str> = json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains("fork"), "{json}");
    assert_eq!(json["last_trusted_head"]["seq"], 500);
    assert_eq!(ranges(&json), vec![("rewritten".to_owned(), 1500, 3000)]);
    assert_eq!(json["affected"]["from"], 1500);
}

/// With heads only (no checkpoint leaves), what lies between the head at
/// 500 and the break cannot be told from a rewrite ending there: it is
/// named `unvouched`, and the head at 3000 still vouches for 1501 on.
#[test]
fn with_heads_only_the_stretch_before_a_break_is_unvouched_not_trusted() {
    let a = exported_at_500_and_3000(true);
    let db = tampered(
        &a,
        "altered.db",
        "UPDATE events SET payload_json = '{\"x\":1}' WHERE seq = 1500",
    );
    let (code, json) = anchor_verify_json(&a, &db);
    assert_eq!(code, 1);
    assert_eq!(
        ranges(&json),
        vec![("unvouched".to_owned(), 501, 1499), ("altered".to_owned(), 1500, 1500)],
        "{json}"
    );
    assert_eq!(json["invalid_ranges"][1]["trusted_again_from"], 1501, "{json}");
    assert_eq!(json["invalid_ranges"][1]["vouched_again_by"], 3000, "{json}");
}

/// The export's copy with `change` applied to each record's JSON (a SIEM
/// team's copy after someone edited it), written beside the original.
fn copy_with(a: &Anchored, name: &str, change: impl Fn(&mut Value) -> bool) -> PathBuf {
    let text = std::fs::read_to_string(a.dir.path().join("events.jsonl")).unwrap();
    let mut out = String::new();
    for line in text.lines() {
        let mut r: Value = serde_json::from_str(line).unwrap();
        if change(&mut r) {
            out += &r.to_string();
            out.push('\n');
        }
    }
    let path = a.dir.path().join(name);
    std::fs::write(&path, out).unwrap();
    path
}

fn copy_json(a: &Anchored, command: &[&str], copy: &Path) -> (i32, Value) {
    let from = format!("file:{}", path_str(copy));
    json_answer(a, &a.anchor_url(), &[command, &["--from", &from]].concat())
}

fn affected_runs(json: &Value) -> Vec<String> {
    json["affected"]["runs"]
        .as_array()
        .unwrap_or_else(|| panic!("no affected runs: {json}"))
        .iter()
        .map(|r| r["run_id"].as_str().unwrap().to_owned())
        .collect()
}

/// Issue 47: a copy gets the exact ranges a database gets for the same
/// damage (it was 1500..3000 and every run for one edited record, with the
/// records after it "not vouched" though the head at 3000 matches).
#[test]
fn a_copy_and_the_database_name_the_same_exact_ranges() {
    let a = exported_at_500_and_3000(false);
    let run_of = |seq: u64| -> String {
        rusqlite::Connection::open(&a.db)
            .unwrap()
            .query_row("SELECT run_id FROM events WHERE seq = ?1", [seq as i64], |r| r.get(0))
            .unwrap()
    };
    // One record's payload edited.
    let db = tampered(
        &a,
        "edited.db",
        "UPDATE events SET payload_json = '{\"x\":1}' WHERE seq = 1500",
    );
    let copy = copy_with(&a, "edited.jsonl", |r| {
        if r["seq"] == 1500 {
            r["payload_json"] = "{\"x\":1}".into();
        }
        true
    });
    let (db_code, db_json) = anchor_verify_json(&a, &db);
    let (copy_code, copy_json_) = copy_json(&a, &["verify-export"], &copy);
    assert_eq!((db_code, copy_code), (1, 1));
    let exact = vec![("altered".to_owned(), 1500, 1500)];
    assert_eq!(ranges(&db_json), exact, "{db_json}");
    assert_eq!(ranges(&copy_json_), exact, "{copy_json_}");
    assert_eq!(affected_runs(&copy_json_), [run_of(1500)], "{copy_json_}");
    assert_eq!(copy_json_["affected"]["events"], 1, "{copy_json_}");
    assert_eq!(
        copy_json_["unvouched"],
        Value::Null,
        "the head at 3000 vouches for the rest: {copy_json_}"
    );
    assert_eq!(
        copy_json_["last_trusted_head"]["seq"],
        db_json["last_trusted_head"]["seq"]
    );
    let kinds = |j: &Value| -> Vec<(String, u64)> {
        j["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| (f["kind"].as_str().unwrap().to_owned(), f["seq"].as_u64().unwrap_or(0)))
            .collect()
    };
    assert_eq!(kinds(&db_json), kinds(&copy_json_));

    // Only the stored hash of one row changed: that row, not the next one too.
    let db = tampered(
        &a,
        "hash.db",
        &format!("UPDATE events SET hash = '{}' WHERE seq = 1500", "0".repeat(64)),
    );
    let copy = copy_with(&a, "hash.jsonl", |r| {
        if r["seq"] == 1500 {
            r["hash"] = "0".repeat(64).into();
        }
        true
    });
    let (_, db_json) = anchor_verify_json(&a, &db);
    let (_, copy_json_) = copy_json(&a, &["verify-export"], &copy);
    assert_eq!(ranges(&db_json), exact, "{db_json}");
    assert_eq!(ranges(&copy_json_), exact, "{copy_json_}");
    assert_eq!(affected_runs(&db_json), [run_of(1500)], "{db_json}");
    // The next record's prev_hash, the checkpoints' roots and the head's
    // hash name no record of their own: the affected runs are one record's.
    assert_eq!(affected_runs(&copy_json_), [run_of(1500)], "{copy_json_}");
    assert_eq!(
        copy_json_["affected"]["ranges"],
        serde_json::json!([{"from": 1500, "to": 1500}])
    );

    // A second record at 1500 naming another run: a consumer may have
    // taken either, so both runs are affected.
    let text = std::fs::read_to_string(a.dir.path().join("events.jsonl")).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let mut forged: Value = serde_json::from_str(&lines[1499]).unwrap();
    forged["run_id"] = "run_attacker".into();
    lines.insert(1500, forged.to_string());
    let copy = a.dir.path().join("duplicate.jsonl");
    std::fs::write(&copy, lines.join("\n") + "\n").unwrap();
    let (code_, json) = copy_json(&a, &["verify-export"], &copy);
    assert_eq!(code_, 1, "{json}");
    let mut runs = affected_runs(&json);
    runs.sort();
    let mut expected = vec![run_of(1500), "run_attacker".to_owned()];
    expected.sort();
    assert_eq!(runs, expected, "{json}");

    // Rows 700..720 deleted mid-chain: missing, and no cut. The database's
    // next row is checked against the log's entry at seq 720; the copy's
    // next record names its predecessor's hash: both show it intact.
    let db = tampered(&a, "deleted.db", "DELETE FROM events WHERE seq BETWEEN 700 AND 720");
    let copy = copy_with(&a, "deleted.jsonl", |r| {
        !(700..=720).contains(&r["seq"].as_u64().unwrap())
    });
    let (_, db_json) = anchor_verify_json(&a, &db);
    let (_, copy_json_) = copy_json(&a, &["verify-export"], &copy);
    let missing = ("missing".to_owned(), 700, 720);
    assert_eq!(ranges(&db_json), vec![missing.clone()], "{db_json}");
    assert_eq!(ranges(&copy_json_), vec![missing], "{copy_json_}");
    for json in [&db_json, &copy_json_] {
        assert!(!kinds(json).iter().any(|(k, _)| k == "cut"), "{json}");
    }
}

/// Issue 47: `diff`'s affected range is every differing event, not the
/// first `--limit` shown (it stopped at 1500 + limit).
#[test]
fn diff_names_the_whole_rewritten_range_whatever_its_limit() {
    let a = exported_at_500_and_3000(false);
    let db = tampered(
        &a,
        "rewritten.db",
        "UPDATE events SET at = '2020-01-01T00:00:00Z' WHERE seq >= 1500",
    );
    let out = bin()
        .args(["diff", "--db", path_str(&db), "--limit", "5", "--json"])
        .args([
            "--from",
            &format!("file:{}", path_str(&a.dir.path().join("events.jsonl"))),
        ])
        .args(["--anchor", &a.anchor_url(), "--trusted-key", &a.verifier])
        .output()
        .unwrap();
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let json: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(
        (json["affected"]["from"].as_u64(), json["affected"]["to"].as_u64()),
        (Some(1500), Some(3000)),
        "{json}"
    );
}

/// Issue 47: with every head note deleted and the checkpoints kept, every
/// verifier says the same: the heads are missing, the checkpoints (matched
/// by the copy's tree as by the database's) were still checked, and no
/// verifier adds `no-trusted-head`.
#[test]
fn with_every_head_deleted_every_verifier_agrees() {
    let a = exported();
    let store_url = store_without_heads(&a, "no-heads", true);
    let store = a.dir.path().join("no-heads");
    let answers = verdicts(&a, &store, &[]);
    let (_, first) = &answers[0];
    for (name, answer) in &answers {
        assert_eq!(answer.0, 1, "{name}: {answer:?}");
        assert!(answer.1.0.contains("head-missing"), "{name}: {answer:?}");
        assert!(!answer.1.0.contains("no-trusted-head"), "{name}: {answer:?}");
        assert_eq!(answer.1, first.1, "{name} disagrees with anchor verify");
    }
    // The row at the checkpoint of 600 rewritten with its hash recomputed:
    // the database's tree parts from that checkpoint's, and the largest one
    // below (300) still matches it, as a copy's tree does.
    let db = a.dir.path().join("rewritten.db");
    std::fs::copy(&a.db, &db).unwrap();
    let conn = rusqlite::Connection::open(&db).unwrap();
    let (prev, run, step, at, kind): (String, String, String, String, String) = conn
        .query_row(
            "SELECT (SELECT hash FROM events WHERE seq = 599), run_id, step_id, at, type FROM events WHERE seq = 600",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
        )
        .unwrap();
    let payload = "{\"rewritten\":true}";
    let hash = chainship_chain::event_hash(
        prev.as_bytes(),
        600,
        run.as_bytes(),
        step.as_bytes(),
        at.as_bytes(),
        kind.as_bytes(),
        payload.as_bytes(),
    );
    conn.execute(
        "UPDATE events SET payload_json = ?1, hash = ?2 WHERE seq = 600",
        rusqlite::params![payload, String::from_utf8(hash.to_vec()).unwrap()],
    )
    .unwrap();
    let (code_, json) = json_answer(
        &a,
        &store_url,
        &["anchor", "verify", "--db", path_str(&db), "--origin", ORIGIN],
    );
    assert_eq!(code_, 1, "{json}");
    assert!(
        !json["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["kind"] == "no-trusted-head"),
        "{json}"
    );
    assert_eq!(json["last_trusted_head"]["seq"], 300, "{json}");
}

/// Issue 47: with only checkpoints kept (no head, no tile), a chain
/// rewritten consistently from 700 to its end shows only in the roots of
/// the checkpoints from 900 on: the database and the copy both name what
/// follows the last matched checkpoint (600) unvouched, open-ended, and
/// trust it (the database named no range; the copy passed the checkpoint
/// forks with no range either).
#[test]
fn a_rewrite_only_checkpoint_roots_show_is_the_same_range_for_database_and_copy() {
    let a = exported();
    let anchor = store_without_heads(&a, "checkpoints-only", false);
    // The copy rewritten, and the database rewritten the same way.
    let text = std::fs::read_to_string(a.dir.path().join("events.jsonl")).unwrap();
    let db = a.dir.path().join("rewritten.db");
    std::fs::copy(&a.db, &db).unwrap();
    let conn = rusqlite::Connection::open(&db).unwrap();
    let mut prev = String::new();
    let mut lines = Vec::new();
    for line in text.lines() {
        let mut r: Value = serde_json::from_str(line).unwrap();
        let seq = r["seq"].as_u64().unwrap();
        if seq >= 700 {
            let payload = format!("{{\"rewritten\":{seq}}}");
            let field = |k: &str| r[k].as_str().unwrap().to_owned();
            let hash = chainship_chain::event_hash(
                prev.as_bytes(),
                seq,
                field("run_id").as_bytes(),
                field("step_id").as_bytes(),
                field("at").as_bytes(),
                field("type").as_bytes(),
                payload.as_bytes(),
            );
            let hash = String::from_utf8(hash.to_vec()).unwrap();
            conn.execute(
                "UPDATE events SET payload_json = ?1, hash = ?2 WHERE seq = ?3",
                rusqlite::params![payload, hash, seq as i64],
            )
            .unwrap();
            r["payload_json"] = payload.into();
            r["hash"] = hash.into();
            r["prev_hash"] = prev.clone().into();
        }
        prev = r["hash"].as_str().unwrap().to_owned();
        lines.push(r.to_string());
    }
    let copy = a.dir.path().join("rewritten.jsonl");
    std::fs::write(&copy, lines.join("\n") + "\n").unwrap();
    let (db_code, db_json) = json_answer(
        &a,
        &anchor,
        &["anchor", "verify", "--db", path_str(&db), "--origin", ORIGIN],
    );
    let from = format!("file:{}", path_str(&copy));
    let (copy_code, copy_json_) = json_answer(&a, &anchor, &["verify-export", "--from", &from]);
    assert_eq!((db_code, copy_code), (1, 1), "{db_json}\n{copy_json_}");
    let expected = vec![("unvouched".to_owned(), 601, 1200)];
    assert_eq!(ranges(&db_json), expected, "{db_json}");
    assert_eq!(ranges(&copy_json_), expected, "{copy_json_}");
    for json in [&db_json, &copy_json_] {
        assert_eq!(json["last_trusted_head"]["seq"], 600, "{json}");
        assert_eq!(json["affected"]["from"], 601, "{json}");
    }
}

/// A row or record at the largest seqs is a finding like any other: named
/// at once (a gap of any width is one read, never one per tile) and never a
/// crash.
#[test]
fn the_largest_seqs_are_named_at_once_and_never_crash() {
    let a = exported_at_500_and_3000(false);
    let db = tampered(
        &a,
        "huge.db",
        &format!(
            "INSERT INTO events (seq, run_id, step_id, at, type, payload_json, hash) VALUES ({}, 'r', '', 'x', 't', '{{}}', '{}')",
            i64::MAX,
            "a".repeat(64)
        ),
    );
    let mut child = KillOnDrop(
        bin()
            .args(["anchor", "verify", "--db", path_str(&db), "--origin", ORIGIN, "--json"])
            .args(["--anchor", &a.anchor_url(), "--trusted-key", &a.verifier])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let status = wait_with_limit(&mut child, std::time::Duration::from_secs(60));
    let mut out = String::new();
    std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut out).unwrap();
    assert_eq!(status.code(), Some(1), "{out}");
    let json: Value = serde_json::from_str(out.trim()).unwrap();
    assert!(
        ranges(&json).contains(&("missing".to_owned(), 3001, i64::MAX as u64 - 1)),
        "{json}"
    );

    let copy = copy_with(&a, "largest.jsonl", |r| {
        if r["seq"] == 1500 {
            r["seq"] = u64::MAX.into();
        }
        true
    });
    for command in [&["verify-export"][..], &["diff", "--db", path_str(&a.db)]] {
        let out = bin()
            .args(command)
            .args(["--from", &format!("file:{}", path_str(&copy)), "--json"])
            .args(["--anchor", &a.anchor_url(), "--trusted-key", &a.verifier])
            .output()
            .unwrap();
        assert_eq!(code(&out), 1, "{command:?}: {}", stderr(&out));
        assert!(!stderr(&out).contains("panicked"), "{command:?}: {}", stderr(&out));
    }
}

/// Issue 47, the attack round's repros, through the binary: swapped rows,
/// a differing duplicate, swapped lines in a copy, damage in the database
/// alone and a damaged cell. Each verifier names the exact seqs, agrees
/// with the others where they read the same data, and none names an
/// intact event or leaves a finding without its range.
#[test]
fn swaps_duplicates_and_damaged_cells_get_their_exact_ranges_from_every_verifier() {
    let a = exported_at_500_and_3000(false);
    let diff_json = |db: &Path, copy: &Path| {
        let from = format!("file:{}", path_str(copy));
        json_answer(
            &a,
            &a.anchor_url(),
            &["diff", "--db", path_str(db), "--from", &from, "--origin", ORIGIN],
        )
    };
    let intact_copy = a.dir.path().join("events.jsonl");

    // Rows 1500 and 1501 swapped (every field but the seq): those two, not
    // the intact row after them.
    let swap = "UPDATE events SET seq = -1 WHERE seq = 1500; UPDATE events SET seq = 1500 WHERE seq = 1501; UPDATE events SET seq = 1501 WHERE seq = -1;";
    let db = tampered(&a, "swapped.db", swap);
    let (code, json) = anchor_verify_json(&a, &db);
    assert_eq!(code, 1);
    assert_eq!(ranges(&json), vec![("altered".to_owned(), 1500, 1501)], "{json}");
    assert_eq!(json["last_trusted_head"]["seq"], 500, "{json}");
    // `diff` of that database against the intact copy: the same seqs, and
    // the database's last trusted head, not the copy's.
    let (code, json) = diff_json(&db, &intact_copy);
    assert_eq!(code, 1);
    let changed: Vec<(String, u64, u64)> = ranges(&json).into_iter().filter(|r| r.0 == "altered").collect();
    assert_eq!(changed, vec![("altered".to_owned(), 1500, 1501)], "{json}");
    assert_eq!(json["last_trusted_head"]["seq"], 500, "{json}");
    assert_eq!(json["copy"]["last_trusted_head"]["seq"], 3000, "{json}");

    // A second record at 1500 with another payload: an altered range.
    let text = std::fs::read_to_string(&intact_copy).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let mut forged: Value = serde_json::from_str(&lines[1499]).unwrap();
    forged["payload_json"] = r#"{"forged":true}"#.into();
    lines.insert(1500, forged.to_string());
    let duplicate = a.dir.path().join("duplicate.jsonl");
    std::fs::write(&duplicate, lines.join("\n") + "\n").unwrap();
    let (code, json) = copy_json(&a, &["verify-export"], &duplicate);
    assert_eq!(code, 1);
    assert_eq!(ranges(&json), vec![("altered".to_owned(), 1500, 1500)], "{json}");

    // Lines 1500 and 1501 swapped in the copy: the late record is
    // `reordered`, and `diff` does not call it missing from the copy.
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    lines.swap(1499, 1500);
    let swapped = a.dir.path().join("swapped.jsonl");
    std::fs::write(&swapped, lines.join("\n") + "\n").unwrap();
    let (code, json) = copy_json(&a, &["verify-export"], &swapped);
    assert_eq!(code, 1);
    assert_eq!(ranges(&json), vec![("reordered".to_owned(), 1500, 1500)], "{json}");
    let (code, json) = diff_json(&a.db, &swapped);
    assert_eq!(code, 1, "the copy's own finding");
    assert_eq!(json["counts"]["database_only"], 0, "{json}");
    assert_eq!(json["counts"]["same"], 3000, "{json}");

    // Line 1500 moved up to line 101: it alone is out of place, and trust
    // ends there, not where it stood.
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let early = lines.remove(1499);
    lines.insert(100, early);
    let moved = a.dir.path().join("early.jsonl");
    std::fs::write(&moved, lines.join("\n") + "\n").unwrap();
    let (code, json) = copy_json(&a, &["verify-export"], &moved);
    assert_eq!(code, 1);
    assert_eq!(ranges(&json), vec![("reordered".to_owned(), 1500, 1500)], "{json}");
    assert_eq!(json["last_trusted_head"]["seq"], 500, "{json}");

    // A hash cell that is not text: the row is named, and every seq past
    // it as not checked; the affected runs are read past it.
    let db = tampered(&a, "cell.db", "UPDATE events SET hash = x'00' WHERE seq = 1500");
    let (code, json) = anchor_verify_json(&a, &db);
    assert_eq!(code, 1);
    let not_checked = json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "not-whole")
        .unwrap_or_else(|| panic!("rows past the damaged one not named: {json}"));
    assert_eq!(not_checked["seq"], 1501, "{json}");
    assert!(json["affected"]["events"].as_u64().unwrap() > 1000, "{json}");
}
