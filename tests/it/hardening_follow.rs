//! The follower never goes blind, never skips, never counts what the sink
//! does not provably hold (issue: hardening). Each test reproduces a defect
//! as it was found: a writer that restarts, a replaced database, records
//! planted in a shared topic or bucket, colliding origins, one event too
//! large or not UTF-8, two followers on one cursor, a cursor that cannot
//! be written after a delivery.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use tempfile::TempDir;

/// One series as the follower serving metrics on `port` exports it now.
fn metric_at(port: u16, name: &str) -> Option<f64> {
    let (_, body) = http_get(port, "/metrics", Duration::from_secs(5))?;
    metric(&body, name)
}

fn seq_of(head: &str) -> u64 {
    head.split(':').next().unwrap().parse().unwrap()
}

fn file_follow<S: AsRef<std::ffi::OsStr>>(
    db: &Path,
    out: &Path,
    cursor: &Path,
    origin: &str,
    extra: &[S],
) -> std::process::Command {
    let mut cmd = bin();
    cmd.args(["follow", "--db", path_str(db), "--origin", origin])
        .args(["--sink", &format!("file:{}", path_str(out))])
        .args([
            "--cursor",
            path_str(cursor),
            "--poll-interval",
            "50ms",
            "--batch-linger",
            "50ms",
        ])
        .args(extra);
    cmd
}

fn spawn(mut cmd: std::process::Command) -> KillOnDrop {
    KillOnDrop(cmd.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap())
}

fn stderr_of(child: &mut Child) -> String {
    let mut s = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut s);
    }
    s
}

#[test]
fn a_writer_that_closes_and_reopens_ten_times_is_followed_within_seconds() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "m.db", 500);
    let (out, cursor) = (dir.path().join("out.jsonl"), dir.path().join("cursor"));
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let _follower = spawn(file_follow(
        &db,
        &out,
        &cursor,
        "test/agentrt",
        &["--from-start", "--metrics-addr", &addr],
    ));
    wait_for_cursor(&cursor, &db_head(&db), Duration::from_secs(20));
    for round in 0..10 {
        // Each run opens the database, appends, and closes it: the last
        // connection's close removes the -wal and -shm the follower had open.
        append(&db, 100);
        let head = db_head(&db);
        let committed = Instant::now();
        wait_for_cursor(&cursor, &head, Duration::from_secs(5));
        assert!(
            committed.elapsed() < Duration::from_secs(3),
            "round {round}: exported {head} only after {:?}",
            committed.elapsed()
        );
        // Metrics follow the database head from a fresh look, never the reader's view.
        let deadline = Instant::now() + Duration::from_secs(5);
        while metric_at(port, "chainship_db_head_seq") != Some(seq_of(&head) as f64) {
            assert!(
                Instant::now() < deadline,
                "round {round}: db head metric never reached {head}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    assert_eq!(reverify_jsonl(&out, "test/agentrt").0, 1500);
}

#[test]
fn the_metrics_see_a_growing_database_even_when_the_reader_cannot() {
    // The database is replaced (mv) by a copy that holds everything and more:
    // the follower reopens and goes on; the lag never reads 0 while behind.
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "m.db", 300);
    let (out, cursor) = (dir.path().join("out.jsonl"), dir.path().join("cursor"));
    let _follower = spawn(file_follow(&db, &out, &cursor, "test/agentrt", &["--from-start"]));
    wait_for_cursor(&cursor, &db_head(&db), Duration::from_secs(20));
    let bigger = dir.path().join("bigger.db");
    std::fs::copy(&db, &bigger).unwrap();
    append(&bigger, 200);
    std::fs::rename(&bigger, &db).unwrap();
    wait_for_cursor(&cursor, &db_head(&db), Duration::from_secs(5));
    assert_eq!(reverify_jsonl(&out, "test/agentrt").0, 500);
}

#[test]
fn a_database_replaced_by_an_older_copy_stops_the_follower() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "m.db", 500);
    // The same seed writes the same events: a backup taken at seq 300.
    let older = dir.path().join("older.db");
    assert_eq!(
        code(&run(&["generate", "--db", path_str(&older), "--events", "300"])),
        0
    );
    let (out, cursor) = (dir.path().join("out.jsonl"), dir.path().join("cursor"));
    let mut follower = spawn(file_follow(&db, &out, &cursor, "test/agentrt", &["--from-start"]));
    wait_for_cursor(&cursor, &db_head(&db), Duration::from_secs(20));
    std::fs::rename(&older, &db).unwrap();
    let status = wait_with_limit(&mut follower, Duration::from_secs(10));
    let err = stderr_of(&mut follower);
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("replaced") && err.contains("seq 500"), "{err}");
}

