//! `chainship verify-export`: for each sink, an anchored export checked
//! whole, then damaged in each way (altered, removed, duplicated, swapped,
//! cut) and checked for the kind and seq; and agreement with `anchor
//! verify` on the last trusted head.

use std::io::Write;
use std::time::Duration;

use crate::common::*;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};

const ORIGIN: &str = "export/agentrt";
/// A database exported to `events.jsonl`, with signed heads kept.
fn setup(events: u64) -> Anchored {
    let s = Anchored::new(events, "export/chainship");
    s.follow(
        &format!("file:{}", path_str(&s.dir.path().join("events.jsonl"))),
        "cursor-file",
        &[],
    );
    s
}

/// What these tests do with an anchored export: ship it to a sink, and check a copy.
trait Export {
    fn follow(&self, sink: &str, cursor: &str, extra: &[&str]);
    fn verify_export(&self, from: &str, extra: &[&str]) -> (i32, serde_json::Value);
}

impl Export for Anchored {
    fn follow(&self, sink: &str, cursor: &str, extra: &[&str]) {
        let mut cmd = Follow::new(&self.db, ORIGIN)
            .sink(sink)
            .cursor(&self.dir.path().join(cursor))
            .start_at_seq_1()
            .once()
            .anchored(self)
            .args(["--batch-size", "100", "--s3-batch-events", "100"])
            .args(extra)
            .command();
        let out = s3_env(&mut cmd).output().unwrap();
        assert_eq!(code(&out), 0, "{}", stderr(&out));
    }

    fn verify_export(&self, from: &str, extra: &[&str]) -> (i32, serde_json::Value) {
        let mut cmd = bin();
        s3_env(&mut cmd)
            .args([
                "verify-export",
                "--json",
                "--from",
                from,
                "--origin",
                ORIGIN,
                "--trusted-key",
                &self.verifier,
            ])
            .args(["--anchor", &self.anchor_url()])
            .args(extra);
        let out = cmd.output().unwrap();
        let json =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&out), stderr(&out)));
        (code(&out), json)
    }
}

fn kinds(json: &serde_json::Value) -> Vec<(String, u64)> {
    json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["kind"].as_str().unwrap().to_owned(), f["seq"].as_u64().unwrap_or(0)))
        .collect()
}

/// The seqs of the heads kept for the origin.
fn kept_head_seqs(s: &Anchored) -> Vec<u64> {
    std::fs::read_dir(s.anchors.join(ORIGIN))
        .unwrap()
        .filter_map(|e| {
            e.unwrap()
                .file_name()
                .into_string()
                .ok()?
                .strip_suffix(".head")?
                .parse()
                .ok()
        })
        .collect()
}

