//! Routine operator paths that must not break a deployment (issue:
//! operator paths): `check` next to a running follower, a database on a
//! read-only mount, a pinned partition that does not exist.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common::*;
use tempfile::TempDir;

fn kafka_args<'a>(db: &'a Path, topic: &str, cursor: &'a Path) -> Vec<String> {
    vec![
        "--db".into(),
        path_str(db).into(),
        "--origin".into(),
        "ops/agentrt".into(),
        "--cursor".into(),
        path_str(cursor).into(),
        "--sink".into(),
        format!("kafka://{}/{topic}", kafka_addr()),
    ]
}

#[tokio::test]
async fn check_next_to_a_running_kafka_follower_does_not_fence_it() {
    let _services = services_exclusive().await;
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "m.db", 300);
    let cursor = dir.path().join("cursor");
    let topic = kafka_topic("check-fence", 1).await;
    let mut follower = KillOnDrop(
        bin()
            .arg("follow")
            .args(kafka_args(&db, &topic, &cursor))
            .args(["--from-start", "--retry-max-delay", "1s"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    wait_for_cursor(&cursor, &db_head(&db), Duration::from_secs(60));
    // The compose healthcheck used to run this every minute.
    for _ in 0..3 {
        let out = bin()
            .arg("check")
            .args(kafka_args(&db, &topic, &cursor))
            .output()
            .unwrap();
        assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    }
    append(&db, 100);
    let head = db_head(&db);
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::read_to_string(&cursor).unwrap_or_default().trim() != head {
        if let Ok(Some(status)) = follower.try_wait() {
            let mut err = String::new();
            use std::io::Read;
            follower.stderr.take().unwrap().read_to_string(&mut err).unwrap();
            panic!("the follower stopped ({status}) after check ran: {err}");
        }
        assert!(Instant::now() < deadline, "the follower did not reach {head}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[tokio::test]
async fn a_pinned_partition_that_does_not_exist_is_named_not_retried() {
    let _services = services().await;
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "m.db", 10);
    let topic = kafka_topic("pinned", 1).await;
    let started = Instant::now();
    let out = bin()
        .arg("follow")
        .args(kafka_args(&db, &topic, &dir.path().join("c")))
        .args(["--from-start", "--once", "--kafka-partition", "7"])
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(code(&out), 2, "{err}");
    assert!(
        err.contains("has 1 partition(s); partition 7 does not exist (--kafka-partition)"),
        "{err}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn a_wal_database_on_a_read_only_directory_is_read_when_nothing_writes_it() {
    let dir = TempDir::new().unwrap();
    let data = dir.path().join("ro");
    std::fs::create_dir(&data).unwrap();
    let db = generate(&data, "m.db", 200);
    assert!(
        !data.join("m.db-wal").exists(),
        "the writer has closed: no -wal is left"
    );
    let head = db_head(&db);
    // As the sidecar runs it: another user, the directory not writable for it.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o555)).unwrap();
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o444)).unwrap();
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    std::fs::set_permissions(&out_dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let as_nobody = |args: &[&str]| {
        std::process::Command::new("setpriv")
            .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_chainship"))
            .args(args)
            .output()
            .expect("setpriv (util-linux) runs the binary as nobody")
    };
    let verify = as_nobody(&["verify", "--db", path_str(&db)]);
    assert_eq!(code(&verify), 0, "{}{}", stdout(&verify), stderr(&verify));
    assert!(stdout(&verify).contains("intact"), "{}", stdout(&verify));
    let out = out_dir.join("out.jsonl");
    let follow = as_nobody(&[
        "follow",
        "--db",
        path_str(&db),
        "--origin",
        "ops/agentrt",
        "--sink",
        &format!("file:{}", path_str(&out)),
        "--cursor",
        path_str(&out_dir.join("cursor")),
        "--from-start",
        "--once",
    ]);
    assert_eq!(code(&follow), 0, "{}", stderr(&follow));
    assert_eq!(std::fs::read_to_string(out_dir.join("cursor")).unwrap().trim(), head);
    assert!(!data.join("m.db-wal").exists() && !data.join("m.db-shm").exists());
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn missing_aws_credentials_are_one_clear_line() {
    let _services = services_blocking();
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "m.db", 10);
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let out = bin()
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .env_remove("AWS_PROFILE")
        .env("HOME", &home)
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .args([
            "follow",
            "--db",
            path_str(&db),
            "--origin",
            "ops/agentrt",
            "--from-start",
            "--once",
        ])
        .args([
            "--cursor",
            path_str(&dir.path().join("c")),
            "--sink",
            "s3://some-bucket/exports",
        ])
        .args(["--s3-endpoint", &s3_endpoint(), "--s3-path-style"])
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(code(&out), 2, "{err}");
    assert!(
        err.contains("no AWS credentials") && err.contains("AWS_ACCESS_KEY_ID") && err.ends_with("(--s3-profile)\n"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");

    // The anchor store's own settings, named as the anchor store's: when
    // reading heads, and as the reason --once could not publish.
    let no_credentials = |args: &[&str]| {
        bin()
            .env_remove("AWS_ACCESS_KEY_ID")
            .env_remove("AWS_SECRET_ACCESS_KEY")
            .env_remove("AWS_PROFILE")
            .env("HOME", &home)
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .args(args)
            .args([
                "--anchor",
                "s3://some-anchors/heads",
                "--anchor-s3-endpoint",
                &s3_endpoint(),
            ])
            .arg("--anchor-s3-path-style")
            .output()
            .unwrap()
    };
    let (key, verifier) = keygen(dir.path(), "ops", "head.key");
    let out = no_credentials(&["anchor", "list", "--origin", "ops/agentrt", "--trusted-key", &verifier]);
    let err = stderr(&out);
    assert_eq!(code(&out), 2, "{err}");
    assert!(
        err.contains("no AWS credentials") && err.ends_with("(--anchor-s3-profile)\n"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    let out = no_credentials(&[
        "follow",
        "--db",
        path_str(&db),
        "--origin",
        "ops/agentrt",
        "--from-start",
        "--once",
        "--cursor",
        path_str(&dir.path().join("c2")),
        "--sink",
        &format!("file:{}", path_str(&dir.path().join("out.jsonl"))),
        "--signing-key",
        path_str(&key),
        "--shutdown-grace",
        "2s",
    ]);
    let err = stderr(&out);
    assert_eq!(code(&out), 2, "{err}");
    // Said before anything is shipped (issue 46), in one line.
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains("no AWS credentials") && err.contains("(--anchor-s3-profile)"),
        "{err}"
    );
    assert!(!dir.path().join("out.jsonl").exists(), "nothing shipped: {err}");
}

/// `follow --once` into a file sink, signing heads with `keys` (comma-separated paths).
fn follow_signed(dir: &Path, db: &Path, store: &Path, keys: &str) {
    let out = bin()
        .args([
            "follow",
            "--db",
            path_str(db),
            "--origin",
            "ops/agentrt",
            "--from-start",
            "--once",
        ])
        .args(["--sink", &format!("file:{}", path_str(&dir.join("out.jsonl")))])
        .args(["--cursor", path_str(&dir.join("cursor"))])
        .args(["--anchor", &format!("file:{}", path_str(store)), "--signing-key", keys])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

fn anchor_verify(db: &Path, store: &Path, trusted: &[String]) -> (i32, String) {
    let mut cmd = bin();
    cmd.args([
        "anchor",
        "verify",
        "--json",
        "--db",
        path_str(db),
        "--origin",
        "ops/agentrt",
    ])
    .args(["--anchor", &format!("file:{}", path_str(store))]);
    for k in trusted {
        cmd.args(["--trusted-key", k]);
    }
    let out = cmd.output().unwrap();
    (code(&out), format!("{}{}", stdout(&out), stderr(&out)))
}

#[test]
fn key_rotation_as_documented_keeps_old_heads_trusted_and_refuses_a_leaked_old_key() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "m.db", 100);
    let store = dir.path().join("heads");
    std::fs::create_dir(&store).unwrap();
    let (old, old_v) = keygen(dir.path(), "ops/chainship-2026", "old.key");
    let (new, new_v) = keygen(dir.path(), "ops/chainship-2027", "new.key");
    // 1. Heads signed by the old key.
    follow_signed(dir.path(), &db, &store, path_str(&old));
    // 2. Rotation: sign with both keys; the first head signed by both is at 200.
    append(&db, 100);
    follow_signed(
        dir.path(),
        &db,
        &store,
        &format!("{},{}", path_str(&old), path_str(&new)),
    );
    // 3. Only the new key from here on.
    append(&db, 100);
    follow_signed(dir.path(), &db, &store, path_str(&new));
    // 4. Auditors: the old key retired after seq 200, the new key trusted.
    let trusted = [format!("{old_v} until=200"), new_v.clone()];
    let (status, out) = anchor_verify(&db, &store, &trusted);
    assert_eq!(status, 0, "{out}");
    assert!(
        out.contains("\"last_trusted_head\"") && out.contains("\"trusted\":3"),
        "{out}"
    );
    // A leaked old key signs a head past its retirement: refused, and named.
    append(&db, 100);
    follow_signed(dir.path(), &db, &store, path_str(&old));
    let (status, out) = anchor_verify(&db, &store, &trusted);
    assert_eq!(status, 1, "{out}");
    assert!(
        out.contains("untrusted-key") && out.contains("retired after seq 200"),
        "{out}"
    );
    // Without the retirement the forged head would have passed: the setting is what catches it.
    let (status, out) = anchor_verify(&db, &store, &[old_v, new_v]);
    assert_eq!(status, 0, "{out}");
}

#[test]
fn heartbeats_keep_max_age_meaning_the_follower_vouched_recently() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "m.db", 100);
    let store = dir.path().join("heads");
    std::fs::create_dir(&store).unwrap();
    let (key, vkey) = keygen(dir.path(), "ops/chainship", "k");
    let cursor = dir.path().join("cursor");
    let mut follower = KillOnDrop(
        bin()
            .args([
                "follow",
                "--db",
                path_str(&db),
                "--origin",
                "ops/agentrt",
                "--from-start",
            ])
            .args(["--sink", &format!("file:{}", path_str(&dir.path().join("out.jsonl")))])
            .args(["--cursor", path_str(&cursor), "--anchor-heartbeat", "1s"])
            .args([
                "--anchor",
                &format!("file:{}", path_str(&store)),
                "--signing-key",
                path_str(&key),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for_cursor(&cursor, &db_head(&db), Duration::from_secs(20));
    // A quiet runtime: nothing new for longer than --max-age, yet the follower vouches.
    std::thread::sleep(Duration::from_millis(3500));
    let heartbeats = std::fs::read_dir(store.join("ops/agentrt"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().matches('.').count() == 2)
        .count();
    assert!(heartbeats >= 2, "{heartbeats} heartbeats in 3.5 s at 1 s");
    let verify = |max_age: &str| {
        bin()
            .args([
                "anchor",
                "verify",
                "--db",
                path_str(&db),
                "--origin",
                "ops/agentrt",
                "--max-age",
                max_age,
            ])
            .args([
                "--anchor",
                &format!("file:{}", path_str(&store)),
                "--trusted-key",
                &vkey,
            ])
            .output()
            .unwrap()
    };
    let out = verify("2s");
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    // A follower that stopped vouching goes stale, however quiet the runtime is.
    signal(&follower, SIGTERM);
    wait_with_limit(&mut follower, Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(3000));
    let out = verify("2s");
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("stale"), "{}", stdout(&out));
}

#[test]
fn check_against_an_unreachable_broker_says_so_in_a_few_lines() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "m.db", 10);
    // Nothing listens on port 1.
    let out = bin()
        .args(["check", "--db", path_str(&db), "--origin", "ops/agentrt"])
        .args([
            "--sink",
            "kafka://127.0.0.1:1/audit",
            "--cursor",
            path_str(&dir.path().join("c")),
        ])
        .output()
        .unwrap();
    let all = format!("{}{}", stdout(&out), stderr(&out));
    assert_eq!(code(&out), 1, "{all}");
    assert!(all.contains("broker unreachable"), "{all}");
    assert!(all.lines().count() < 10, "{} lines:\n{all}", all.lines().count());
}

fn follow_once_anchored(dir: &Path, db: &Path, store: &Path, key: &Path, cursor: &str) -> std::process::Output {
    bin()
        .args([
            "follow",
            "--db",
            path_str(db),
            "--origin",
            "ops/agentrt",
            "--from-start",
            "--once",
        ])
        .args([
            "--sink",
            &format!("file:{}", path_str(&dir.join(format!("{cursor}.jsonl")))),
        ])
        .args([
            "--cursor",
            path_str(&dir.join(cursor)),
            "--shutdown-grace",
            "2s",
            "--retry-max-delay",
            "1s",
        ])
        .args([
            "--anchor",
            &format!("file:{}", path_str(store)),
            "--signing-key",
            path_str(key),
        ])
        .output()
        .unwrap()
}

#[test]
fn follow_once_with_its_newest_head_unpublished_is_not_success() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "m.db", 50);
    let (key, _) = keygen(dir.path(), "ops/chainship", "k");
    // The anchor mount is missing: delivered, but not anchored.
    let out = follow_once_anchored(dir.path(), &db, &dir.path().join("no-such-mount"), &key, "c");
    let err = stderr(&out);
    assert_eq!(code(&out), 2, "{err}");
    assert!(err.contains("was not published to the anchor store"), "{err}");
}

#[test]
fn a_store_that_contradicts_a_delivered_head_stops_the_follower_with_exit_1() {
    let dir = TempDir::new().unwrap();
    let (key, _) = keygen(dir.path(), "ops/chainship", "k");
    let (store, other_store) = (dir.path().join("heads"), dir.path().join("other"));
    std::fs::create_dir(&store).unwrap();
    std::fs::create_dir(&other_store).unwrap();
    // Another database's head for seq 100, signed with the same key, already kept.
    let other = generate_with(dir.path(), "other.db", 100, &["--seed", "9"]);
    assert_eq!(
        code(&follow_once_anchored(dir.path(), &other, &other_store, &key, "c0")),
        0
    );
    std::fs::create_dir_all(store.join("ops/agentrt")).unwrap();
    let name = format!("{:020}.head", 100);
    std::fs::copy(
        other_store.join("ops/agentrt").join(&name),
        store.join("ops/agentrt").join(&name),
    )
    .unwrap();
    let db = generate(dir.path(), "m.db", 100);
    let started = Instant::now();
    let out = follow_once_anchored(dir.path(), &db, &store, &key, "c1");
    let err = stderr(&out);
    assert_eq!(code(&out), 1, "{err}");
    assert!(err.contains("heads-disagree"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "retried for {:?}",
        started.elapsed()
    );
}

#[test]
fn check_opens_the_database_with_the_table_and_columns_it_is_given() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "m.db", 10);
    tamper(&db)
        .execute_batch("ALTER TABLE events RENAME TO audit_events")
        .unwrap();
    let check = |extra: &[&str]| {
        bin()
            .args(["check", "--db", path_str(&db), "--origin", "ops/agentrt"])
            .args(["--sink", &format!("file:{}", path_str(&dir.path().join("out.jsonl")))])
            .args(extra)
            .output()
            .unwrap()
    };
    let out = check(&["--table", "audit_events"]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("readable, head seq 10"), "{}", stdout(&out));
    let out = check(&[]);
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("no table named \"events\""), "{}", stdout(&out));
}

#[test]
fn a_head_published_in_the_future_never_keeps_max_age_fresh() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "m.db", 50);
    let store = dir.path().join("heads");
    std::fs::create_dir(&store).unwrap();
    let (key, vkey) = keygen(dir.path(), "ops/chainship", "k");
    follow_signed(dir.path(), &db, &store, path_str(&key));
    // A heartbeat whose `published` is decades ahead, signed with the real key
    // (a clock far ahead, or whoever holds the key and wants --max-age to pass forever).
    let head: chainship_chain::Head = db_head(&db).parse().unwrap();
    let future = std::time::SystemTime::now() + Duration::from_secs(60 * 60 * 24 * 365 * 50);
    let signer = chainship_anchor::SignerKey::load(&key).unwrap();
    let note = chainship_anchor::SignedHead::new("ops/agentrt", head, future)
        .sign(&[signer.shared()])
        .unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    std::fs::write(
        store
            .join("ops/agentrt")
            .join(format!("{:020}.{now:020}.head", head.seq)),
        note,
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    let out = bin()
        .args([
            "anchor",
            "verify",
            "--db",
            path_str(&db),
            "--origin",
            "ops/agentrt",
            "--max-age",
            "2s",
        ])
        .args([
            "--anchor",
            &format!("file:{}", path_str(&store)),
            "--trusted-key",
            &vkey,
        ])
        .output()
        .unwrap();
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("in the future"), "{}", stdout(&out));
}