#[test]
fn two_followers_on_one_cursor_or_one_file_sink_the_second_is_refused() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "m.db", 200);
    let (out, cursor) = (dir.path().join("out.jsonl"), dir.path().join("cursor"));
    let mut first = spawn(file_follow(&db, &out, &cursor, "test/agentrt", &["--from-start"]));
    wait_for_cursor(&cursor, &db_head(&db), Duration::from_secs(20));

    let same_cursor = file_follow(
        &db,
        &dir.path().join("other.jsonl"),
        &cursor,
        "test/agentrt",
        &["--once"],
    )
    .output()
    .unwrap();
    assert_eq!(code(&same_cursor), 2, "{}", stderr(&same_cursor));
    let err = stderr(&same_cursor);
    assert!(
        err.contains("another follower holds it") && err.contains(&format!("pid {}", first.id())),
        "{err}"
    );

    let same_sink = file_follow(
        &db,
        &out,
        &dir.path().join("cursor2"),
        "test/agentrt",
        &["--from-start", "--once"],
    )
    .output()
    .unwrap();
    assert_eq!(code(&same_sink), 2, "{}", stderr(&same_sink));
    // The holder is named by its pid (the kernel's lock table says who).
    assert!(
        stderr(&same_sink).contains(&format!("pid {} holds it", first.id())),
        "{}",
        stderr(&same_sink)
    );

    // The first one was not disturbed: it still exports, every event once.
    append(&db, 50);
    wait_for_cursor(&cursor, &db_head(&db), Duration::from_secs(10));
    assert!(matches!(first.try_wait(), Ok(None)));
    assert_eq!(reverify_jsonl(&out, "test/agentrt").0, 250);
}

#[test]
fn a_cursor_that_cannot_be_written_after_delivery_stops_the_follower_loudly() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "m.db", 100);
    let (out, cursor) = (dir.path().join("out.jsonl"), dir.path().join("cursor"));
    let port = free_port();
    let mut follower = spawn(file_follow(
        &db,
        &out,
        &cursor,
        "test/agentrt",
        &["--from-start", "--metrics-addr", &format!("127.0.0.1:{port}")],
    ));
    wait_for_cursor(&cursor, &db_head(&db), Duration::from_secs(20));
    // The cursor is written through `cursor.tmp`: a directory there makes the next write fail.
    std::fs::create_dir(dir.path().join("cursor.tmp")).unwrap();
    append(&db, 10);
    let status = wait_with_limit(&mut follower, Duration::from_secs(10));
    let err = stderr_of(&mut follower);
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(err.contains("the cursor could not be written"), "{err}");
    // What the sink got but the cursor did not record is read back on restart: nothing twice.
    std::fs::remove_dir(dir.path().join("cursor.tmp")).unwrap();
    let again = file_follow(&db, &out, &cursor, "test/agentrt", &["--once"])
        .output()
        .unwrap();
    assert_eq!(code(&again), 0, "{}", stderr(&again));
    assert_eq!(reverify_jsonl(&out, "test/agentrt").0, 110);
}

