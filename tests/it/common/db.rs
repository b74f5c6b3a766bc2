//! Making, growing and damaging the databases the tests follow and verify.

use rusqlite::Connection;
use std::path::{Path, PathBuf};

use super::*;

/// `chainship generate --db PATH --events N` with a fresh file.
pub fn generate(dir: &Path, name: &str, events: u64) -> PathBuf {
    generate_with(dir, name, events, &[])
}

/// The same with more flags: `--seed 3` for another chain, `--large-every`, ….
pub fn generate_with(dir: &Path, name: &str, events: u64, extra: &[&str]) -> PathBuf {
    let db = dir.join(name);
    let out = bin()
        .args(["generate", "--db", path_str(&db), "--events", &events.to_string()])
        .args(extra)
        .output()
        .expect("running chainship");
    assert_eq!(code(&out), 0, "generate failed: {}", stderr(&out));
    db
}

/// `chainship generate --append`: `events` more events at the end of `db`,
/// as the runtime would write them.
pub fn append(db: &Path, events: u64) {
    let out = run(&[
        "generate",
        "--db",
        path_str(db),
        "--append",
        "--events",
        &events.to_string(),
    ]);
    assert_eq!(code(&out), 0, "generate --append failed: {}", stderr(&out));
}

/// A row whose payload is not UTF-8, with its correct chain hash, appended
/// as a runtime storing raw bytes in a TEXT column would.
pub fn append_non_utf8_event(db: &Path) {
    append_event(
        db,
        "run-x",
        "",
        "2026-11-30T00:00:00Z",
        "tool.call",
        b"{\"note\":\"\xff\xfe raw\"}",
    );
}

/// Appends one event, chained to the last, as the runtime would; the payload
/// is stored as TEXT whatever its bytes.
pub fn append_event(db: &Path, run: &str, step: &str, at: &str, kind: &str, payload: &[u8]) {
    let conn = tamper(db);
    let (seq, prev): (i64, String) = conn
        .query_row("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    let seq = seq + 1;
    let hash = chainship_chain::event_hash(
        prev.as_bytes(),
        seq as u64,
        run.as_bytes(),
        step.as_bytes(),
        at.as_bytes(),
        kind.as_bytes(),
        payload,
    );
    conn.execute(
        "INSERT INTO events (seq, run_id, step_id, at, type, payload_json, hash) VALUES (?1, ?2, ?3, ?4, ?5, CAST(?6 AS TEXT), ?7)",
        rusqlite::params![seq, run, step, at, kind, payload, std::str::from_utf8(&hash).unwrap()],
    )
    .unwrap();
}

/// A read-write connection for tests that damage a database on purpose.
pub fn tamper(db: &Path) -> Connection {
    Connection::open(db).expect("opening the database to damage it")
}

/// The database's head as `SEQ:HASH`.
pub fn db_head(db: &Path) -> String {
    let conn = Connection::open(db).unwrap();
    conn.query_row(
        "SELECT seq || ':' || hash FROM events ORDER BY seq DESC LIMIT 1",
        [],
        |r| r.get(0),
    )
    .unwrap()
}

/// A live writer appending `rate` events per second to `db`, as a runtime
/// would (`extra`: e.g. `--follow-max N`); killed if the test ends first.
pub fn live_writer(db: &Path, rate: &str, extra: &[&str]) -> KillOnDrop {
    let child = bin()
        .args([
            "generate",
            "--db",
            path_str(db),
            "--append",
            "--events",
            "0",
            "--follow-rate",
            rate,
        ])
        .args(extra)
        .spawn()
        .expect("starting the writer");
    KillOnDrop(child)
}

/// Stops a live writer (SIGTERM) and returns the database head it left.
pub fn stop_writer(writer: &mut KillOnDrop, db: &Path) -> String {
    signal(writer, SIGTERM);
    let status = wait_with_limit(writer, std::time::Duration::from_secs(5));
    assert!(status.success(), "the writer stops cleanly on SIGTERM: {status}");
    db_head(db)
}

/// Waits until the cursor file holds `head`, at most `limit`.
pub fn wait_for_cursor(cursor: &Path, head: &str, limit: std::time::Duration) {
    let deadline = std::time::Instant::now() + limit;
    while std::fs::read_to_string(cursor).unwrap_or_default().trim() != head {
        assert!(
            std::time::Instant::now() < deadline,
            "the follower did not reach {head} within {limit:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}
