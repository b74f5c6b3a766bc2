//! `chainship restore` and `chainship diff`: the record given back from the
//! trusted copy of each sink, byte for byte, and every way a database can
//! differ from it named exactly; a damaged copy or a killed restore leaves
//! nothing under `--out`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::*;
use rusqlite::Connection;

const ORIGIN: &str = "restore/agentrt";

/// An anchored export of `events` events: `audit.db`, its copy in `sink`
/// (`""`: the file `events.jsonl`), heads signed into `anchors/`.
fn exported(events: u64, sink: &str) -> Anchored {
    let s = Anchored::new(events, "restore/chainship");
    let sink = if sink.is_empty() { copy_url(&s) } else { sink.to_owned() };
    ship(&s, &sink, "cursor", &s.anchor_url());
    s
}

/// `follow --once` of the scaffold's database into `sink`, heads to `anchor`.
fn ship(s: &Anchored, sink: &str, cursor: &str, anchor: &str) {
    let cursor = s.dir.path().join(cursor);
    let mut cmd = bin();
    s3_env(&mut cmd)
        .args(["follow", "--once", "--db", path_str(&s.db), "--origin", ORIGIN])
        .args(["--sink", sink, "--cursor", path_str(&cursor)])
        .args(["--batch-size", "250", "--s3-batch-events", "250"])
        .args(["--anchor", anchor, "--signing-key", path_str(&s.key)])
        .args(s3_flags(sink));
    if !cursor.exists() {
        cmd.arg("--from-start");
    }
    let out = cmd.output().unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

/// The test S3 server's flags, for an `s3://` sink or copy.
fn s3_flags(url: &str) -> Vec<String> {
    if url.starts_with("s3://") {
        vec!["--s3-endpoint".into(), s3_endpoint(), "--s3-path-style".into()]
    } else {
        Vec::new()
    }
}

fn copy_url(s: &Anchored) -> String {
    format!("file:{}", path_str(&s.dir.path().join("events.jsonl")))
}

/// `chainship <command> --json --from COPY --anchor STORE --trusted-key K --origin O ...`.
fn against_copy(s: &Anchored, command: &str, from: &str, extra: &[&str]) -> (i32, serde_json::Value, String) {
    let mut cmd = bin();
    s3_env(&mut cmd)
        .args([command, "--json", "--from", from, "--origin", ORIGIN])
        .args(["--anchor", &s.anchor_url(), "--trusted-key", &s.verifier])
        .args(s3_flags(from))
        .args(extra);
    let out = cmd.output().unwrap();
    let json = serde_json::from_str(&stdout(&out)).unwrap_or(serde_json::Value::Null);
    (code(&out), json, stderr(&out))
}

fn restore(s: &Anchored, from: &str, out: &Path, extra: &[&str]) -> (i32, serde_json::Value, String) {
    let mut args = vec!["--out", path_str(out)];
    args.extend_from_slice(extra);
    against_copy(s, "restore", from, &args)
}

fn diff(s: &Anchored, db: &Path) -> (i32, serde_json::Value) {
    let (c, json, err) = against_copy(s, "diff", &copy_url(s), &["--db", path_str(db)]);
    assert!(c == 0 || c == 1, "diff exits 0 or 1 here: {c} {err}");
    (c, json)
}

/// The events table as `sqlite3 .dump` shows it: its CREATE statement, every
/// row with each value's storage class and exact bytes, and `sqlite_sequence`.
fn dump(db: &Path) -> (String, Vec<String>, Vec<(String, i64)>) {
    let conn = Connection::open(db).unwrap();
    let create: String = conn
        .query_row("SELECT sql FROM sqlite_master WHERE name = 'events'", [], |r| r.get(0))
        .unwrap();
    let mut rows = conn
        .prepare(
            "SELECT quote(seq) || ',' || quote(run_id) || ',' || quote(step_id) || ',' || quote(at) || ','
             || quote(type) || ',' || hex(payload_json) || ',' || typeof(payload_json) || ',' || quote(hash)
             FROM events ORDER BY seq",
        )
        .unwrap();
    let rows: Vec<String> = rows.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
    let mut seqs = conn.prepare("SELECT name, seq FROM sqlite_sequence").unwrap();
    let seqs = seqs
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    (create, rows, seqs)
}

/// A restored database must be the original's events table and pass both verifiers.
fn assert_restored_as_original(s: &Anchored, restored: &Path) {
    assert_eq!(dump(restored), dump(&s.db), "the restored table is the original's");
    let head = db_head(&s.db);
    let verify = run(&["verify", "--db", path_str(restored), "--head", &head]);
    assert_eq!(code(&verify), 0, "{}", stdout(&verify));
    let anchor = run(&[
        "anchor",
        "verify",
        "--db",
        path_str(restored),
        "--anchor",
        &s.anchor_url(),
        "--origin",
        ORIGIN,
        "--trusted-key",
        &s.verifier,
    ]);
    assert_eq!(code(&anchor), 0, "{}", stdout(&anchor));
}

/// Files in `dir` whose name contains `name` (the output and any partial of it).
fn files_named(dir: &Path, name: &str) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(name))
        .collect()
}