#[test]
fn a_field_that_is_not_utf8_is_exported_exactly_and_verifies() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "m.db", 20);
    append_non_utf8_event(&db);
    append(&db, 5);
    let verify = run(&["verify", "--db", path_str(&db)]);
    assert_eq!(code(&verify), 0, "{}", stderr(&verify));
    let (out, cursor) = (dir.path().join("out.jsonl"), dir.path().join("cursor"));
    let res = file_follow(&db, &out, &cursor, "test/agentrt", &["--from-start", "--once"])
        .output()
        .unwrap();
    assert_eq!(code(&res), 0, "{}", stderr(&res));
    let text = std::fs::read_to_string(&out).unwrap();
    let line = text.lines().nth(20).unwrap();
    assert!(line.contains(r#""b64":["payload_json"]"#), "{line}");
    // The record carries the stored bytes exactly: decoded, they hash to the chain.
    let record = chainship_chain::record::Record::parse(line.as_bytes()).unwrap();
    assert_eq!(
        record.field_bytes("payload_json").unwrap().as_ref(),
        b"{\"note\":\"\xff\xfe raw\"}"
    );
    assert_eq!(record.expected_hash().as_slice(), record.hash.as_bytes());
    // Every reader takes it: a restart resumes after it, and verify-export checks it.
    let again = file_follow(&db, &out, &cursor, "test/agentrt", &["--once"])
        .output()
        .unwrap();
    assert_eq!(code(&again), 0, "{}", stderr(&again));
    let (key, vkey) = keygen(dir.path(), "t", "k");
    let store = dir.path().join("heads");
    std::fs::create_dir(&store).unwrap();
    std::fs::remove_file(&cursor).unwrap();
    let out2 = dir.path().join("out2.jsonl");
    let anchored = file_follow(&db, &out2, &cursor, "test/agentrt", &anchored_once_args(&store, &key))
        .output()
        .unwrap();
    assert_eq!(code(&anchored), 0, "{}", stderr(&anchored));
    let checked = run(&[
        "verify-export",
        "--from",
        &format!("file:{}", path_str(&out2)),
        "--anchor",
        &format!("file:{}", path_str(&store)),
        "--trusted-key",
        &vkey,
        "--origin",
        "test/agentrt",
    ]);
    assert_eq!(code(&checked), 0, "{}{}", stdout(&checked), stderr(&checked));
}

// ---- Records planted in a shared topic or bucket ----

fn hash_at(db: &Path, seq: u64) -> String {
    tamper(db)
        .query_row("SELECT hash FROM events WHERE seq = ?1", [seq as i64], |r| r.get(0))
        .unwrap()
}

#[tokio::test]
async fn a_planted_kafka_record_never_makes_the_follower_skip() {
    let _services = services().await;
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "m.db", 1000);
    let origin = "plant/agentrt";
    let topic = kafka_topic("plant", 1).await;
    let cursor = dir.path().join("cursor");
    let first = kafka_follow(&db, &topic, origin, &cursor, &["--from-start", "--once"])
        .output()
        .unwrap();
    assert_eq!(code(&first), 0, "{}", stderr(&first));
    append(&db, 500);
    // Anyone who can write to the topic: the origin's key, headers naming a
    // real seq and its real hash from the database, junk as the value.
    let producer: FutureProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", kafka_addr())
        .create()
        .unwrap();
    let planted_hash = hash_at(&db, 1400);
    let headers = OwnedHeaders::new()
        .insert(Header {
            key: "seq",
            value: Some("1400"),
        })
        .insert(Header {
            key: "hash",
            value: Some(planted_hash.as_str()),
        })
        .insert(Header {
            key: "origin",
            value: Some(origin),
        });
    producer
        .send(
            FutureRecord::to(&topic)
                .partition(0)
                .key(origin)
                .payload("junk")
                .headers(headers),
            Duration::from_secs(10),
        )
        .await
        .unwrap();
    let before = std::fs::read_to_string(&cursor).unwrap();
    let res = kafka_follow(&db, &topic, origin, &cursor, &["--once"])
        .output()
        .unwrap();
    assert_eq!(code(&res), 1, "{}", stderr(&res));
    assert!(stderr(&res).contains("not a chainship record"), "{}", stderr(&res));
    assert!(
        stderr(&res).contains(&format!("topic {topic} partition 0 offset")),
        "{}",
        stderr(&res)
    );
    assert_eq!(
        std::fs::read_to_string(&cursor).unwrap(),
        before,
        "nothing counted as delivered"
    );
}