/// The damages of the acceptance table, each with what it must report.
/// A damaged copy: its name, its lines, and the (kind, seq) findings it must give.
type Damage = (&'static str, Vec<String>, Vec<(String, u64)>);

fn damages(s: &Anchored, lines: &[String]) -> Vec<Damage> {
    let mut altered = lines.to_vec();
    altered[249] = altered[249].replacen("\"at\":\"", "\"at\":\"1", 1);
    assert_ne!(altered[249], lines[249]);
    let mut removed = lines.to_vec();
    removed.remove(399);
    let mut swapped = lines.to_vec();
    swapped.swap(599, 600);
    // Cut just past the kept head below the last (which head a fast export
    // keeps depends on timing): only the last one is then beyond the copy.
    let below_last = kept_head_seqs(s).into_iter().filter(|h| *h < 1000).max().unwrap_or(950);
    let cut = lines[..below_last.max(950) as usize].to_vec();
    vec![
        ("altered", altered, vec![("altered".into(), 250)]),
        ("removed", removed, vec![("gap".into(), 400)]),
        ("swapped", swapped, vec![("reordered".into(), 600)]),
        ("cut", cut, vec![("cut".into(), 1000)]),
    ]
}

fn duplicated(lines: &[String]) -> Vec<String> {
    let mut dup = lines.to_vec();
    dup.insert(500, lines[499].clone());
    dup
}

#[test]
fn file_copies_whole_and_damaged() {
    let s = setup(1000);
    let from = format!("file:{}", path_str(&s.dir.path().join("events.jsonl")));
    let (c, json) = s.verify_export(&from, &[]);
    assert_eq!(c, 0, "{json}");
    assert_eq!(json["last_trusted_head"]["seq"], 1000);
    let write = |name: &str, lines: &[String]| {
        let path = s.dir.path().join(name);
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        format!("file:{}", path_str(&path))
    };
    for (name, lines, expected) in damages(&s, &s.lines()) {
        let (c, json) = s.verify_export(&write(name, &lines), &[]);
        assert_eq!(c, 1, "{name}: {json}");
        assert_eq!(kinds(&json), expected, "{name}: {json}");
    }
    let (c, json) = s.verify_export(&write("dup", &duplicated(&s.lines())), &[]);
    assert_eq!(c, 0, "an identical duplicate is a warning: {json}");
    assert_eq!(json["identical_duplicates"], 1);
    // Another origin's record in the file.
    let mut foreign = s.lines();
    foreign[700] = foreign[700].replace(ORIGIN, "other/agentrt");
    let (c, json) = s.verify_export(&write("foreign", &foreign), &[]);
    assert_eq!(c, 1);
    assert!(kinds(&json).contains(&("foreign".into(), 701)), "{json}");
}

#[test]
fn copy_and_database_agree_on_the_last_trusted_head() {
    let s = setup(1000);
    let altered_db = s.dir.path().join("altered.db");
    std::fs::copy(&s.db, &altered_db).unwrap();
    tamper(&altered_db)
        .execute(
            "UPDATE events SET payload_json = payload_json || ' ' WHERE seq = 250",
            [],
        )
        .unwrap();
    let out = bin()
        .args([
            "anchor",
            "verify",
            "--json",
            "--db",
            path_str(&altered_db),
            "--origin",
            ORIGIN,
            "--trusted-key",
            &s.verifier,
        ])
        .args(["--anchor", &format!("file:{}", path_str(&s.anchors))])
        .output()
        .unwrap();
    let db_json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let (_, altered, _) = damages(&s, &s.lines()).remove(0);
    let path = s.dir.path().join("altered.jsonl");
    std::fs::write(&path, altered.join("\n") + "\n").unwrap();
    let (_, copy_json) = s.verify_export(&format!("file:{}", path_str(&path)), &[]);
    assert_eq!(db_json["last_trusted_head"], copy_json["last_trusted_head"]);
    assert!(db_json["last_trusted_head"]["seq"].as_u64().unwrap() < 250);
}

/// Lays records out as gzip objects of 100 lines, named by their seq range.
async fn upload_objects(bucket: &str, prefix: &str, lines: &[String]) {
    let s3 = s3_client();
    for chunk in lines.chunks(100) {
        let seqs: Vec<u64> = chunk
            .iter()
            .map(|l| chainship_chain::record::Record::parse(l.as_bytes()).unwrap().seq)
            .collect();
        let (first, last) = (*seqs.iter().min().unwrap(), *seqs.iter().max().unwrap());
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all((chunk.join("\n") + "\n").as_bytes()).unwrap();
        let key = format!("{prefix}/export%2Fagentrt/{first:020}-{last:020}.jsonl.gz");
        s3.put_object()
            .bucket(bucket)
            .key(key)
            .body(gz.finish().unwrap().into())
            .send()
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn s3_copies_whole_and_damaged() {
    let _services = services().await;
    let s = setup(1000);
    let bucket = bucket("export").await;
    let endpoint = s3_endpoint();
    let s3_flags = [
        "--s3-endpoint",
        endpoint.as_str(),
        "--s3-path-style",
        "--s3-region",
        "us-east-1",
    ];
    s.follow(&format!("s3://{bucket}/real"), "cursor-s3", &s3_flags);
    let (c, json) = s.verify_export(&format!("s3://{bucket}/real"), &s3_flags);
    assert_eq!(c, 0, "the follower's own objects: {json}");
    assert_eq!(json["records"], 1000);
    let zstd_flags = [&s3_flags[..], &["--s3-compression", "zstd"]].concat();
    s.follow(&format!("s3://{bucket}/zstd"), "cursor-zstd", &zstd_flags);
    let (c, json) = s.verify_export(&format!("s3://{bucket}/zstd"), &s3_flags);
    assert_eq!(
        (c, &json["records"]),
        (0, &serde_json::json!(1000)),
        "zstd objects: {json}"
    );
    for (name, lines, expected) in damages(&s, &s.lines()) {
        upload_objects(&bucket, name, &lines).await;
        let (c, json) = s.verify_export(&format!("s3://{bucket}/{name}"), &s3_flags);
        assert_eq!(c, 1, "{name}: {json}");
        assert_eq!(kinds(&json), expected, "{name}: {json}");
    }
    upload_objects(&bucket, "dup", &duplicated(&s.lines())).await;
    let (c, json) = s.verify_export(&format!("s3://{bucket}/dup"), &s3_flags);
    assert_eq!((c, json["identical_duplicates"].as_u64()), (0, Some(1)), "{json}");
}

#[tokio::test]
async fn kafka_copies_whole_and_damaged() {
    let _services = services().await;
    let s = setup(1000);
    let topic = kafka_topic("export", 1).await;
    let url = |t: &str| format!("kafka://{}/{t}", kafka_addr());
    s.follow(&url(&topic), "cursor-kafka", &[]);
    let (c, json) = s.verify_export(&url(&topic), &[]);
    assert_eq!(c, 0, "the follower's own messages: {json}");
    assert_eq!(json["records"], 1000);

    let producer: FutureProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", kafka_addr())
        .create()
        .unwrap();
    let mut cases = damages(&s, &s.lines());
    cases.push(("dup", duplicated(&s.lines()), vec![]));
    for (name, lines, expected) in cases {
        let t = kafka_topic(name, 1).await;
        for line in &lines {
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
                });
            producer
                .send(
                    FutureRecord::to(&t)
                        .partition(0)
                        .key(ORIGIN)
                        .payload(line.as_str())
                        .headers(headers),
                    std::time::Duration::from_secs(10),
                )
                .await
                .unwrap();
        }
        let (c, json) = s.verify_export(&url(&t), &[]);
        assert_eq!(kinds(&json), expected, "{name}: {json}");
        assert_eq!(c, if expected.is_empty() { 0 } else { 1 }, "{name}: {json}");
    }
}

#[test]
fn an_unreadable_source_is_exit_2() {
    let s = setup(10);
    let out = bin()
        .args([
            "verify-export",
            "--from",
            "file:/nonexistent/x.jsonl",
            "--origin",
            ORIGIN,
            "--trusted-key",
            &s.verifier,
        ])
        .args(["--anchor", &format!("file:{}", path_str(&s.anchors))])
        .output()
        .unwrap();
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("/nonexistent/x.jsonl"), "{}", stderr(&out));
}

