//! Operability: /metrics, readiness (/readyz, /healthz) and liveness (/livez) during a follow, and `chainship check`
//! against the real services.

use std::time::{Duration, Instant};

use crate::common::*;
use tempfile::TempDir;

/// How long a GET of the metrics port may take.
const READ: Duration = Duration::from_secs(5);

#[test]
fn metrics_show_lag_falling_to_zero_and_health_turns_503_on_a_break() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "m.db", 5000);
    let anchors = dir.path().join("anchors");
    std::fs::create_dir(&anchors).unwrap();
    let (key, _) = keygen(dir.path(), "m/k", "k");
    let port = free_port();
    let mut follower = KillOnDrop(
        bin()
            .args([
                "follow",
                "--db",
                path_str(&db),
                "--origin",
                "m/agentrt",
                "--from-start",
                "--on-break",
                "wait",
            ])
            .args(["--sink", &format!("file:{}", path_str(&dir.path().join("out.jsonl")))])
            .args(["--cursor", path_str(&dir.path().join("cursor")), "--batch-size", "100"])
            .args([
                "--anchor",
                &format!("file:{}", path_str(&anchors)),
                "--signing-key",
                path_str(&key),
            ])
            .args(["--metrics-addr", &format!("127.0.0.1:{port}")])
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut lags = Vec::new();
    loop {
        assert!(Instant::now() < deadline, "lag never reached 0: {lags:?}");
        if let Some((200, body)) = http_get(port, "/metrics", READ) {
            let lag = metric(&body, "chainship_export_lag_events");
            let anchored = metric(&body, "chainship_anchor_last_seq");
            lags.push(lag);
            if lag == Some(0.0) && anchored == Some(5000.0) {
                assert_eq!(metric(&body, "chainship_cursor_seq"), Some(5000.0));
                assert_eq!(metric(&body, "chainship_events_exported_total"), Some(5000.0));
                assert!(body.contains("# HELP chainship_export_lag_events"), "{body}");
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(http_get(port, "/healthz", READ).unwrap().0, 200);

    // A writer appends an event whose hash does not chain.
    tamper(&db)
        .execute(
            "INSERT INTO events (seq, run_id, step_id, at, type, payload_json, hash) VALUES (5001, 'r', '', 't', 'k', '{}', ?1)",
            ["0".repeat(64)],
        )
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        assert!(Instant::now() < deadline, "/healthz never turned 503");
        if let Some((503, body)) = http_get(port, "/healthz", READ) {
            assert!(body.contains("chain broken") && body.contains("seq 5001"), "{body}");
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let (_, body) = http_get(port, "/metrics", READ).unwrap();
    assert_eq!(metric(&body, "chainship_chain_breaks_total"), Some(1.0));
    assert!(follower.try_wait().unwrap().is_none(), "--on-break wait keeps serving");
    // Readiness says what /healthz says; liveness says the process is fine,
    // so a liveness probe never restarts it into the break.
    assert_eq!(http_get(port, "/readyz", READ).unwrap().0, 503);
    let (live, body) = http_get(port, "/livez", READ).unwrap();
    assert_eq!(live, 200, "{body}");

    // The runtime writes on past the break: the head is still read, so the
    // lag grows instead of reading 0.
    let db_conn = tamper(&db);
    for seq in 5002..5302 {
        db_conn
            .execute(
                "INSERT INTO events (seq, run_id, step_id, at, type, payload_json, hash) VALUES (?1, 'r', '', 't', 'k', '{}', ?2)",
                rusqlite::params![seq, "0".repeat(64)],
            )
            .unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, body) = http_get(port, "/metrics", READ).unwrap();
        if metric(&body, "chainship_db_head_seq") == Some(5301.0) {
            assert_eq!(metric(&body, "chainship_export_lag_events"), Some(301.0), "{body}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the database head is not read while waiting at a break"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(http_get(port, "/livez", READ).unwrap().0, 200);
    signal(&follower, SIGTERM);
    assert_eq!(wait_with_limit(&mut follower, Duration::from_secs(10)).code(), Some(1));
}

#[tokio::test]
async fn check_reports_each_part_ok_or_its_exact_failure() {
    let _services = services().await;
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "c.db", 10);
    let bucket = locked_bucket("check").await;
    let (key, _) = keygen(dir.path(), "c/k", "k");
    let endpoint = s3_endpoint();
    let mut cmd = bin();
    s3_env(&mut cmd)
        .args([
            "check",
            "--json",
            "--db",
            path_str(&db),
            "--origin",
            "c/agentrt",
            "--signing-key",
            path_str(&key),
        ])
        .args(["--sink", &format!("kafka://{}/check-topic", kafka_addr())])
        .args(["--cursor", &format!("file:{}", path_str(&dir.path().join("cursor")))])
        .args([
            "--anchor",
            &format!("s3://{bucket}/heads"),
            "--anchor-s3-endpoint",
            &endpoint,
            "--anchor-s3-path-style",
        ]);
    let out = cmd.output().unwrap();
    let json: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&out)));
    assert_eq!(code(&out), 0, "{json}");
    let checks = json["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 5, "{json}");
    assert!(
        checks
            .iter()
            .any(|c| c["detail"].as_str().unwrap_or("").contains("Object Lock on")),
        "{json}"
    );

    // A missing bucket and an absent anchor mount are named, exit 1.
    let mut cmd = bin();
    s3_env(&mut cmd)
        .args([
            "check",
            "--origin",
            "c/agentrt",
            "--sink",
            "s3://no-such-bucket-chainship/x",
        ])
        .args([
            "--s3-endpoint",
            &endpoint,
            "--s3-path-style",
            "--anchor",
            "file:/nonexistent-anchor-mount",
        ]);
    let out = cmd.output().unwrap();
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    let text = stdout(&out);
    assert!(
        text.contains("FAIL  sink s3://no-such-bucket-chainship/x:") && text.contains("NoSuchBucket")
            || text.contains("404"),
        "{text}"
    );
    assert!(
        text.contains("FAIL  anchor store file:/nonexistent-anchor-mount: ") && text.contains("is the mount there?"),
        "{text}"
    );
}

#[test]
fn a_follow_without_an_anchor_says_it_keeps_no_evidence_and_a_missing_store_is_named() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "n.db", 10);
    let follow = |extra: &[&str]| {
        bin()
            .args([
                "follow",
                "--once",
                "--from-start",
                "--db",
                path_str(&db),
                "--origin",
                "n/agentrt",
            ])
            .args(["--sink", &format!("file:{}", path_str(&dir.path().join("out.jsonl")))])
            .args(["--cursor", path_str(&dir.path().join("cursor"))])
            .args(extra)
            .output()
            .unwrap()
    };
    let out = follow(&[]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no --anchor: events are shipped, but no signed head is kept"),
        "{}",
        stderr(&out)
    );
    let check = run(&[
        "check",
        "--db",
        path_str(&db),
        "--origin",
        "n/agentrt",
        "--sink",
        "stdout:",
    ]);
    assert_eq!(code(&check), 0, "{}", stdout(&check));
    assert!(stdout(&check).contains("WARN  no --anchor"), "{}", stdout(&check));

    // An anchor directory that is not there is named as missing (not "not a directory").
    let (key, _) = keygen(dir.path(), "n/k", "k");
    let missing = dir.path().join("no-such-store");
    let out = follow(&[
        "--anchor",
        &format!("file:{}", path_str(&missing)),
        "--signing-key",
        path_str(&key),
        "--shutdown-grace",
        "1s",
    ]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no such directory (is the mount there?"),
        "{}",
        stderr(&out)
    );
}

/// A hung anchor store (the S3 server frozen with SIGSTOP: connections
/// accepted, nothing answered) turns readiness 503, liveness stays 200, and
/// SIGTERM still ends the follower while the store hangs.
#[tokio::test]
async fn a_hung_anchor_store_turns_readiness_503_and_never_blocks_the_exit() {
    let _services = services_exclusive().await;
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "h.db", 200);
    let bucket = locked_bucket("hung").await;
    let (key, _) = keygen(dir.path(), "h/agentrt", "k");
    let port = free_port();
    let mut writer = live_writer(&db, "100", &[]);
    let mut cmd = bin();
    s3_env(&mut cmd);
    let mut follower = KillOnDrop(
        cmd.args(["follow", "--db", path_str(&db), "--origin", "h/agentrt", "--from-start"])
            .args(["--sink", &format!("file:{}", path_str(&dir.path().join("out.jsonl")))])
            .args(["--cursor", path_str(&dir.path().join("cursor"))])
            .args([
                "--anchor",
                &format!("s3://{bucket}/heads"),
                "--anchor-s3-endpoint",
                &s3_endpoint(),
            ])
            .args([
                "--anchor-s3-path-style",
                "--anchor-s3-region",
                "us-east-1",
                "--anchor-retain-days",
                "2",
            ])
            .args(["--signing-key", path_str(&key), "--anchor-interval", "0s"])
            .args(["--unhealthy-after", "2s", "--shutdown-grace", "2s"])
            .args(["--metrics-addr", &format!("127.0.0.1:{port}")])
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let ready = Instant::now() + Duration::from_secs(30);
    while http_get(port, "/readyz", READ).map(|r| r.0) != Some(200) {
        assert!(Instant::now() < ready, "the follower never became ready");
        std::thread::sleep(Duration::from_millis(200));
    }
    let _paused = Paused::new(service_pid("CHAINSHIP_TEST_S3_PID"));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(
            Instant::now() < deadline,
            "readiness never turned 503 while anchoring hung"
        );
        if let Some((503, body)) = http_get(port, "/readyz", READ) {
            assert!(body.contains("anchoring"), "{body}");
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        http_get(port, "/livez", READ).unwrap().0,
        200,
        "the export loop still turns"
    );
    signal(&follower, SIGTERM);
    let status = wait_with_limit(&mut follower, Duration::from_secs(15));
    assert!(status.code().is_some(), "exited on SIGTERM: {status}");
    let _ = stop_writer(&mut writer, &db);
}

/// A FIFO planted in a file anchor store (as its checkpoint pointer) no
/// longer hangs the follower's anchoring: it reads as the garbage it is.
#[test]
fn a_fifo_in_a_file_anchor_store_never_hangs_the_follower() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "h.db", 200);
    let anchors = dir.path().join("anchors");
    std::fs::create_dir_all(anchors.join("h/agentrt")).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(anchors.join("h/agentrt/checkpoint"))
        .status()
        .unwrap();
    assert!(made.success());
    let (key, _) = keygen(dir.path(), "h/k", "k");
    let mut follower = KillOnDrop(
        bin()
            .args([
                "follow",
                "--db",
                path_str(&db),
                "--origin",
                "h/agentrt",
                "--from-start",
                "--once",
            ])
            .args(["--sink", &format!("file:{}", path_str(&dir.path().join("out.jsonl")))])
            .args(["--cursor", path_str(&dir.path().join("cursor"))])
            .args(["--anchor", &format!("file:{}", path_str(&anchors))])
            .args(["--signing-key", path_str(&key)])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let status = wait_with_limit(&mut follower, Duration::from_secs(30));
    assert!(status.code().is_some(), "the follower ended on its own: {status}");
}