#[tokio::test]
async fn kafka_origins_that_differ_only_in_punctuation_do_not_fence_each_other() {
    let _services = services().await;
    let dir = TempDir::new().unwrap();
    let topic = kafka_topic("fence-names", 3).await;
    let (db_a, db_b) = (generate(dir.path(), "a.db", 300), generate(dir.path(), "b.db", 300));
    let cursor_a = dir.path().join("ca");
    let mut a = KillOnDrop(
        kafka_follow(&db_a, &topic, "x/y", &cursor_a, &["--from-start", "--batch-size", "50"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    wait_for_cursor(&cursor_a, &db_head(&db_a), Duration::from_secs(60));
    // Another origin whose old transactional id was the same (`x/y` → `x_y`).
    let b = kafka_follow(
        &db_b,
        &topic,
        "x_y",
        &dir.path().join("cb"),
        &["--from-start", "--once"],
    )
    .output()
    .unwrap();
    assert_eq!(code(&b), 0, "{}", stderr(&b));
    // The first follower was not fenced: it still delivers.
    append(&db_a, 100);
    let head = db_head(&db_a);
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::read_to_string(&cursor_a).unwrap_or_default().trim() != head {
        if let Ok(Some(status)) = a.try_wait() {
            panic!("the x/y follower stopped ({status}): {}", stderr_of(&mut a));
        }
        assert!(Instant::now() < deadline, "x/y follower did not reach {head}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[tokio::test]
async fn one_record_too_large_for_kafka_names_its_seq_and_the_settings() {
    let _services = services().await;
    let dir = TempDir::new().unwrap();
    let db = generate_with(
        dir.path(),
        "big.db",
        10,
        &["--large-every", "7", "--large-bytes", "1500000"],
    );
    let topic = kafka_topic("big", 1).await;
    let res = kafka_follow(
        &db,
        &topic,
        "big/agentrt",
        &dir.path().join("c"),
        &["--from-start", "--once"],
    )
    .output()
    .unwrap();
    let err = stderr(&res);
    assert_eq!(code(&res), 2, "{err}");
    assert!(err.contains("seq 7's record is"), "{err}");
    assert!(
        err.contains("message.max.bytes") && err.contains("max.message.bytes"),
        "{err}"
    );
}

#[tokio::test]
async fn a_planted_s3_object_never_makes_the_follower_skip() {
    let _services = services().await;
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "m.db", 1000);
    let origin = "plant/agentrt";
    let bucket = bucket("plant").await;
    let cursor = dir.path().join("cursor");
    let first = s3_follow(&db, &bucket, origin, &cursor, &["--from-start", "--once"])
        .output()
        .unwrap();
    assert_eq!(code(&first), 0, "{}", stderr(&first));
    append(&db, 500);
    // An empty object named for seq 1400, with metadata that names the real hash.
    let key = format!("exports/plant%2Fagentrt/{:020}-{:020}.jsonl.gz", 1400, 1400);
    s3_client()
        .put_object()
        .bucket(&bucket)
        .key(&key)
        .metadata("origin", origin)
        .metadata("last-seq", "1400")
        .metadata("last-hash", hash_at(&db, 1400))
        .body(aws_sdk_s3::primitives::ByteStream::from_static(b""))
        .send()
        .await
        .unwrap();
    let before = std::fs::read_to_string(&cursor).unwrap();
    let res = s3_follow(&db, &bucket, origin, &cursor, &["--once"]).output().unwrap();
    assert_eq!(code(&res), 1, "{}", stderr(&res));
    assert!(stderr(&res).contains(&key), "{}", stderr(&res));
    assert_eq!(
        std::fs::read_to_string(&cursor).unwrap(),
        before,
        "nothing counted as delivered"
    );
}

#[tokio::test]
async fn s3_origins_where_one_is_a_prefix_of_the_other_stay_apart() {
    let _services = services().await;
    let dir = TempDir::new().unwrap();
    let bucket = bucket("nested").await;
    let (db_a, db_b) = (generate(dir.path(), "a.db", 300), generate(dir.path(), "b.db", 200));
    // team/a/b first: under the old layout its objects sat inside team/a/'s prefix.
    for (db, origin, cursor) in [
        (&db_b, "team/a/b", "cb"),
        (&db_a, "team/a", "ca"),
        (&db_b, "team/a/b", "cb"),
    ] {
        let res = s3_follow(
            db,
            &bucket,
            origin,
            &dir.path().join(cursor),
            &["--from-start", "--once"],
        )
        .output()
        .unwrap();
        assert_eq!(code(&res), 0, "{origin}: {}", stderr(&res));
    }
    for (origin, events) in [("team/a", 300), ("team/a/b", 200)] {
        let copy = dir.path().join(format!("{}.jsonl", origin.replace('/', "_")));
        let mut records = Vec::new();
        let listed = s3_client()
            .list_objects_v2()
            .bucket(&bucket)
            .prefix(format!("exports/{}/", chainship_chain::origin_segment(origin)))
            .send()
            .await
            .unwrap();
        for obj in listed.contents() {
            let body = s3_client()
                .get_object()
                .bucket(&bucket)
                .key(obj.key().unwrap())
                .send()
                .await
                .unwrap()
                .body
                .collect()
                .await
                .unwrap()
                .into_bytes();
            flate2::read::GzDecoder::new(&body[..])
                .read_to_end(&mut records)
                .unwrap();
        }
        std::fs::write(&copy, records).unwrap();
        assert_eq!(reverify_jsonl(&copy, origin).0, events, "{origin}");
    }
}

#[test]
fn a_line_planted_in_a_file_sink_never_makes_the_follower_skip() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "m.db", 100);
    let (out, cursor) = (dir.path().join("out.jsonl"), dir.path().join("cursor"));
    let first = file_follow(&db, &out, &cursor, "test/agentrt", &["--from-start", "--once"])
        .output()
        .unwrap();
    assert_eq!(code(&first), 0, "{}", stderr(&first));
    append(&db, 50);
    // A record that claims seq 140 with the database's real hash, and junk content.
    let planted = format!(
        "{{\"origin\":\"test/agentrt\",\"seq\":140,\"hash\":\"{}\"}}\n",
        hash_at(&db, 140)
    );
    std::fs::OpenOptions::new()
        .append(true)
        .open(&out)
        .unwrap()
        .write_all(planted.as_bytes())
        .unwrap();
    let before = std::fs::read_to_string(&cursor).unwrap();
    let res = file_follow(&db, &out, &cursor, "test/agentrt", &["--once"])
        .output()
        .unwrap();
    assert_eq!(code(&res), 1, "{}", stderr(&res));
    assert!(
        stderr(&res).contains("line 1 from the end: not a chainship record"),
        "{}",
        stderr(&res)
    );
    assert_eq!(std::fs::read_to_string(&cursor).unwrap(), before);
}

/// A key deeper under an origin's prefix (`exports/old/x/...` under origin
/// `old`) is no batch of its own, yet a loader reading the prefix takes it
/// in: named, never passed over.
#[tokio::test]
async fn objects_deeper_under_an_origins_prefix_are_named_not_passed_over() {
    let _services = services().await;
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "m.db", 50);
    let bucket = bucket("deeper").await;
    let deeper = format!("exports/old/x/{:020}-{:020}.jsonl.gz", 1, 50);
    s3_client()
        .put_object()
        .bucket(&bucket)
        .key(&deeper)
        .body(aws_sdk_s3::primitives::ByteStream::from_static(b""))
        .send()
        .await
        .unwrap();
    let plain = s3_follow(&db, &bucket, "old", &dir.path().join("c2"), &["--from-start", "--once"])
        .output()
        .unwrap();
    assert_eq!(code(&plain), 1, "{}", stderr(&plain));
    assert!(stderr(&plain).contains(&deeper), "{}", stderr(&plain));
}

#[tokio::test]
async fn check_on_an_s3_sink_writes_one_probe_ever() {
    let _services = services().await;
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "m.db", 10);
    let bucket = bucket("probe").await;
    versioned(&bucket).await;
    for _ in 0..3 {
        let mut cmd = bin();
        s3_env(&mut cmd);
        let out = cmd
            .args(["check", "--db", path_str(&db), "--origin", "probe/agentrt"])
            .args([
                "--sink",
                &format!("s3://{bucket}/exports"),
                "--cursor",
                path_str(&dir.path().join("c")),
            ])
            .args(["--s3-endpoint", &s3_endpoint(), "--s3-path-style"])
            .output()
            .unwrap();
        assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    }
    let versions = s3_client().list_object_versions().bucket(&bucket).send().await.unwrap();
    assert_eq!(versions.versions().len(), 1, "{versions:?}");
    assert!(versions.delete_markers().is_empty(), "{versions:?}");
}

#[test]
fn writers_restarting_while_other_tools_open_the_database_never_stop_or_blind_the_follower() {
    // Ops tooling (a plain sqlite3 query) that opens and closes the database
    // read-write between writer sessions deletes and recreates its -wal/-shm.
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "m.db", 100);
    let (out, cursor) = (dir.path().join("out.jsonl"), dir.path().join("cursor"));
    let mut follower = spawn(file_follow(&db, &out, &cursor, "test/agentrt", &["--from-start"]));
    wait_for_cursor(&cursor, &db_head(&db), Duration::from_secs(20));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let tool = {
        let (db, stop) = (db.clone(), std::sync::Arc::clone(&stop));
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _: Option<i64> = tamper(&db)
                    .query_row("SELECT max(seq) FROM events", [], |r| r.get(0))
                    .ok();
                std::thread::sleep(Duration::from_millis(70));
            }
        })
    };
    for _ in 0..5 {
        let writer = run(&[
            "generate",
            "--db",
            path_str(&db),
            "--append",
            "--events",
            "0",
            "--follow-rate",
            "50",
            "--follow-for",
            "1s",
        ]);
        assert_eq!(code(&writer), 0, "{}", stderr(&writer));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    tool.join().unwrap();
    let head = db_head(&db);
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::read_to_string(&cursor).unwrap_or_default().trim() != head {
        if let Ok(Some(status)) = follower.try_wait() {
            panic!("the follower stopped ({status}): {}", stderr_of(&mut follower));
        }
        assert!(Instant::now() < deadline, "the follower did not reach {head}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(reverify_jsonl(&out, "test/agentrt").1, head.split(':').nth(1).unwrap());
}

/// `--from-start --once`, signing heads with `key` into the file store `store`.
fn anchored_once_args(store: &Path, key: &Path) -> Vec<String> {
    let anchor = format!("file:{}", path_str(store));
    [
        "--from-start",
        "--once",
        "--anchor",
        &anchor,
        "--signing-key",
        path_str(key),
    ]
    .map(String::from)
    .to_vec()
}

/// A record of this chain with its payload changed and its hash recomputed:
/// what someone who can write to the sink, but not sign heads, would plant.
fn forged(line: &str) -> String {
    let mut r = chainship_chain::record::Record::parse(line.as_bytes()).unwrap();
    r.payload_json = "{\"forged\":true}".into();
    let h = r.expected_hash();
    r.hash = String::from_utf8(h.to_vec()).unwrap().into();
    let mut out = Vec::new();
    r.write_json(&mut out);
    String::from_utf8(out).unwrap()
}

/// A file export of `db` with heads kept in `store`, and the verifier key.
fn anchored_file_export(dir: &Path, db: &Path, origin: &str) -> (std::path::PathBuf, std::path::PathBuf, String) {
    let (key, vkey) = keygen(dir, "t", "k");
    let store = dir.join("heads");
    std::fs::create_dir_all(&store).unwrap();
    let out = dir.join("export.jsonl");
    let res = file_follow(
        db,
        &out,
        &dir.join("export-cursor"),
        origin,
        &anchored_once_args(&store, &key),
    )
    .output()
    .unwrap();
    assert_eq!(code(&res), 0, "{}", stderr(&res));
    (out, store, vkey)
}

fn verify_export(from: &str, store: &Path, vkey: &str, origin: &str, extra: &[&str]) -> std::process::Output {
    let mut cmd = bin();
    s3_env(&mut cmd)
        .args([
            "verify-export",
            "--from",
            from,
            "--origin",
            origin,
            "--trusted-key",
            vkey,
        ])
        .args(["--anchor", &format!("file:{}", path_str(store))])
        .args(extra)
        .output()
        .unwrap()
}

#[tokio::test]
async fn stray_or_misnamed_s3_objects_under_the_origin_are_findings() {
    let _services = services().await;
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "m.db", 80);
    let (file_copy, store, vkey) = anchored_file_export(dir.path(), &db, "atk/s");
    let bucket = bucket("stray").await;
    let shipped = s3_follow(
        &db,
        &bucket,
        "atk/s",
        &dir.path().join("c"),
        &["--from-start", "--once"],
    )
    .output()
    .unwrap();
    assert_eq!(code(&shipped), 0, "{}", stderr(&shipped));
    let s3_args = ["--s3-endpoint", &s3_endpoint(), "--s3-path-style"];
    let clean = verify_export(&format!("s3://{bucket}/exports"), &store, &vkey, "atk/s", &s3_args);
    assert_eq!(code(&clean), 0, "{}{}", stdout(&clean), stderr(&clean));
    // A forged seq 10 under a name the batch pattern does not match: a SIEM loader takes it in.
    let lines: Vec<String> = std::fs::read_to_string(&file_copy)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(format!("{}\n", forged(&lines[9])).as_bytes()).unwrap();
    let body = gz.finish().unwrap();
    let put = |key: String, body: Vec<u8>| {
        let bucket = bucket.clone();
        async move {
            s3_client()
                .put_object()
                .bucket(&bucket)
                .key(&key)
                .body(aws_sdk_s3::primitives::ByteStream::from(body))
                .send()
                .await
                .unwrap();
            key
        }
    };
    // The name `check` once used for its probe is no exemption either.
    let probe_named = put("exports/atk%2Fs/.chainship-check".into(), body.clone()).await;
    let res = verify_export(&format!("s3://{bucket}/exports"), &store, &vkey, "atk/s", &s3_args);
    assert_eq!(code(&res), 1, "{}{}", stdout(&res), stderr(&res));
    s3_client()
        .delete_object()
        .bucket(&bucket)
        .key(&probe_named)
        .send()
        .await
        .unwrap();
    let stray = put("exports/atk%2Fs/evil.jsonl.gz".into(), body.clone()).await;
    let res = verify_export(&format!("s3://{bucket}/exports"), &store, &vkey, "atk/s", &s3_args);
    assert_eq!(code(&res), 1, "{}{}", stdout(&res), stderr(&res));
    assert!(stdout(&res).contains(&stray), "{}", stdout(&res));
    let follow = s3_follow(
        &db,
        &bucket,
        "atk/s",
        &dir.path().join("c2"),
        &["--from-start", "--once"],
    )
    .output()
    .unwrap();
    assert_eq!(code(&follow), 1, "{}", stderr(&follow));
    assert!(stderr(&follow).contains(&stray), "{}", stderr(&follow));
    s3_client()
        .delete_object()
        .bucket(&bucket)
        .key(&stray)
        .send()
        .await
        .unwrap();
    // A batch object whose contents are not the range its name says.
    let misnamed = put(format!("exports/atk%2Fs/{:020}-{:020}.jsonl.gz", 81, 90), body).await;
    let res = verify_export(&format!("s3://{bucket}/exports"), &store, &vkey, "atk/s", &s3_args);
    assert_eq!(code(&res), 1, "{}{}", stdout(&res), stderr(&res));
    assert!(stdout(&res).contains("its name says seqs 81 to 90"), "{}", stdout(&res));
    s3_client()
        .delete_object()
        .bucket(&bucket)
        .key(&misnamed)
        .send()
        .await
        .unwrap();
}

#[tokio::test]
async fn a_kafka_record_claiming_the_origin_under_another_key_or_at_the_cursor_is_caught() {
    let _services = services().await;
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "m.db", 60);
    let (file_copy, store, vkey) = anchored_file_export(dir.path(), &db, "atk/k");
    let lines: Vec<String> = std::fs::read_to_string(&file_copy)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let producer: FutureProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", kafka_addr())
        .create()
        .unwrap();
    let send = |topic: String, key: &'static str, value: String| {
        let producer = producer.clone();
        async move {
            producer
                .send(
                    FutureRecord::to(&topic).partition(0).key(key).payload(&value),
                    Duration::from_secs(10),
                )
                .await
                .unwrap();
        }
    };
    // 1. A forged seq 30 filed under another key: consumers of values take it as atk/k's.
    let topic1 = kafka_topic("otherkey", 1).await;
    let cursor1 = dir.path().join("k1");
    let first = kafka_follow(&db, &topic1, "atk/k", &cursor1, &["--from-start", "--once"])
        .output()
        .unwrap();
    assert_eq!(code(&first), 0, "{}", stderr(&first));
    send(topic1.clone(), "atk/x", forged(&lines[29])).await;
    let res = verify_export(
        &format!("kafka://{}/{topic1}", kafka_addr()),
        &store,
        &vkey,
        "atk/k",
        &[],
    );
    assert_eq!(code(&res), 1, "{}{}", stdout(&res), stderr(&res));
    assert!(stdout(&res).contains("seq 30"), "{}", stdout(&res));
    // 2. A forged copy of the cursor's own record after it: the follower stops.
    let topic2 = kafka_topic("atcursor", 1).await;
    let cursor2 = dir.path().join("k2");
    let first = kafka_follow(&db, &topic2, "atk/k", &cursor2, &["--from-start", "--once"])
        .output()
        .unwrap();
    assert_eq!(code(&first), 0, "{}", stderr(&first));
    send(topic2.clone(), "atk/k", forged(&lines[59])).await;
    append(&db, 20);
    let before = std::fs::read_to_string(&cursor2).unwrap();
    let res = kafka_follow(&db, &topic2, "atk/k", &cursor2, &["--once"])
        .output()
        .unwrap();
    assert_eq!(code(&res), 1, "{}", stderr(&res));
    assert!(
        stderr(&res).contains("is not the record delivered at the cursor"),
        "{}",
        stderr(&res)
    );
    assert_eq!(std::fs::read_to_string(&cursor2).unwrap(), before);
}