#[tokio::test]
async fn verifying_a_topic_that_is_not_there_never_creates_it() {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let _services = services().await;
    let s = setup(10);
    s.follow(
        &format!("file:{}", path_str(&s.dir.path().join("seed.jsonl"))),
        "cursor-seed",
        &[],
    );
    let topic = format!("typo-{}", unique_bucket("t"));
    let out = bin()
        .args(["verify-export", "--from", &format!("kafka://{}/{topic}", kafka_addr())])
        .args(["--origin", ORIGIN, "--trusted-key", &s.verifier])
        .args(["--anchor", &s.anchor_url()])
        .output()
        .unwrap();
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("topic {topic} does not exist")),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("create the topic"), "{}", stderr(&out));
    let client: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", kafka_addr())
        .set("allow.auto.create.topics", "false")
        .create()
        .unwrap();
    let metadata = client.fetch_metadata(None, Duration::from_secs(10)).unwrap();
    assert!(
        metadata.topics().iter().all(|t| t.name() != topic),
        "verify-export created the topic it was asked to check"
    );
}

#[test]
fn an_empty_copy_never_passes_even_with_no_heads_allowed() {
    let s = setup(10);
    let empty = s.dir.path().join("empty.jsonl");
    std::fs::write(&empty, b"").unwrap();
    let out = bin()
        .args(["verify-export", "--from", &format!("file:{}", path_str(&empty))])
        .args([
            "--origin",
            "typo/agentrt",
            "--trusted-key",
            &s.verifier,
            "--allow-no-heads",
        ])
        .args(["--anchor", &s.anchor_url()])
        .output()
        .unwrap();
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    assert!(
        stdout(&out).contains("holds no record of origin \"typo/agentrt\""),
        "{}",
        stdout(&out)
    );
}