#[test]
fn restore_from_a_file_copy_gives_back_the_original_table() {
    let dir = tempfile::TempDir::new().unwrap();
    let s = Anchored::new(0, "restore/chainship");
    // Large payloads and a field that is not UTF-8 travel and come back exactly.
    drop(std::fs::remove_file(&s.db));
    let db = generate_with(
        dir.path(),
        "src.db",
        1200,
        &["--large-every", "400", "--large-bytes", "70000"],
    );
    append_non_utf8_event(&db);
    append(&db, 30);
    std::fs::copy(&db, &s.db).unwrap();
    ship(&s, &copy_url(&s), "cursor", &s.anchor_url());
    let out = s.dir.path().join("restored.db");
    let (c, json, err) = restore(&s, &copy_url(&s), &out, &[]);
    assert_eq!(c, 0, "{err} {json}");
    assert_eq!(json["status"], "restored");
    assert_eq!(json["events"], 1231);
    assert_eq!(json["last_trusted_head"]["seq"], 1231);
    assert_restored_as_original(&s, &out);
    assert_eq!(
        files_named(s.dir.path(), "restored"),
        vec!["restored.db"],
        "no partial file left"
    );

    // An existing --out is never replaced.
    let before = std::fs::read(&out).unwrap();
    let (c, _, err) = restore(&s, &copy_url(&s), &out, &[]);
    assert_eq!(c, 2, "{err}");
    assert!(err.contains("--out") && err.contains("already exists"), "{err}");
    assert_eq!(std::fs::read(&out).unwrap(), before);
}

#[tokio::test(flavor = "multi_thread")]
async fn restore_from_an_s3_copy_gives_back_the_original_table() {
    let _services = services().await;
    let bucket = bucket("restore").await;
    let s = exported(1500, &format!("s3://{bucket}/exports"));
    let out = s.dir.path().join("restored.db");
    let (c, json, err) = restore(&s, &format!("s3://{bucket}/exports"), &out, &[]);
    assert_eq!(c, 0, "{err} {json}");
    assert_eq!(json["events"], 1500);
    assert_restored_as_original(&s, &out);
}

#[tokio::test(flavor = "multi_thread")]
async fn restore_from_a_kafka_copy_gives_back_the_original_table() {
    let _services = services().await;
    let topic = kafka_topic("restore", 1).await;
    let sink = format!("kafka://{}/{topic}", kafka_addr());
    let s = exported(1500, &sink);
    let out = s.dir.path().join("restored.db");
    let (c, json, err) = restore(&s, &sink, &out, &[]);
    assert_eq!(c, 0, "{err} {json}");
    assert_eq!(json["events"], 1500);
    assert_restored_as_original(&s, &out);
}