#[test]
fn check_refuses_the_producer_settings_follow_would_refuse() {
    let _services = services_blocking();
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "m.db", 5);
    let out = bin()
        .args([
            "check",
            "--db",
            path_str(&db),
            "--origin",
            "ops/agentrt",
            "--kafka-opt",
            "linger.ms=SECRETXYZ",
        ])
        .args(["--sink", &format!("kafka://{}/audit", kafka_addr())])
        .output()
        .unwrap();
    let all = format!("{}{}", stdout(&out), stderr(&out));
    assert_eq!(code(&out), 1, "{all}");
    assert!(all.contains("linger.ms"), "{all}");
}

#[test]
fn a_new_anchor_store_gets_the_head_even_if_an_old_one_had_it() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "m.db", 50);
    let (key, vkey) = keygen(dir.path(), "ops/chainship", "k");
    let (old, new) = (dir.path().join("old"), dir.path().join("new"));
    std::fs::create_dir(&old).unwrap();
    std::fs::create_dir(&new).unwrap();
    follow_signed(dir.path(), &db, &old, path_str(&key));
    // The operator points the follower at another store: `<cursor>.anchored` is not that store's word.
    follow_signed(dir.path(), &db, &new, path_str(&key));
    let (status, out) = anchor_verify(&db, &new, &[vkey]);
    assert_eq!(status, 0, "{out}");
    assert!(out.contains("\"seq\":50"), "{out}");
}

