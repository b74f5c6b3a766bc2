//! Operator paths (issue 21, items 5 and 6): metrics that tell the truth
//! while the anchor store is down and right after a (re)start, and the
//! process's behaviour when its stdout or stderr is closed or when logs
//! are JSON.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common::*;
use tempfile::TempDir;

/// GET /metrics; None while nothing listens or the answer is not a 200.
fn scrape(port: u16) -> Option<String> {
    match http_get(port, "/metrics", Duration::from_secs(5))? {
        (200, body) => Some(body),
        _ => None,
    }
}

/// Scrapes until `ready` holds for the body, at most `limit`.
fn scrape_until(port: u16, limit: Duration, what: &str, ready: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + limit;
    let mut last = String::new();
    loop {
        if let Some(body) = scrape(port) {
            if ready(&body) {
                return body;
            }
            last = body;
        }
        assert!(
            Instant::now() < deadline,
            "{what} within {limit:?}; last scrape:\n{last}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A long-running follower of `db` into `dir/out.jsonl`, serving metrics on `port`.
fn follower(dir: &Path, db: &Path, port: u16, extra: &[&str]) -> KillOnDrop {
    let child = bin()
        .args([
            "follow",
            "--db",
            path_str(db),
            "--origin",
            "ops/agentrt",
            "--batch-size",
            "100",
        ])
        .args(["--sink", &format!("file:{}", path_str(&dir.join("out.jsonl")))])
        .args(["--cursor", path_str(&dir.join("cursor"))])
        .args(["--metrics-addr", &format!("127.0.0.1:{port}")])
        .args(extra)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    KillOnDrop(child)
}

const AGE: &str = "chainship_anchor_seconds_since_publish";

#[test]
fn anchor_age_grows_while_the_store_is_down_and_drops_once_it_publishes() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "a.db", 300);
    let (key, _) = keygen(dir.path(), "ops/k", "k");
    // The store is "down" from the start: its directory is not there yet.
    let anchors = dir.path().join("anchors");
    let port = free_port();
    let anchor = format!("file:{}", path_str(&anchors));
    let _follower = follower(
        dir.path(),
        &db,
        port,
        &[
            "--from-start",
            "--anchor",
            &anchor,
            "--signing-key",
            path_str(&key),
            "--retry-max-delay",
            "1s",
        ],
    );
    let first = scrape_until(
        port,
        Duration::from_secs(20),
        "all 300 events delivered and the age exported",
        |b| metric(b, "chainship_cursor_seq") == Some(300.0) && metric(b, AGE).is_some(),
    );
    std::thread::sleep(Duration::from_secs(3));
    let second = scrape(port).expect("the follower keeps serving metrics");
    let (before, after) = (metric(&first, AGE).unwrap(), metric(&second, AGE).unwrap());
    assert!(
        after - before >= 2.0,
        "{AGE} must grow while publishing fails: {before} then, 3 s later, {after}"
    );
    assert!(
        metric(&second, "chainship_anchor_publish_errors_total").unwrap_or(0.0) >= 1.0,
        "the store was down: {second}"
    );

    // The store comes back: the newest head is published and the age starts over.
    std::fs::create_dir(&anchors).unwrap();
    scrape_until(
        port,
        Duration::from_secs(15),
        "the head published once the store is back",
        |b| metric(b, "chainship_anchor_last_seq") == Some(300.0),
    );
    let body = scrape(port).unwrap();
    let age = metric(&body, AGE).unwrap();
    assert!(age < 2.0, "{AGE} counts from the publish that just happened: {age}");
}

#[test]
fn counters_start_at_zero_and_the_cursor_is_known_right_after_a_restart() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "b.db", 300);
    let port = free_port();
    let mut first = follower(dir.path(), &db, port, &["--from-start"]);
    // The very first answer already names every error and integrity counter.
    let body = scrape_until(port, Duration::from_secs(20), "the metrics port answering", |_| true);
    for series in [
        "chainship_sink_errors_total{kind=\"transient\"}",
        "chainship_sink_errors_total{kind=\"permanent\"}",
        "chainship_sink_errors_total{kind=\"integrity\"}",
        "chainship_anchor_publish_errors_total",
        "chainship_chain_breaks_total",
        "chainship_retries_total",
        "chainship_duplicates_avoided_total",
    ] {
        assert_eq!(
            metric(&body, series),
            Some(0.0),
            "{series} at 0 from the start:\n{body}"
        );
    }
    wait_for_cursor(&dir.path().join("cursor"), &db_head(&db), Duration::from_secs(20));
    signal(&first, SIGTERM);
    assert!(wait_with_limit(&mut first, Duration::from_secs(10)).success());

    // Restarted on the same cursor with nothing new to send: the cursor
    // gauge says where it resumed, though no batch has been delivered.
    let port = free_port();
    let _second = follower(dir.path(), &db, port, &[]);
    let body = scrape_until(port, Duration::from_secs(20), "chainship_cursor_seq exported", |b| {
        metric(b, "chainship_cursor_seq").is_some()
    });
    assert_eq!(metric(&body, "chainship_cursor_seq"), Some(300.0), "{body}");
    assert_eq!(
        metric(&body, "chainship_batches_total"),
        Some(0.0),
        "no batch sent: {body}"
    );
    assert_eq!(metric(&body, "chainship_export_lag_events"), Some(0.0), "{body}");
    // What /healthz says, as a series for alerts: healthy here.
    assert_eq!(metric(&body, "chainship_healthy"), Some(1.0), "{body}");
}