#[test]
fn planted_head_files_at_future_seqs_never_stop_anchoring() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "m.db", 60);
    let (key, vkey) = keygen(dir.path(), "t", "k");
    let store = dir.path().join("heads");
    let origin_dir = store.join("test/agentrt");
    std::fs::create_dir_all(&origin_dir).unwrap();
    // Empty files at every head name the follower will use next.
    for seq in 61..=200 {
        std::fs::write(origin_dir.join(format!("{seq:020}.head")), b"").unwrap();
    }
    append(&db, 40);
    let (out, cursor) = (dir.path().join("out.jsonl"), dir.path().join("cursor"));
    let res = file_follow(&db, &out, &cursor, "test/agentrt", &anchored_once_args(&store, &key))
        .output()
        .unwrap();
    assert_eq!(code(&res), 0, "{}", stderr(&res));
    // The head for 100 went beside the planted file; the verifier sees both.
    let out = bin()
        .args([
            "anchor",
            "verify",
            "--json",
            "--db",
            path_str(&db),
            "--origin",
            "test/agentrt",
        ])
        .args([
            "--anchor",
            &format!("file:{}", path_str(&store)),
            "--trusted-key",
            &vkey,
        ])
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["last_trusted_head"]["seq"], 100, "{json}");
    assert_eq!(code(&out), 1, "the planted files are still reported: {json}");
}