#[test]
fn restore_stops_at_the_last_trusted_head_unless_told_otherwise() {
    let s = exported(1000, "");
    // 200 more events reach the copy, but their heads go to another store.
    append(&s.db, 200);
    let elsewhere = s.dir.path().join("other-store");
    std::fs::create_dir(&elsewhere).unwrap();
    ship(&s, &copy_url(&s), "cursor", &format!("file:{}", path_str(&elsewhere)));

    let out = s.dir.path().join("anchored.db");
    let (c, json, err) = restore(&s, &copy_url(&s), &out, &[]);
    assert_eq!(c, 0, "{err}");
    assert_eq!(
        (json["events"].as_u64(), json["unanchored_not_written"].as_u64()),
        (Some(1000), Some(200))
    );
    assert_eq!(db_head(&out), format!("1000:{}", hash_at(&s.db, 1000)));

    let out = s.dir.path().join("all.db");
    let (c, json, err) = restore(&s, &copy_url(&s), &out, &["--include-unanchored"]);
    assert_eq!(c, 0, "{err}");
    assert_eq!(
        (json["events"].as_u64(), json["unanchored_written"].as_u64()),
        (Some(1200), Some(200))
    );
    assert_eq!(dump(&out), dump(&s.db));
    // The follower resumes on the restored database with its cursor and sink.
    for stale in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{stale}", path_str(&s.db)));
    }
    std::fs::rename(&out, &s.db).unwrap();
    append(&s.db, 10);
    ship(&s, &copy_url(&s), "cursor", &format!("file:{}", path_str(&elsewhere)));
    assert_eq!(s.lines().len(), 1210);

    let out = s.dir.path().join("early.db");
    let (c, json, err) = restore(&s, &copy_url(&s), &out, &["--to", "400"]);
    assert_eq!(c, 0, "{err}");
    assert_eq!(json["events"], 400);
    let head = format!("400:{}", hash_at(&s.db, 400));
    let verify = run(&["verify", "--db", path_str(&out), "--head", &head]);
    assert_eq!(code(&verify), 0, "{}", stdout(&verify));
    let conn = Connection::open(&out).unwrap();
    let next: i64 = conn
        .query_row("SELECT seq FROM sqlite_sequence WHERE name = 'events'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(next, 400, "sqlite_sequence is set to the restored end");
}

fn hash_at(db: &Path, seq: u64) -> String {
    Connection::open(db)
        .unwrap()
        .query_row("SELECT hash FROM events WHERE seq = ?1", [seq as i64], |r| r.get(0))
        .unwrap()
}

#[test]
fn a_damaged_copy_restores_nothing_and_names_the_seq() {
    let s = exported(600, "");
    let lines = s.lines();
    let write = |name: &str, lines: &[String]| -> String {
        let path = s.dir.path().join(name);
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        format!("file:{}", path_str(&path))
    };
    let mut gap = lines.clone();
    gap.remove(299); // seq 300
    let mut altered = lines.clone();
    altered[149] = altered[149].replacen("\"at\":\"", "\"at\":\"1", 1); // seq 150
    let mut foreign = lines.clone();
    foreign[449] = foreign[449].replace(ORIGIN, "someone/else"); // seq 450
    for (name, copy, kind, seq) in [
        ("gap", gap, "gap", 300),
        ("altered", altered, "altered", 150),
        ("foreign", foreign, "foreign", 450),
    ] {
        let from = write(&format!("{name}.jsonl"), &copy);
        let out = s.dir.path().join(format!("{name}.db"));
        let (c, json, err) = restore(&s, &from, &out, &[]);
        assert_eq!(c, 1, "{name}: {err} {json}");
        assert_eq!(json["status"], "refused", "{name}");
        let findings = json["findings"].as_array().unwrap();
        assert!(
            findings.iter().any(|f| f["kind"] == kind && f["seq"] == seq),
            "{name}: {findings:?}"
        );
        assert!(
            files_named(s.dir.path(), &format!("{name}.db")).is_empty(),
            "{name}: nothing left"
        );
        // The refusal names the runs the bad seq touches, as verify-export does.
        let (_, exported, _) = against_copy(&s, "verify-export", &from, &[]);
        assert!(json["affected"]["runs"].is_array(), "{name}: {json}");
        assert_eq!(json["affected"], exported["affected"], "{name}");
    }
}