#[test]
fn a_stdout_sink_whose_reader_left_ends_quietly_with_141() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "c.db", 5000);
    let (reader, writer) = std::io::pipe().unwrap();
    let mut child = KillOnDrop(
        bin()
            .args([
                "follow",
                "--once",
                "--db",
                path_str(&db),
                "--origin",
                "ops/agentrt",
                "--from-start",
            ])
            .args(["--sink", "stdout:", "--cursor", path_str(&dir.path().join("cursor"))])
            .stdout(writer)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // `| head -1`: read one line, then close the pipe.
    let mut line = String::new();
    BufReader::new(reader).read_line(&mut line).unwrap();
    assert!(line.starts_with("{\"origin\":\"ops/agentrt\",\"seq\":1,"), "{line}");
    let status = wait_with_limit(&mut child, Duration::from_secs(30));
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert_eq!(
        status.code(),
        Some(141),
        "the status of a tool ended by a closed pipe; stderr:\n{err}"
    );
    assert!(!err.contains("Broken pipe") && !err.contains("panicked"), "{err}");
}

/// A pipe for stderr whose reader is already gone, as when the log
/// collector a sidecar writes to has died.
fn closed_stderr() -> std::io::PipeWriter {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    writer
}

#[test]
fn a_closed_stderr_changes_no_exit_code() {
    let dir = TempDir::new().unwrap();
    // The final error line cannot be written: still exit 2, not a panic (101).
    for format in ["text", "json"] {
        let status = bin()
            .args([
                "--log-format",
                format,
                "verify",
                "--db",
                path_str(&dir.path().join("missing.db")),
            ])
            .stderr(closed_stderr())
            .status()
            .unwrap();
        assert_eq!(status.code(), Some(2), "--log-format {format}");
    }
    // Log lines (tracing's writer) cannot be written either: the run is unaffected.
    let db = generate(dir.path(), "d.db", 10);
    let status = bin()
        .env("RUST_LOG", "info")
        .args([
            "follow",
            "--once",
            "--db",
            path_str(&db),
            "--origin",
            "ops/agentrt",
            "--from-start",
        ])
        .args(["--sink", &format!("file:{}", path_str(&dir.path().join("out.jsonl")))])
        .args(["--cursor", path_str(&dir.path().join("cursor"))])
        .stderr(closed_stderr())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0));
    assert_eq!(reverify_jsonl(&dir.path().join("out.jsonl"), "ops/agentrt").0, 10);
}

#[test]
fn with_json_logs_the_final_error_is_a_json_log_line() {
    let dir = TempDir::new().unwrap();
    let missing = dir.path().join("missing.db");
    let cases: [(&[&str], &str); 2] = [
        // An error from the command.
        (
            &["--log-format", "json", "verify", "--db", path_str(&missing)],
            "missing.db: no such file",
        ),
        // An error found before the arguments are parsed.
        (&["--log-format=json", "verify", "--no-such-flag"], "--no-such-flag"),
    ];
    for (args, named) in cases {
        let out = bin().env("RUST_LOG", "info").args(args).output().unwrap();
        assert_eq!(code(&out), 2, "{args:?}");
        let lines: Vec<serde_json::Value> = stderr(&out)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {l}")))
            .collect();
        let last = lines.last().unwrap_or_else(|| panic!("{args:?}: nothing on stderr"));
        assert_eq!(last["level"], "ERROR", "{last}");
        assert_eq!(last["exit_code"], 2, "{last}");
        let message = last["message"].as_str().unwrap_or_default();
        assert!(message.contains(named), "{last}");
    }
}
