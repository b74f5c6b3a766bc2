//! The S3 anchor store against the real S3 server the test script starts:
//! write-once heads with Object Lock, refusal of a second write by the
//! server itself, and an outage during a follow.

use std::time::{Duration, Instant};

use crate::common::*;
use tempfile::TempDir;

const ORIGIN: &str = "s3test/agentrt";
fn anchor_args(bucket: &str) -> Vec<String> {
    vec![
        "--anchor".into(),
        format!("s3://{bucket}/heads"),
        "--anchor-s3-endpoint".into(),
        s3_endpoint(),
        "--anchor-s3-path-style".into(),
        "--anchor-s3-region".into(),
        "us-east-1".into(),
    ]
}

/// What a publisher adds: how long heads stay locked.
const RETAIN: [&str; 2] = ["--anchor-retain-days", "2"];

fn verify_args(dir: &TempDir, db: &std::path::Path, bucket: &str, verifier: &str) -> std::process::Output {
    let mut cmd = bin();
    s3_env(&mut cmd)
        .args([
            "anchor",
            "verify",
            "--json",
            "--db",
            path_str(db),
            "--origin",
            ORIGIN,
            "--trusted-key",
            verifier,
        ])
        .args(anchor_args(bucket));
    let _ = dir;
    cmd.output().unwrap()
}

#[tokio::test]
async fn heads_are_write_once_and_locked_in_s3() {
    let _services = services().await;
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "a.db", 500);
    let bucket = locked_bucket("anchors").await;
    let (key, verifier) = keygen(dir.path(), "s3test/chainship", "head.key");
    let mut cmd = bin();
    s3_env(&mut cmd)
        .args([
            "follow",
            "--once",
            "--from-start",
            "--db",
            path_str(&db),
            "--origin",
            ORIGIN,
            "--batch-size",
            "100",
        ])
        .args(["--sink", &format!("file:{}", path_str(&dir.path().join("out.jsonl")))])
        .args([
            "--cursor",
            path_str(&dir.path().join("cursor")),
            "--signing-key",
            path_str(&key),
        ])
        .args(anchor_args(&bucket))
        .args(RETAIN);
    let out = cmd.output().unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));

    let s3 = s3_client();
    let key500 = format!("heads/{}/{:020}.head", chainship_chain::origin_segment(ORIGIN), 500);
    let head = s3
        .head_object()
        .bucket(&bucket)
        .key(&key500)
        .send()
        .await
        .expect("the final head is in the bucket");
    assert_eq!(
        head.object_lock_mode().map(|m| m.as_str()),
        Some("COMPLIANCE"),
        "{head:?}"
    );
    assert!(head.object_lock_retain_until_date().is_some());

    // The server itself refuses a second write of the same head.
    let again = s3
        .put_object()
        .bucket(&bucket)
        .key(&key500)
        .if_none_match("*")
        .body(b"forged".to_vec().into())
        .send()
        .await;
    let status = again
        .expect_err("overwrite refused")
        .raw_response()
        .map(|r| r.status().as_u16());
    assert_eq!(status, Some(412));
    // And a locked version cannot be deleted.
    let version = head.version_id().expect("Object Lock buckets are versioned").to_owned();
    let delete = s3
        .delete_object()
        .bucket(&bucket)
        .key(&key500)
        .version_id(version)
        .send()
        .await;
    assert!(delete.is_err(), "deleting a COMPLIANCE-locked head must be refused");

    let out = verify_args(&dir, &db, &bucket, &verifier);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["last_trusted_head"]["seq"], 500);

    // A restored database is still caught through the S3 store.
    let cut = dir.path().join("cut.db");
    std::fs::copy(&db, &cut).unwrap();
    tamper(&cut).execute("DELETE FROM events WHERE seq > 450", []).unwrap();
    let out = verify_args(&dir, &cut, &bucket, &verifier);
    assert_eq!(code(&out), 1);
    assert!(stdout(&out).contains("\"kind\":\"cut\""), "{}", stdout(&out));
}

#[tokio::test]
async fn an_anchor_store_outage_delays_anchoring_but_not_the_export() {
    let _services = services_exclusive().await;
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "live.db", 200);
    let bucket = locked_bucket("anchors").await;
    let (key, verifier) = keygen(dir.path(), "s3test/chainship", "head.key");
    let (out_file, cursor) = (dir.path().join("out.jsonl"), dir.path().join("cursor"));
    let mut writer = live_writer(&db, "200", &[]);
    let mut cmd = bin();
    s3_env(&mut cmd)
        .args([
            "follow",
            "--from-start",
            "--db",
            path_str(&db),
            "--origin",
            ORIGIN,
            "--batch-size",
            "50",
        ])
        .args([
            "--sink",
            &format!("file:{}", path_str(&out_file)),
            "--cursor",
            path_str(&cursor),
        ])
        .args(["--signing-key", path_str(&key), "--retry-max-delay", "1s"])
        .args(anchor_args(&bucket))
        .args(RETAIN)
        .stderr(std::fs::File::create(dir.path().join("follower.log")).unwrap());
    let mut follower = KillOnDrop(cmd.spawn().unwrap());
    let anchored = cursor.with_file_name("cursor.anchored");
    let seq_of = |p: &std::path::Path| -> u64 {
        std::fs::read_to_string(p)
            .ok()
            .and_then(|t| t.split(':').next()?.parse().ok())
            .unwrap_or(0)
    };
    std::thread::sleep(Duration::from_secs(2));
    assert!(seq_of(&anchored) > 0, "anchoring works before the outage");
    let (cursor_before, anchored_during);
    {
        let _paused = Paused::new(service_pid("CHAINSHIP_TEST_S3_PID"));
        std::thread::sleep(Duration::from_millis(500));
        cursor_before = seq_of(&cursor);
        // Past the 5 s after which a publication the store does not answer is logged.
        std::thread::sleep(Duration::from_secs(7));
        anchored_during = seq_of(&anchored);
        assert!(
            seq_of(&cursor) > cursor_before + 300,
            "the export goes on while the anchor store is down: cursor {} -> {}",
            cursor_before,
            seq_of(&cursor)
        );
    }
    assert!(
        anchored_during <= cursor_before + 50,
        "nothing was anchored while the store was paused"
    );
    let log = std::fs::read_to_string(dir.path().join("follower.log")).unwrap();
    assert!(
        log.contains("the anchor store has not answered for"),
        "a frozen store is said in the log, not only in /readyz: {log}"
    );
    let final_seq: u64 = stop_writer(&mut writer, &db)
        .split(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while seq_of(&anchored) < final_seq || seq_of(&cursor) < final_seq {
        assert!(
            Instant::now() < deadline,
            "anchoring did not catch up: anchored {} of {final_seq}",
            seq_of(&anchored)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    signal(&follower, SIGTERM);
    assert_eq!(wait_with_limit(&mut follower, Duration::from_secs(10)).code(), Some(0));
    let (last, _) = reverify_jsonl(&out_file, ORIGIN);
    assert_eq!(last, final_seq);
    let out = verify_args(&dir, &db, &bucket, &verifier);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["last_trusted_head"]["seq"], final_seq);
}