#[test]
fn a_restore_killed_at_any_moment_leaves_nothing_under_out() {
    let s = Anchored::new(0, "restore/chainship");
    drop(std::fs::remove_file(&s.db));
    let db = generate_with(s.dir.path(), "big.db", 60_000, &["--large-every", "0"]);
    std::fs::rename(&db, &s.db).unwrap();
    ship(&s, &copy_url(&s), "cursor", &s.anchor_url());
    let mut rng = XorShift::from_clock();
    let mut killed = 0;
    for round in 0..4 {
        let out = s.dir.path().join(format!("killed-{round}.db"));
        let mut cmd = bin();
        cmd.args([
            "restore",
            "--from",
            &copy_url(&s),
            "--origin",
            ORIGIN,
            "--out",
            path_str(&out),
        ])
        .args(["--anchor", &s.anchor_url(), "--trusted-key", &s.verifier])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
        let mut child = KillOnDrop(cmd.spawn().unwrap());
        // Kill once the partial database exists, a little later each time.
        let name = format!(".killed-{round}.db.partial");
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while files_named(s.dir.path(), &name).is_empty() && child.try_wait().unwrap().is_none() {
            assert!(std::time::Instant::now() < deadline, "no partial file appeared");
            std::thread::sleep(Duration::from_millis(2));
        }
        std::thread::sleep(Duration::from_millis(rng.below(40 * (round + 1))));
        signal(&child, 9);
        let status = wait_with_limit(&mut child, Duration::from_secs(10));
        if status.success() {
            // It finished first: then the whole database is there.
            assert_eq!(dump(&out), dump(&s.db));
            continue;
        }
        assert!(!out.exists(), "round {round}: a killed restore left {}", out.display());
        killed += 1;
    }
    assert!(
        killed > 0,
        "no round killed a restore while it ran: the test proved nothing"
    );
    // A partial file left by a killed run never stops the next restore.
    let out = s.dir.path().join("after.db");
    let (c, _, err) = restore(&s, &copy_url(&s), &out, &[]);
    assert_eq!(c, 0, "{err}");
    assert_eq!(dump(&out), dump(&s.db));
}

/// A copy of the original database, damaged by `sql`.
fn damaged(s: &Anchored, name: &str, sql: &str) -> PathBuf {
    let db = s.dir.path().join(name);
    let (c, _, err) = restore(s, &copy_url(s), &db, &[]);
    assert_eq!(c, 0, "{err}");
    tamper(&db).execute_batch(sql).unwrap();
    db
}

