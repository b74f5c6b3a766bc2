//! What exactly-once rests on, proven on Apache Kafka itself (issue 48),
//! where tansu differs: a follower killed inside a transaction leaves it
//! open, and the restart must not wait for `transaction.timeout.ms` (it
//! fences first, then reads); `read_committed` hides aborted records, so
//! they are never counted as held; transaction markers take offsets, so no
//! reader may take `offset + 1` for the next record; a partition's end is
//! its high watermark as Kafka reports it (the last offset + 1, here a
//! commit marker's).

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, Message, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use tempfile::TempDir;

use crate::common::*;

const PARTITIONS: i32 = 3;

/// Every record of `topic`'s `partition` as (offset, key, value), read to
/// the high watermark with the isolation level given.
fn records(topic: &str, partition: i32, isolation: &str) -> Vec<(i64, Vec<u8>, Vec<u8>)> {
    let consumer: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", kafka_addr())
        .set("group.id", "chainship-tests-semantics")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .set("isolation.level", isolation)
        .create()
        .unwrap();
    let mut tpl = rdkafka::TopicPartitionList::new();
    tpl.add_partition_offset(topic, partition, rdkafka::Offset::Beginning)
        .unwrap();
    consumer.assign(&tpl).unwrap();
    let mut out = Vec::new();
    let started = Instant::now();
    loop {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "reading {topic} took too long"
        );
        match consumer.poll(Duration::from_millis(500)) {
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(_))) => break,
            Some(Ok(m)) => out.push((
                m.offset(),
                m.key().unwrap_or_default().to_vec(),
                m.payload().unwrap_or_default().to_vec(),
            )),
            Some(Err(e)) => panic!("{e}"),
            None => {}
        }
    }
    out
}

fn high_watermark(topic: &str, partition: i32) -> i64 {
    let consumer: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", kafka_addr())
        .set("group.id", "chainship-tests-semantics")
        .create()
        .unwrap();
    consumer
        .fetch_watermarks(topic, partition, Duration::from_secs(10))
        .unwrap()
        .1
}

fn follow_once(db: &Path, topic: &str, origin: &str, cursor: &Path, extra: &[&str]) -> std::process::Output {
    // At info: the resume says what the sink already held, which a test looks for.
    kafka_follow(db, topic, origin, cursor, &["--once"])
        .args(extra)
        .env("RUST_LOG", "info")
        .output()
        .unwrap()
}

/// Each seq of `origin` once, in order, from 1 to `last`, in what
/// `read_committed` shows.
fn exactly_once(topic: &str, origin: &str, last: u64) {
    let partition = chainship_sinks::kafka::partition_for(origin, PARTITIONS as usize);
    let seqs: Vec<u64> = records(topic, partition, "read_committed")
        .iter()
        .filter(|(_, key, _)| key == origin.as_bytes())
        .map(|(_, _, value)| chainship_chain::record::Record::parse(value).unwrap().seq)
        .collect();
    assert_eq!(seqs, (1..=last).collect::<Vec<_>>(), "every seq once, in order");
}

