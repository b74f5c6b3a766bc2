//! The S3 sink against the real S3 server the test script starts: every
//! event once, in order, in objects whose ranges never overlap — with a
//! live writer, across kill -9, and across a 30 s outage.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use crate::common::*;
use tempfile::TempDir;

const ORIGIN: &str = "siem/agentrt";
/// How the origin appears in object keys (one encoded segment).
const ORIGIN_KEY: &str = "siem%2Fagentrt";
fn follow_cmd(db: &Path, bucket: &str, cursor: &Path, extra: &[&str]) -> std::process::Command {
    let mut cmd = s3_follow(db, bucket, ORIGIN, cursor, &["--s3-region", "us-east-1"]);
    cmd.args(extra);
    cmd
}

fn spawn_follow(db: &Path, bucket: &str, cursor: &Path, extra: &[&str]) -> Child {
    follow_cmd(db, bucket, cursor, extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Lists and decompresses every object of the origin, in key order, checks
/// that their ranges follow each other without overlap, writes the records
/// to one JSON Lines file and re-verifies the chain from them.
async fn read_back(bucket: &str, dir: &Path) -> (u64, String, usize) {
    let s3 = s3_client();
    let mut keys = Vec::new();
    let mut pages = s3
        .list_objects_v2()
        .bucket(bucket)
        .prefix(format!("exports/{ORIGIN_KEY}/"))
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        keys.extend(
            page.unwrap()
                .contents()
                .iter()
                .filter_map(|o| o.key().map(str::to_owned)),
        );
    }
    keys.sort();
    let mut all = Vec::new();
    let mut expect_first = 1;
    for key in &keys {
        let range = chainship_sinks::s3::parse_object_name(key).unwrap_or_else(|| panic!("unexpected object {key}"));
        assert_eq!(
            range.first, expect_first,
            "{key}: ranges must follow each other, no overlap, no gap"
        );
        expect_first = range.last + 1;
        let obj = s3.get_object().bucket(bucket).key(key).send().await.unwrap();
        assert_eq!(
            obj.metadata().and_then(|m| m.get("origin")).map(String::as_str),
            Some(ORIGIN)
        );
        let encoding = obj.content_encoding().map(str::to_owned);
        let packed = obj.body.collect().await.unwrap().into_bytes();
        let mut text = Vec::new();
        // Decoded by the name's suffix, as a SIEM loader would; the Content-Encoding must agree.
        if key.ends_with(".jsonl.gz") {
            assert_eq!(encoding.as_deref(), Some("gzip"), "{key}");
            flate2::read::MultiGzDecoder::new(&packed[..])
                .read_to_end(&mut text)
                .unwrap();
        } else {
            assert!(key.ends_with(".jsonl.zst"), "{key}");
            assert_eq!(encoding.as_deref(), Some("zstd"), "{key}");
            text = zstd::stream::decode_all(&packed[..]).unwrap();
        }
        let lines = text.iter().filter(|b| **b == b'\n').count() as u64;
        assert_eq!(
            lines,
            range.last - range.first + 1,
            "{key}: record count matches its name"
        );
        all.extend_from_slice(&text);
    }
    let file = dir.join("readback.jsonl");
    std::fs::write(&file, &all).unwrap();
    let (seq, hash) = reverify_jsonl(&file, ORIGIN);
    (seq, hash, keys.len())
}

fn head_seq(db: &Path) -> u64 {
    db_head(db).split(':').next().unwrap().parse().unwrap()
}

#[tokio::test]
async fn live_writer_to_s3_every_event_once_in_order() {
    let _services = services_exclusive().await;
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "live.db", 3000);
    let bucket = bucket("events").await;
    let cursor = dir.path().join("cursor");
    let mut writer = live_writer(&db, "500", &[]);
    let mut follower = KillOnDrop(spawn_follow(
        &db,
        &bucket,
        &cursor,
        &[
            "--from-start",
            "--s3-batch-events",
            "700",
            "--s3-batch-age",
            "300ms",
            "--s3-date-partition",
        ],
    ));
    std::thread::sleep(Duration::from_secs(3));
    let final_head = stop_writer(&mut writer, &db);
    wait_for_cursor(&cursor, &final_head, Duration::from_secs(10));
    signal(&follower, SIGTERM);
    assert_eq!(wait_with_limit(&mut follower, Duration::from_secs(10)).code(), Some(0));
    let (seq, hash, objects) = read_back(&bucket, dir.path()).await;
    assert_eq!(format!("{seq}:{hash}"), final_head);
    assert!(objects > 5, "several objects: {objects}");
    let listing = s3_client().list_objects_v2().bucket(&bucket).send().await.unwrap();
    assert!(
        listing.contents()[0]
            .key()
            .unwrap()
            .starts_with(&format!("exports/{ORIGIN_KEY}/dt=2026-08-"))
    );
}