/// A library that panics inside the anchoring task (here the AWS SDK, which
/// panics when the machine has no CA certificates) stops the follower with
/// one line and exit 2: anchoring never ends silently while the export runs.
#[tokio::test]
async fn anchoring_that_dies_inside_a_library_stops_the_follower_loudly() {
    let _services = services().await;
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "p.db", 20);
    let bucket = locked_bucket("panic").await;
    let (key, _) = keygen(dir.path(), "p/k", "k");
    let empty = dir.path().join("no-certs.pem");
    std::fs::write(&empty, "").unwrap();
    let mut cmd = bin();
    s3_env(&mut cmd)
        .env("SSL_CERT_FILE", &empty)
        .env("SSL_CERT_DIR", dir.path().join("no-such-dir"))
        .args([
            "follow",
            "--once",
            "--from-start",
            "--db",
            path_str(&db),
            "--origin",
            "p/agentrt",
        ])
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
            "--signing-key",
            path_str(&key),
            "--shutdown-grace",
            "3s",
        ]);
    let out = cmd.output().unwrap();
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("anchoring stopped on an internal error (TrustStore"),
        "{}",
        stderr(&out)
    );
    let listed = s3_client().list_objects_v2().bucket(&bucket).send().await.unwrap();
    assert_eq!(listed.key_count().unwrap_or(0), 0, "nothing was kept");
}