/// Killed inside a transaction, the follower leaves it open on Kafka: a
/// `read_committed` reader of the partition stops at its start until it is
/// aborted. The restart fences first (its init aborts the open transaction),
/// then reads back, so it resumes at once, not after `transaction.timeout.ms`
/// (60 s here), and ships every event once.
#[tokio::test]
async fn a_follower_killed_inside_a_transaction_resumes_at_once_without_a_duplicate() {
    on_broker(Broker::ApacheKafka, async {
        let _services = services_exclusive().await;
        let dir = TempDir::new().unwrap();
        let db = generate(dir.path(), "txn.db", 60_000);
        let topic = kafka_topic("txn", PARTITIONS).await;
        let origin = "kafka/txn";
        let partition = chainship_sinks::kafka::partition_for(origin, PARTITIONS as usize);
        let cursor = dir.path().join("cursor");
        let timeout = ["--kafka-opt", "transaction.timeout.ms=60000", "--batch-size", "5000"];
        // Kill it the moment a transaction of its is open (the partition's end
        // past its last stable offset: records sent, not committed), until a
        // kill lands there: seen, not timed by sleeps, so a loaded machine
        // still gets one.
        let watermarks = |isolation: &str| -> BaseConsumer {
            rdkafka::ClientConfig::new()
                .set("bootstrap.servers", kafka_addr())
                .set("group.id", "chainship-tests-semantics")
                .set("isolation.level", isolation)
                .create()
                .unwrap()
        };
        let (uncommitted_end, committed_end) = (watermarks("read_uncommitted"), watermarks("read_committed"));
        let mut open = false;
        for _attempt in 0..20 {
            let mut follower = KillOnDrop(
                kafka_follow(&db, &topic, origin, &cursor, &["--from-start"])
                    .args(timeout)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap(),
            );
            let deadline = Instant::now() + Duration::from_secs(30);
            while Instant::now() < deadline && follower.try_wait().unwrap().is_none() {
                let end = |c: &BaseConsumer| {
                    c.fetch_watermarks(&topic, partition, Duration::from_secs(5))
                        .map(|w| w.1)
                };
                if let (Ok(high), Ok(stable)) = (end(&uncommitted_end), end(&committed_end))
                    && stable < high
                {
                    break;
                }
            }
            signal(&follower, SIGKILL);
            let _ = follower.wait();
            let uncommitted = records(&topic, partition, "read_uncommitted").len();
            let committed = records(&topic, partition, "read_committed").len();
            if uncommitted > committed {
                open = true;
                break;
            }
        }
        assert!(open, "no kill landed inside a transaction in 20 tries");
        let started = Instant::now();
        // `--from-start` counts only when no kill came after a cursor write.
        let out = follow_once(
            &db,
            &topic,
            origin,
            &cursor,
            &[&timeout[..], &["--from-start"]].concat(),
        );
        let took = started.elapsed();
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        assert!(
            took < Duration::from_secs(30),
            "the restart waited for the open transaction's timeout ({took:?}): {}",
            stderr(&out)
        );
        exactly_once(&topic, origin, 60_000);
    })
    .await
}