fn ranges(json: &serde_json::Value, key: &str) -> Vec<(u64, u64, String)> {
    json[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["from"].as_u64().unwrap(),
                r["to"].as_u64().unwrap(),
                r["why"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

#[test]
fn diff_names_each_kind_of_damage_exactly() {
    let s = exported(500, "");
    let (c, json) = diff(&s, &s.db);
    assert_eq!((c, json["status"].as_str()), (0, Some("same")), "{json}");
    assert_eq!(json["counts"]["same"], 500);

    // One field altered at seq 123, the hash left as it was.
    let db = damaged(
        &s,
        "altered.db",
        "UPDATE events SET type = 'run.finished' WHERE seq = 123",
    );
    let (c, json) = diff(&s, &db);
    assert_eq!(c, 1);
    let changed = json["changed"].as_array().unwrap();
    assert_eq!(changed.len(), 1, "{changed:?}");
    assert_eq!(changed[0]["seq"], 123);
    let field = &changed[0]["fields"][0];
    assert_eq!(
        (field["field"].as_str(), field["database"].as_str()),
        (Some("type"), Some("run.finished"))
    );
    let original: String = Connection::open(&s.db)
        .unwrap()
        .query_row("SELECT type FROM events WHERE seq = 123", [], |r| r.get(0))
        .unwrap();
    assert_eq!(field["copy"].as_str(), Some(original.as_str()));
    assert!(json["fork"].is_null(), "the stored hashes still agree: no fork");

    // A range deleted.
    let db = damaged(&s, "deleted.db", "DELETE FROM events WHERE seq BETWEEN 200 AND 219");
    let (c, json) = diff(&s, &db);
    assert_eq!(c, 1);
    assert_eq!(ranges(&json, "missing"), vec![(200, 219, "deleted".into())]);
    assert_eq!(json["counts"]["changed"], 0);

    // Cut at the end.
    let db = damaged(&s, "cut.db", "DELETE FROM events WHERE seq > 480");
    let (c, json) = diff(&s, &db);
    assert_eq!(c, 1);
    assert_eq!(ranges(&json, "missing"), vec![(481, 500, "cut".into())]);

    // An older backup (seq 300) restored and re-grown with other events.
    let db = s.dir.path().join("regrown.db");
    let (c, _, err) = restore(&s, &copy_url(&s), &db, &["--to", "300"]);
    assert_eq!(c, 0, "{err}");
    let grow = run(&[
        "generate",
        "--db",
        path_str(&db),
        "--append",
        "--events",
        "250",
        "--seed",
        "9",
    ]);
    assert_eq!(code(&grow), 0, "{}", stderr(&grow));
    let (c, json) = diff(&s, &db);
    assert_eq!(c, 1);
    assert_eq!(json["fork"]["seq"], 301, "{}", json["fork"]);
    assert_eq!(json["fork"]["database_hash"].as_str(), Some(hash_at(&db, 301).as_str()));
    assert_eq!(json["fork"]["copy_hash"].as_str(), Some(hash_at(&s.db, 301).as_str()));
    assert_eq!(json["counts"]["changed"], 200);
    assert_eq!(json["counts"]["same"], 300);
    assert_eq!(json["beyond_copy"]["from"], 501);
    assert_eq!(json["beyond_copy"]["count"], 50);

    // Rows appended after the copy: shown, and not a difference.
    let db = damaged(&s, "grown.db", "");
    append(&db, 25);
    let (c, json) = diff(&s, &db);
    assert_eq!(c, 0, "{json}");
    assert_eq!(
        (json["beyond_copy"]["from"].as_u64(), json["beyond_copy"]["to"].as_u64()),
        (Some(501), Some(525))
    );
}

#[test]
fn diff_text_shows_values_shortened_with_their_lengths() {
    let s = exported(50, "");
    let long = "x".repeat(5000);
    let db = damaged(
        &s,
        "long.db",
        &format!("UPDATE events SET payload_json = '{long}' WHERE seq = 7"),
    );
    let out = run(&[
        "diff",
        "--db",
        path_str(&db),
        "--from",
        &copy_url(&s),
        "--anchor",
        &s.anchor_url(),
        "--trusted-key",
        &s.verifier,
    ]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("changed at seq 7"), "{text}");
    assert!(text.contains("(5000 bytes, first difference at byte 0)"), "{text}");
    assert!(text.lines().all(|l| l.len() < 400), "long values are shortened: {text}");

    let missing = run(&[
        "diff",
        "--db",
        "/nonexistent/audit.db",
        "--from",
        &copy_url(&s),
        "--anchor",
        &s.anchor_url(),
        "--trusted-key",
        &s.verifier,
    ]);
    assert_eq!(code(&missing), 2, "{}", stderr(&missing));
}

#[test]
fn diff_never_calls_a_database_the_same_when_it_could_not_compare_all_of_it() {
    let s = exported(300, "");
    // Rows no seq order reaches.
    let db = damaged(
        &s,
        "planted.db",
        "INSERT INTO events VALUES (0,'evil','','x','x','x','x'); INSERT INTO events VALUES (-7,'evil','','x','x','x','x')",
    );
    let (c, json) = diff(&s, &db);
    assert_eq!(c, 1, "{json}");
    assert!(
        json["unreachable_row"]
            .as_str()
            .is_some_and(|r| r.contains("-7") || r.contains('0')),
        "{json}"
    );

    // An event past the copy's end, altered: the database's own chain names it.
    let db = damaged(&s, "tail.db", "");
    append(&db, 5);
    tamper(&db)
        .execute("UPDATE events SET payload_json = 'evil' WHERE seq = 303", [])
        .unwrap();
    let (c, json) = diff(&s, &db);
    assert_eq!(c, 1, "{json}");
    assert_eq!(json["database_break"]["seq"], 303);

    // A field that is not text: reported, with the document still printed.
    let db = damaged(
        &s,
        "blob.db",
        "UPDATE events SET payload_json = CAST(payload_json AS BLOB) WHERE seq = 10",
    );
    let (c, json) = diff(&s, &db);
    assert_eq!(c, 1, "{json}");
    assert!(
        json["database_unreadable"]["error"]
            .as_str()
            .unwrap()
            .contains("seq 10"),
        "{json}"
    );
    assert_eq!(json["counts"]["same"], 9);

    // Two different byte strings that are not UTF-8 never look alike.
    let db = damaged(
        &s,
        "bytes.db",
        "UPDATE events SET run_id = CAST(x'fe41c3' AS TEXT) WHERE seq = 12",
    );
    let (_, json) = diff(&s, &db);
    let field = &json["changed"][0]["fields"][0];
    assert_eq!(field["field"], "run_id");
    assert_eq!(field["database"], "\\xfeA\\xc3");
    assert_ne!(field["copy"], field["database"]);
}