/// A SIEM reads every partition of a topic: records of the origin on
/// another partition are found and named, whatever they hold.
#[tokio::test]
async fn every_partition_of_a_topic_is_read() {
    let _services = services().await;
    let s = setup(400);
    let topic = kafka_topic("partitions", 3).await;
    let url = format!("kafka://{}/{topic}", kafka_addr());
    s.follow(&url, "cursor-kafka", &[]);
    let own = (0..3)
        .find(|p| !kafka_read_partition(&topic, *p, ORIGIN).is_empty())
        .expect("the follower's partition");
    let others: Vec<i32> = (0..3).filter(|p| *p != own).collect();
    let (c, json) = s.verify_export(&url, &[]);
    assert_eq!(c, 0, "{json}");

    // Someone who can write to the topic: a copy of seq 5 with its type
    // changed on one partition, three well-chained records past the head on another.
    let lines = s.lines();
    let altered = lines[4].replacen("\"type\":\"", "\"type\":\"x", 1);
    assert_ne!(altered, lines[4]);
    append(&s.db, 3);
    let extra = s.dir.path().join("extra.jsonl");
    let out = Follow::new(&s.db, ORIGIN)
        .file_sink(&extra)
        .cursor(&s.dir.path().join("cursor-extra"))
        .start_at_seq_1()
        .once()
        .output();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let tail: Vec<String> = std::fs::read_to_string(&extra)
        .unwrap()
        .lines()
        .skip(400)
        .map(str::to_owned)
        .collect();
    assert_eq!(tail.len(), 3);
    let producer: FutureProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", kafka_addr())
        .create()
        .unwrap();
    for (partition, line) in std::iter::once((others[0], &altered)).chain(tail.iter().map(|l| (others[1], l))) {
        producer
            .send(
                FutureRecord::to(&topic)
                    .partition(partition)
                    .key(ORIGIN)
                    .payload(line.as_str()),
                Duration::from_secs(10),
            )
            .await
            .unwrap();
    }

    let (c, json) = s.verify_export(&url, &[]);
    assert_eq!(c, 1, "{json}");
    let found = kinds(&json);
    let strays: Vec<&(String, u64)> = found.iter().filter(|(k, _)| k == "foreign-partition").collect();
    assert_eq!(strays.len(), 2, "one finding for each partition holding strays: {json}");
    for p in &others {
        assert!(
            json["findings"]
                .to_string()
                .contains(&format!("partition {p} (from offset")),
            "partition {p} named: {json}"
        );
    }
    assert!(
        found
            .iter()
            .any(|(k, seq)| (k == "altered" || k == "duplicate") && *seq == 5),
        "the altered copy of seq 5: {json}"
    );
    assert_eq!(json["status"], "failed");

    // Narrowed to the origin's partition: said, and only that one is judged.
    let (c, json) = s.verify_export(&url, &["--kafka-partition", &own.to_string()]);
    assert_eq!(c, 0, "{json}");
    assert!(
        json["warnings"]
            .to_string()
            .contains(&format!("read only the pinned partition {own}")),
        "{json}"
    );
}
