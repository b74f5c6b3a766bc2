//! Helpers shared by the integration tests: running the binary, making and
//! damaging databases, and finding the real services the test script started.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rusqlite::Connection;

/// The `chainship` binary under test.
pub fn bin() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_chainship"));
    // Tests must not pick up a developer's settings.
    for (key, _) in std::env::vars() {
        if key.starts_with("CHAINSHIP_") && !key.starts_with("CHAINSHIP_TEST_") {
            cmd.env_remove(key);
        }
    }
    cmd.env("RUST_LOG", "warn");
    cmd
}

/// Runs `chainship ARGS` and returns its output.
pub fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("running chainship")
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn code(out: &Output) -> i32 {
    out.status.code().expect("exited, not killed")
}

/// `chainship generate --db PATH --events N` with a fresh file.
pub fn generate(dir: &Path, name: &str, events: u64) -> PathBuf {
    let db = dir.join(name);
    let out = run(&["generate", "--db", path_str(&db), "--events", &events.to_string()]);
    assert_eq!(code(&out), 0, "generate failed: {}", stderr(&out));
    db
}

pub fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
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

/// The Kafka broker the test script started. Panics, loudly, when the test
/// runs without it: a service test never skips silently.
pub fn kafka_addr() -> String {
    service_env("CHAINSHIP_TEST_KAFKA", "a Kafka-protocol broker")
}

/// The S3 endpoint the test script started.
pub fn s3_endpoint() -> String {
    service_env("CHAINSHIP_TEST_S3", "an S3 server")
}

fn service_env(var: &str, what: &str) -> String {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => v,
        _ => panic!("{var} is not set: this test needs {what}; run it through ./scripts/test, which starts one"),
    }
}
