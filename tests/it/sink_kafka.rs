//! The Kafka sink against both real brokers the test script starts, tansu
//! and Apache Kafka (each test runs on each: `on_tansu::`, `on_apache_kafka::`):
//! ordered, every event once — with a live writer, across kill -9, across an
//! outage longer than message.timeout.ms — and fenced against a second
//! follower of the same origin. Where the brokers differ, the test says so.

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;
use tempfile::TempDir;

const PARTITIONS: i32 = 3;

on_both_brokers!(
    live_writer_to_kafka_every_event_once_in_order,
    kill_9_at_twenty_moments_keeps_every_event_exactly_once,
    a_broker_outage_longer_than_message_timeout_loses_nothing,
    a_record_that_disagrees_with_the_database_stops_the_follower,
    a_second_follower_of_the_same_origin_fences_the_first,
    a_topic_that_lost_the_cursors_record_stops_the_follower
);

fn spawn_follow(db: &Path, topic: &str, origin: &str, cursor: &Path, extra: &[&str]) -> Child {
    kafka_follow(db, topic, origin, cursor, extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Reads the origin's partition back and re-verifies the chain from it.
fn read_back(topic: &str, origin: &str, dir: &Path) -> String {
    let partition = chainship_sinks::kafka::partition_for(origin, PARTITIONS as usize);
    let lines = kafka_read_partition(topic, partition, origin);
    let file = dir.join("readback.jsonl");
    std::fs::write(&file, lines).unwrap();
    let (seq, hash) = reverify_jsonl(&file, origin);
    format!("{seq}:{hash}")
}

async fn live_writer_to_kafka_every_event_once_in_order() {
    let _services = services_exclusive().await;
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "live.db", 2000);
    let topic = kafka_topic("live", PARTITIONS).await;
    let cursor = dir.path().join("cursor");
    let mut writer = live_writer(&db, "500", &[]);
    let mut follower = KillOnDrop(spawn_follow(
        &db,
        &topic,
        "kafka/live",
        &cursor,
        &["--from-start", "--batch-size", "200"],
    ));
    std::thread::sleep(Duration::from_secs(3));
    let head = stop_writer(&mut writer, &db);
    wait_for_cursor(&cursor, &head, Duration::from_secs(15));
    signal(&follower, SIGTERM);
    assert_eq!(wait_with_limit(&mut follower, Duration::from_secs(10)).code(), Some(0));
    assert_eq!(read_back(&topic, "kafka/live", dir.path()), head);
}

async fn kill_9_at_twenty_moments_keeps_every_event_exactly_once() {
    let _services = services_exclusive().await;
    let dir = TempDir::new().unwrap();
    // 10k events there at start, 40k more appended while the kills happen.
    let db = generate(dir.path(), "crash.db", 10_000);
    let mut writer = live_writer(&db, "600", &["--follow-max", "40000"]);
    let topic = kafka_topic("crash", PARTITIONS).await;
    let cursor = dir.path().join("cursor");
    // --from-start only applies while there is no cursor yet. Start-up
    // (fencing, reading the tail back) takes a second or more, depending on
    // the load: half the kills come after a delivery of that life.
    let delivered = kill_9_loop_mid_export(
        20,
        &mut XorShift::new(0xD6E8_FEB8_6659_FD93),
        0..2500,
        || {
            spawn_follow(
                &db,
                &topic,
                "kafka/crash",
                &cursor,
                &["--batch-size", "1000", "--from-start"],
            )
        },
        || std::fs::read_to_string(&cursor).unwrap_or_default(),
    );
    let progressed = delivered.windows(2).filter(|w| w[0] != w[1]).count();
    assert!(
        progressed >= 10,
        "kills landed mid-export, with progress between them: {delivered:?}"
    );
    assert!(wait_with_limit(&mut writer, Duration::from_secs(60)).success());
    let out = kafka_follow(&db, &topic, "kafka/crash", &cursor, &["--once", "--batch-size", "1000"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(read_back(&topic, "kafka/crash", dir.path()), db_head(&db));
}

async fn a_broker_outage_longer_than_message_timeout_loses_nothing() {
    let _services = services_exclusive().await;
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "outage.db", 1000);
    let topic = kafka_topic("outage", PARTITIONS).await;
    let cursor = dir.path().join("cursor");
    let mut writer = live_writer(&db, "300", &[]);
    let mut follower = KillOnDrop(spawn_follow(
        &db,
        &topic,
        "kafka/outage",
        &cursor,
        &[
            "--from-start",
            "--batch-size",
            "100",
            "--kafka-opt",
            "message.timeout.ms=3000",
        ],
    ));
    std::thread::sleep(Duration::from_secs(2));
    {
        let _paused = Paused::new(kafka_pid());
        std::thread::sleep(Duration::from_secs(8));
    }
    std::thread::sleep(Duration::from_secs(1));
    let head = stop_writer(&mut writer, &db);
    wait_for_cursor(&cursor, &head, Duration::from_secs(90));
    signal(&follower, SIGTERM);
    assert_eq!(wait_with_limit(&mut follower, Duration::from_secs(15)).code(), Some(0));
    assert_eq!(read_back(&topic, "kafka/outage", dir.path()), head);
}

async fn a_record_that_disagrees_with_the_database_stops_the_follower() {
    let _services = services().await;
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "a.db", 500);
    let other = generate_with(dir.path(), "other.db", 500, &["--seed", "3"]);
    let topic = kafka_topic("disagree", PARTITIONS).await;
    let out = kafka_follow(
        &other,
        &topic,
        "kafka/x",
        &dir.path().join("c1"),
        &["--once", "--from-start"],
    )
    .output()
    .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = kafka_follow(
        &db,
        &topic,
        "kafka/x",
        &dir.path().join("c2"),
        &["--once", "--from-start"],
    )
    .output()
    .unwrap();
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("rewritten under the sink kafka://"),
        "{}",
        stderr(&out)
    );
}