/// Records of an aborted transaction past the cursor (a follower's batch
/// that never committed, here written by another producer exactly as the
/// follower writes them) are hidden from `read_committed`: the follower
/// never counts them as held, ships those events itself, and the copy a
/// consumer reads has each of them once.
#[tokio::test]
async fn aborted_records_are_never_counted_as_held() {
    on_broker(Broker::ApacheKafka, async {
        let _services = services().await;
        let dir = TempDir::new().unwrap();
        let db = generate(dir.path(), "aborted.db", 300);
        let topic = kafka_topic("aborted", PARTITIONS).await;
        let origin = "kafka/aborted";
        let cursor = dir.path().join("cursor");
        let out = follow_once(&db, &topic, origin, &cursor, &["--from-start"]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        append(&db, 20);
        // The next ten records as the follower would write them: from a file copy.
        let file = dir.path().join("all.jsonl");
        let out = Follow::new(&db, origin)
            .file_sink(&file)
            .cursor(&dir.path().join("file-cursor"))
            .start_at_seq_1()
            .once()
            .output();
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let text = std::fs::read_to_string(&file).unwrap();
        let next: Vec<&str> = text.lines().skip(300).take(10).collect();
        let producer: ThreadedProducer<DefaultProducerContext> = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", kafka_addr())
            .set("transactional.id", "chainship-tests-aborted-planter")
            .create()
            .unwrap();
        producer.init_transactions(Duration::from_secs(30)).unwrap();
        producer.begin_transaction().unwrap();
        let partition = chainship_sinks::kafka::partition_for(origin, PARTITIONS as usize);
        for line in &next {
            let r = chainship_chain::record::Record::parse(line.as_bytes()).unwrap();
            let seq = r.seq.to_string();
            let headers = OwnedHeaders::new()
                .insert(Header {
                    key: "seq",
                    value: Some(seq.as_str()),
                })
                .insert(Header {
                    key: "hash",
                    value: Some(&*r.hash),
                })
                .insert(Header {
                    key: "prev_hash",
                    value: Some(&*r.prev_hash),
                })
                .insert(Header {
                    key: "origin",
                    value: Some(origin),
                });
            producer
                .send(
                    BaseRecord::to(&topic)
                        .partition(partition)
                        .key(origin)
                        .payload(*line)
                        .headers(headers),
                )
                .map_err(|(e, _)| e)
                .unwrap();
        }
        producer.flush(Duration::from_secs(10)).unwrap();
        producer.abort_transaction(Duration::from_secs(30)).unwrap();
        let uncommitted = records(&topic, partition, "read_uncommitted").len();
        assert_eq!(uncommitted, 310, "the aborted records are in the log");
        let out = follow_once(&db, &topic, origin, &cursor, &[]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        assert!(
            !stderr(&out).contains("already holds events past the cursor"),
            "aborted records counted as held: {}",
            stderr(&out)
        );
        assert_eq!(std::fs::read_to_string(&cursor).unwrap().split(':').next(), Some("320"));
        exactly_once(&topic, origin, 320);
    })
    .await
}

/// Each batch is a transaction, and its commit marker takes an offset: the
/// records' offsets skip at every batch, and the high watermark is the last
/// marker's offset + 1. Every reader of the copy reads past the gaps and to
/// that end: `verify-export` and `restore` from the topic get every event.
#[tokio::test]
async fn transaction_markers_take_offsets_and_the_end_is_the_high_watermark() {
    on_broker(Broker::ApacheKafka, async {
        let _services = services().await;
        let dir = TempDir::new().unwrap();
        let db = generate(dir.path(), "markers.db", 300);
        let topic = kafka_topic("markers", PARTITIONS).await;
        let origin = "kafka/markers";
        let cursor = dir.path().join("cursor");
        let (key, vkey) = keygen(dir.path(), "kafka/markers-key", "k");
        let anchors = dir.path().join("anchors");
        std::fs::create_dir(&anchors).unwrap();
        let anchor = format!("file:{}", path_str(&anchors));
        let out = follow_once(
            &db,
            &topic,
            origin,
            &cursor,
            &[
                "--from-start",
                "--batch-size",
                "100",
                "--anchor",
                &anchor,
                "--signing-key",
                path_str(&key),
            ],
        );
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let partition = chainship_sinks::kafka::partition_for(origin, PARTITIONS as usize);
        let offsets: Vec<i64> = records(&topic, partition, "read_committed")
            .iter()
            .map(|r| r.0)
            .collect();
        assert_eq!(offsets.len(), 300);
        let gaps = offsets.windows(2).filter(|w| w[1] - w[0] > 1).count();
        assert!(gaps >= 2, "a marker between batches takes an offset: {gaps} gap(s)");
        assert_eq!(
            high_watermark(&topic, partition),
            offsets.last().unwrap() + 2,
            "the end is past the last commit marker"
        );
        let from = format!("kafka://{}/{topic}", kafka_addr());
        let out = bin()
            .args(["verify-export", "--from", &from, "--origin", origin])
            .args(["--anchor", &anchor, "--trusted-key", &vkey, "--json"])
            .output()
            .unwrap();
        assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
        let json: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
        assert_eq!(
            (json["records"].as_u64(), json["end_seq"].as_u64()),
            (Some(300), Some(300)),
            "{json}"
        );
        let restored = dir.path().join("restored.db");
        let out = bin()
            .args(["restore", "--from", &from, "--origin", origin])
            .args(["--anchor", &anchor, "--trusted-key", &vkey])
            .args(["--out", path_str(&restored)])
            .output()
            .unwrap();
        assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
        assert_eq!(db_head(&restored), db_head(&db));
    })
    .await
}

/// A topic Apache Kafka auto-creates: the first metadata answer says
/// UNKNOWN_TOPIC_OR_PARTITION while the broker makes it (tansu answers with
/// the topic at once). The first follower of a new topic asks again, and
/// delivers, instead of calling the topic missing.
#[tokio::test]
async fn an_auto_created_topic_is_waited_for_not_called_missing() {
    on_broker(Broker::ApacheKafka, async {
        let _services = services().await;
        let dir = TempDir::new().unwrap();
        let db = generate(dir.path(), "auto.db", 50);
        let topic = unique_bucket("auto-created");
        let out = follow_once(&db, &topic, "kafka/auto", &dir.path().join("cursor"), &["--from-start"]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let partitions = {
            let consumer: BaseConsumer = rdkafka::ClientConfig::new()
                .set("bootstrap.servers", kafka_addr())
                .create()
                .unwrap();
            let m = consumer.fetch_metadata(Some(&topic), Duration::from_secs(10)).unwrap();
            m.topics()[0].partitions().len() as i32
        };
        let partition = chainship_sinks::kafka::partition_for("kafka/auto", partitions as usize);
        assert_eq!(records(&topic, partition, "read_committed").len(), 50);
    })
    .await
}