#[tokio::test]
async fn kill_9_at_twenty_moments_keeps_every_event_exactly_once() {
    let _services = services_exclusive().await;
    let dir = TempDir::new().unwrap();
    // 10k events there at start, 40k more appended while the kills happen.
    let db = generate(dir.path(), "crash.db", 10_000);
    let mut writer = live_writer(&db, "1000", &["--follow-max", "40000"]);
    let bucket = bucket("events").await;
    let cursor = dir.path().join("cursor");
    // --from-start only applies while there is no cursor yet.
    let extra = ["--s3-batch-events", "1000", "--s3-batch-age", "500ms", "--from-start"];
    // Every other life first delivers a batch (however slow the start under
    // load), then dies within the delay; the others die at any moment.
    let delivered = kill_9_loop_mid_export(
        20,
        &mut XorShift::new(0x9E37_79B9_7F4A_7C15),
        700..2200,
        || spawn_follow(&db, &bucket, &cursor, &extra),
        || std::fs::read_to_string(&cursor).unwrap_or_default(),
    );
    let progressed = delivered.windows(2).filter(|w| w[0] != w[1]).count();
    assert!(
        progressed >= 10,
        "kills landed mid-export, with progress between them: {delivered:?}"
    );
    assert!(wait_with_limit(&mut writer, Duration::from_secs(60)).success());
    let out = follow_cmd(&db, &bucket, &cursor, &["--once", "--s3-batch-events", "1000"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let (seq, hash, _) = read_back(&bucket, dir.path()).await;
    assert_eq!(format!("{seq}:{hash}"), db_head(&db));
}

#[tokio::test]
async fn a_30_second_outage_loses_and_duplicates_nothing() {
    let _services = services_exclusive().await;
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "outage.db", 1000);
    let bucket = bucket("events").await;
    let cursor = dir.path().join("cursor");
    let mut writer = live_writer(&db, "300", &[]);
    let mut follower = KillOnDrop(spawn_follow(
        &db,
        &bucket,
        &cursor,
        &["--from-start", "--s3-batch-events", "500", "--s3-batch-age", "200ms"],
    ));
    std::thread::sleep(Duration::from_secs(2));
    {
        let _paused = Paused::new(service_pid("CHAINSHIP_TEST_S3_PID"));
        std::thread::sleep(Duration::from_secs(30));
    }
    std::thread::sleep(Duration::from_secs(1));
    let final_head = stop_writer(&mut writer, &db);
    wait_for_cursor(&cursor, &final_head, Duration::from_secs(90));
    signal(&follower, SIGTERM);
    assert_eq!(wait_with_limit(&mut follower, Duration::from_secs(10)).code(), Some(0));
    let (seq, hash, _) = read_back(&bucket, dir.path()).await;
    assert_eq!(format!("{seq}:{hash}"), final_head);
    assert!(
        head_seq(&db) > 1000 + 30 * 300 / 2,
        "the writer kept writing through the outage"
    );
}

#[tokio::test]
async fn an_object_that_disagrees_with_the_database_stops_the_follower() {
    let _services = services().await;
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "a.db", 800);
    let other = generate_with(dir.path(), "other.db", 800, &["--seed", "5"]);
    let bucket = bucket("events").await;
    // Another database's chain exported under the same origin.
    let out = follow_cmd(
        &other,
        &bucket,
        &dir.path().join("c1"),
        &["--once", "--from-start", "--s3-batch-events", "300"],
    )
    .output()
    .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = follow_cmd(&db, &bucket, &dir.path().join("c2"), &["--once", "--from-start"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("rewritten under the sink s3://"),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("event seq 800"), "{}", stderr(&out));
}

/// The unfinished multipart uploads in a bucket.
async fn unfinished_uploads(bucket: &str) -> Vec<String> {
    let listing = s3_client()
        .list_multipart_uploads()
        .bucket(bucket)
        .send()
        .await
        .unwrap();
    listing
        .uploads()
        .iter()
        .filter_map(|u| u.key().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn zstd_objects_above_the_threshold_go_up_in_parts_and_read_back_whole() {
    let _services = services().await;
    let dir = TempDir::new().unwrap();
    // ~65 bytes per event after zstd: 100k events make one ~6.5 MB object, over a 5 MiB threshold.
    let db = generate_with(dir.path(), "big.db", 130000, &["--large-every", "0"]);
    let bucket = bucket("events").await;
    // What a follower killed mid-upload leaves behind: the next start aborts it.
    s3_client()
        .create_multipart_upload()
        .bucket(&bucket)
        .key(format!(
            "exports/{ORIGIN_KEY}/00000000000000000001-00000000000000000009.jsonl.zst"
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(unfinished_uploads(&bucket).await.len(), 1);
    let out = follow_cmd(
        &db,
        &bucket,
        &dir.path().join("cursor"),
        &[
            "--once",
            "--from-start",
            "--s3-compression",
            "zstd",
            "--s3-batch-events",
            "100000",
            "--s3-multipart-threshold",
            "5MiB",
            "--s3-part-size",
            "5MiB",
        ],
    )
    .env("RUST_LOG", "info")
    .output()
    .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("aborted unfinished multipart uploads"),
        "{}",
        stderr(&out)
    );
    assert_eq!(unfinished_uploads(&bucket).await, Vec::<String>::new());

    let (seq, hash, objects) = read_back(&bucket, dir.path()).await;
    assert_eq!(format!("{seq}:{hash}"), db_head(&db));
    assert_eq!(objects, 2, "100k events, then the rest");
    // A multipart object's ETag is "<md5 of the part md5s>-<parts>"; a single PUT's has no dash.
    let etags: Vec<String> = {
        let mut etags = Vec::new();
        for first in [
            "00000000000000000001-00000000000000100000",
            "00000000000000100001-00000000000000130000",
        ] {
            let head = s3_client()
                .head_object()
                .bucket(&bucket)
                .key(format!("exports/{ORIGIN_KEY}/{first}.jsonl.zst"))
                .send()
                .await
                .unwrap();
            etags.push(head.e_tag().unwrap().to_owned());
        }
        etags
    };
    assert!(etags[0].trim_matches('"').ends_with("-2"), "two parts: {etags:?}");
    assert!(!etags[1].contains('-'), "the small object is a single PUT: {etags:?}");
}

#[tokio::test]
async fn a_multipart_upload_never_overwrites_and_leaves_no_parts_behind() {
    use chainship_s3::{NewObject, PartPlan, upload_new};
    let _services = services().await;
    let bucket = bucket("events").await;
    let object = NewObject {
        bucket: &bucket,
        key: "p/o/00000000000000000001-00000000000000000002.jsonl.zst",
        content_type: "application/x-ndjson",
        content_encoding: Some("zstd"),
        metadata: Default::default(),
        retain_until: None,
    };
    let plan = PartPlan {
        threshold: 5 << 20,
        part_size: 5 << 20,
    };
    let body = |byte: u8| vec![byte; (11 << 20) + 7];
    let client = s3_client();
    upload_new(&client, &object, body(b'a'), plan)
        .await
        .expect("the first upload lands");
    let refused = upload_new(&client, &object, body(b'b'), plan)
        .await
        .expect_err("a second upload to the same name is refused");
    assert!(
        refused.precondition_failed(),
        "412 from CompleteMultipartUpload: {refused:?}"
    );
    assert_eq!(
        unfinished_uploads(&bucket).await,
        Vec::<String>::new(),
        "the refused upload was aborted"
    );
    let kept = client
        .get_object()
        .bucket(&bucket)
        .key(object.key)
        .send()
        .await
        .unwrap();
    let kept = kept.body.collect().await.unwrap().into_bytes();
    assert_eq!(kept.len(), (11 << 20) + 7);
    assert!(kept.iter().all(|b| *b == b'a'), "the first object is untouched");
    // The same for a single PUT, under the threshold.
    let small = NewObject {
        key: "p/o/small.jsonl.gz",
        ..object
    };
    upload_new(&client, &small, b"one".to_vec(), plan).await.unwrap();
    let refused = upload_new(&client, &small, b"two".to_vec(), plan).await.unwrap_err();
    assert!(refused.precondition_failed(), "{refused:?}");
}

#[tokio::test]
async fn a_bucket_that_lost_the_cursors_object_stops_the_follower() {
    let _services = services().await;
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "a.db", 600);
    let bucket = bucket("events").await;
    let cursor = dir.path().join("c");
    let once = |extra: &[&str]| {
        let mut args = vec!["--once", "--from-start", "--s3-batch-events", "200"];
        args.extend_from_slice(extra);
        follow_cmd(&db, &bucket, &cursor, &args).output().unwrap()
    };
    assert_eq!(code(&once(&[])), 0);
    // The object holding the cursor's record (seqs 401-600) is deleted.
    let listing = s3_client().list_objects_v2().bucket(&bucket).send().await.unwrap();
    let last = listing
        .contents()
        .iter()
        .filter_map(|o| o.key())
        .find(|k| k.contains("00000000000000000401-00000000000000000600"))
        .expect("the last object")
        .to_owned();
    s3_client()
        .delete_object()
        .bucket(&bucket)
        .key(&last)
        .send()
        .await
        .unwrap();
    append(&db, 50);
    let out = once(&[]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(stderr(&out).contains("no longer holds seq 600"), "{}", stderr(&out));
    let listing = s3_client().list_objects_v2().bucket(&bucket).send().await.unwrap();
    assert_eq!(listing.contents().len(), 2, "nothing was delivered after the gap");
    // A name is no proof: junk planted under the lost object's name holds nothing.
    s3_client()
        .put_object()
        .bucket(&bucket)
        .key(&last)
        .body(aws_sdk_s3::primitives::ByteStream::from_static(b"junk"))
        .send()
        .await
        .unwrap();
    let out = once(&[]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(stderr(&out).contains("no longer holds seq 600"), "{}", stderr(&out));
}