async fn a_second_follower_of_the_same_origin_fences_the_first() {
    let _services = services().await;
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "fence.db", 500);
    let topic = kafka_topic("fence", PARTITIONS).await;
    let mut writer = live_writer(&db, "200", &[]);
    let start = |cursor: &str, log: &str| {
        KillOnDrop(
            kafka_follow(
                &db,
                &topic,
                "kafka/fence",
                &dir.path().join(cursor),
                &["--from-start", "--batch-size", "20"],
            )
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join(log)).unwrap())
            .spawn()
            .unwrap(),
        )
    };
    let mut first = start("c1", "first.log");
    std::thread::sleep(Duration::from_secs(2));
    let mut second = start("c2", "second.log");
    // Kafka fences the older producer (the second's init_transactions bumps
    // the epoch). tansu does not always answer the older one with
    // PRODUCER_FENCED (it may time its requests out), so which one yields
    // can vary there. What must hold on both: one stops, naming the
    // takeover, and the two never interleave.
    let deadline = Instant::now() + Duration::from_secs(90);
    let log = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap_or_default();
    let (stopped_log, survivor, survivor_cursor) = loop {
        if Instant::now() > deadline {
            // tansu, under load, may time the fenced producer's commit out
            // instead of answering PRODUCER_FENCED: the first then retries,
            // and its read-back of a partition the second writes non-stop
            // never reaches an end (it reads until the partition is quiet;
            // the fleet issue replaces that). Pinned here: it keeps retrying,
            // says why, and the two still never interleave.
            // tansu may also keep the partition's last stable offset at
            // offset 0 for good under load (docs/src/development.md): the
            // first's read-back then never passes it, and says so.
            let first_log = log("first.log");
            assert!(
                broker() == Broker::Tansu
                    && (first_log.contains("did not reach its end") || first_log.contains("stay unreadable")),
                "neither follower stopped within 90 s\nfirst:\n{first_log}\nsecond:\n{}",
                log("second.log")
            );
            signal(&first, SIGKILL);
            let _ = first.wait();
            break ("first.log", &mut second, "c2");
        }
        if let Some(status) = first.try_wait().unwrap() {
            assert_eq!(status.code(), Some(2));
            break ("first.log", &mut second, "c2");
        }
        if let Some(status) = second.try_wait().unwrap() {
            assert_eq!(status.code(), Some(2));
            assert_eq!(
                broker(),
                Broker::Tansu,
                "Apache Kafka fences the older producer, never the newer\nsecond:\n{}\nfirst:\n{}",
                log("second.log"),
                log("first.log")
            );
            break ("second.log", &mut first, "c1");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let err = std::fs::read_to_string(dir.path().join(stopped_log)).unwrap();
    assert!(
        err.contains("another follower for this origin took over") || err.contains("did not reach its end"),
        "{err}"
    );
    let head = stop_writer(&mut writer, &db);
    let survivor_log = if stopped_log == "first.log" {
        "second.log"
    } else {
        "first.log"
    };
    let reached = Instant::now() + Duration::from_secs(60);
    while std::fs::read_to_string(dir.path().join(survivor_cursor))
        .unwrap_or_default()
        .trim()
        != head
    {
        assert!(
            Instant::now() < reached,
            "the survivor did not reach {head} within 60 s\nsurvivor ({survivor_log}):\n{}\nstopped ({stopped_log}):\n{}",
            log(survivor_log),
            log(stopped_log)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    signal(survivor, SIGTERM);
    wait_with_limit(survivor, Duration::from_secs(20));
    // tansu does not hide an aborted transaction's records: the fenced
    // follower's last batch may stay visible as identical copies of seqs
    // already there (Kafka's read_committed hides them: there, every seq is
    // there exactly once). So the check is the auditor's: every seq once in
    // order, no gap, no differing duplicate.
    let partition = chainship_sinks::kafka::partition_for("kafka/fence", PARTITIONS as usize);
    // On tansu, read uncommitted: it hides no aborted record anyway, and a
    // last stable offset it holds at 0 would hide everything.
    let isolation = match broker() {
        Broker::Tansu => "read_uncommitted",
        Broker::ApacheKafka => "read_committed",
    };
    let lines = kafka_read_partition_as(&topic, partition, "kafka/fence", isolation);
    let mut check = chainship_verify::export::ExportCheck::new("kafka/fence", None);
    for line in lines.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        check.feed_line(line, &|| "topic".into());
    }
    check.finish(&mut |_| None);
    assert!(check.findings.is_empty(), "{:?}", check.findings);
    assert_eq!(check.end(), head.split(':').next().unwrap().parse().ok());
    if broker() == Broker::ApacheKafka {
        let records = lines.split(|b| *b == b'\n').filter(|l| !l.is_empty()).count() as u64;
        assert_eq!(
            Some(records),
            check.end(),
            "read_committed shows every seq exactly once"
        );
    }
}

async fn a_topic_that_lost_the_cursors_record_stops_the_follower() {
    let _services = services().await;
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "a.db", 300);
    let cursor = dir.path().join("cursor");
    let first = kafka_topic("lost", PARTITIONS).await;
    let out = kafka_follow(&db, &first, "kafka/lost", &cursor, &["--once", "--from-start"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    // The same cursor pointed at an empty topic: the topic was recreated.
    let recreated = kafka_topic("lost", PARTITIONS).await;
    append(&db, 10);
    let out = kafka_follow(&db, &recreated, "kafka/lost", &cursor, &["--once"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(stderr(&out).contains("no longer holds seq 300"), "{}", stderr(&out));
}