/// Attack round 14: where seq is not the rowid, a second row of the seq at
/// the cursor (the break a first pass named, or one planted after it) is
/// never read again by `seq > cursor`; and a row whose seq no read reaches
/// (NULL) is never read at all. Both stop every start, as `verify` names them.
#[test]
fn a_seq_held_twice_at_the_cursor_or_a_null_seq_stops_every_start() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "loose.db", 100);
    tamper(&db)
        .execute_batch(
            "CREATE TABLE ev (seq INTEGER, run_id TEXT, step_id TEXT, at TEXT, type TEXT, payload_json TEXT, hash TEXT);
             INSERT INTO ev SELECT * FROM events WHERE seq <= 50 ORDER BY seq;",
        )
        .unwrap();
    let (out, cursor) = (dir.path().join("out.jsonl"), dir.path().join("cursor"));
    let follow = |first: bool| {
        let mut extra = vec!["--once", "--table", "ev"];
        if first {
            extra.push("--from-start");
        }
        file_follow(&db, &out, &cursor, "harden/loose", &extra)
            .output()
            .unwrap()
    };
    let verify = || {
        let out = bin()
            .args(["verify", "--db", path_str(&db), "--table", "ev"])
            .output()
            .unwrap();
        code(&out)
    };
    let first = follow(true);
    assert_eq!(code(&first), 0, "{}", stderr(&first));
    assert!(std::fs::read_to_string(&cursor).unwrap().starts_with("50:"));

    // A forged second row of seq 50, then the rest of the chain after it.
    tamper(&db)
        .execute_batch(
            "INSERT INTO ev SELECT seq, run_id, step_id, at, type, '{\"evil\":1}', hash FROM events WHERE seq = 50;
             INSERT INTO ev SELECT * FROM events WHERE seq > 50 ORDER BY seq;",
        )
        .unwrap();
    for _ in 0..2 {
        let again = follow(false);
        assert_eq!(code(&again), 1, "{}", stderr(&again));
        assert!(
            stderr(&again).contains("2 rows of the database have seq 50"),
            "{}",
            stderr(&again)
        );
    }
    assert_eq!(verify(), 1);
    assert_eq!(
        std::fs::read_to_string(&out).unwrap().lines().count(),
        50,
        "nothing past the forgery was sent"
    );

    // The forgery gone, the chain is whole again and delivered; then a row with no seq.
    tamper(&db)
        .execute("DELETE FROM ev WHERE payload_json = '{\"evil\":1}'", [])
        .unwrap();
    let clean = follow(false);
    assert_eq!(code(&clean), 0, "{}", stderr(&clean));
    tamper(&db)
        .execute(
            "INSERT INTO ev SELECT NULL, run_id, step_id, at, type, payload_json, hash FROM events WHERE seq = 7",
            [],
        )
        .unwrap();
    let null = follow(false);
    assert_eq!(code(&null), 1, "{}", stderr(&null));
    assert!(stderr(&null).contains("a row has seq NULL"), "{}", stderr(&null));
    assert_eq!(verify(), 1);
}
