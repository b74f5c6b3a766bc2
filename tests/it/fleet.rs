//! A fleet's shared copy verified in one pass (`verify-export
//! --all-origins`, issue 49): every origin of one topic (both brokers), one
//! S3 prefix or one directory of files, each against its own heads with the
//! key named after it; a forged record fails its origin alone, a record on
//! a partition that is not its origin's home is `foreign-partition`, an
//! origin the store keeps heads for and the copy lacks is `missing-copy`,
//! and `--shard I/N` workers judge disjoint sets of origins whose union is
//! the fleet.

use std::collections::BTreeSet;
use std::path::PathBuf;

use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use serde_json::Value;
use tempfile::TempDir;

use crate::common::*;

on_both_brokers!(a_fleet_in_one_topic_is_verified_in_one_pass_and_sharded_by_partition);

const PARTITIONS: i32 = 4;
const EVENTS: u64 = 40;

/// A fleet: a database, a key named after its origin and a cursor for
/// each origin, one anchor store, and every verifier key in one file.
struct Fleet {
    dir: TempDir,
    anchors: PathBuf,
    keys: PathBuf,
    origins: Vec<String>,
    /// An S3 anchor store instead of the directory `anchors`, with its flags.
    s3_store: Option<Vec<String>>,
}

impl Fleet {
    fn new(origins: &[String]) -> Fleet {
        let dir = TempDir::new().unwrap();
        let anchors = dir.path().join("anchors");
        std::fs::create_dir(&anchors).unwrap();
        let mut verifiers = String::new();
        for (i, origin) in origins.iter().enumerate() {
            // Another chain for each origin (a fleet's runtimes are not copies of one another).
            generate_with(
                dir.path(),
                &format!("o{i}.db"),
                EVENTS,
                &["--seed", &(i + 1).to_string()],
            );
            let (_, vkey) = keygen(dir.path(), origin, &format!("o{i}.key"));
            verifiers += &format!("{vkey}\n");
        }
        let keys = dir.path().join("fleet-keys.txt");
        std::fs::write(&keys, verifiers).unwrap();
        Fleet {
            dir,
            anchors,
            keys,
            origins: origins.to_vec(),
            s3_store: None,
        }
    }

    fn db(&self, i: usize) -> PathBuf {
        self.dir.path().join(format!("o{i}.db"))
    }

    /// Ships origin `i` into `sink` once, anchored into the fleet's store.
    fn ship(&self, i: usize, sink: &str, extra: &[&str]) {
        let key = self.dir.path().join(format!("o{i}.key"));
        let cursor = self.dir.path().join(format!("o{i}-{}.cursor", sink.len()));
        let out = Follow::new(&self.db(i), &self.origins[i])
            .sink(sink)
            .cursor(&cursor)
            .start_at_seq_1()
            .once()
            .args([
                "--anchor",
                &self.anchor(),
                "--signing-key",
                path_str(&key),
                "--anchor-interval",
                "0s",
            ])
            .args(extra)
            .output();
        assert_eq!(code(&out), 0, "{}: {}", self.origins[i], stderr(&out));
    }

    /// Origin `i`'s records as a file copy holds them, one line each.
    fn lines(&self, i: usize) -> Vec<String> {
        let file = self.dir.path().join(format!("o{i}.jsonl"));
        if !file.exists() {
            let out = Follow::new(&self.db(i), &self.origins[i])
                .file_sink(&file)
                .cursor(&self.dir.path().join(format!("o{i}-lines.cursor")))
                .start_at_seq_1()
                .once()
                .output();
            assert_eq!(code(&out), 0, "{}", stderr(&out));
        }
        std::fs::read_to_string(file)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn anchor(&self) -> String {
        match &self.s3_store {
            Some(flags) => flags[1].clone(),
            None => format!("file:{}", path_str(&self.anchors)),
        }
    }

    /// `--anchor` and, for an S3 store, its settings.
    fn anchor_flags(&self) -> Vec<String> {
        self.s3_store
            .clone()
            .unwrap_or_else(|| vec!["--anchor".into(), self.anchor()])
    }

    /// `verify-export --all-origins` of `from` with `extra` flags: exit code and JSON.
    fn verify(&self, from: &str, extra: &[&str], env: &[(&str, &str)]) -> (i32, Value) {
        let mut cmd = bin();
        cmd.args(["verify-export", "--from", from, "--all-origins"])
            .args(self.anchor_flags())
            .args(["--trusted-key", path_str(&self.keys), "--json"])
            .args(extra);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        if code(&out) == 2 {
            return (2, Value::String(stderr(&out)));
        }
        let json: Value = serde_json::from_str(stdout(&out).trim())
            .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&out), stderr(&out)));
        (code(&out), json)
    }
}

fn origin_names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("fleet/o{i:02}")).collect()
}

/// The origins of a fleet answer with their first finding's kind ("ok" when none).
fn by_origin(json: &Value) -> Vec<(String, String)> {
    json["origins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            let kind = o["findings"][0]["kind"].as_str().unwrap_or("ok");
            (o["origin"].as_str().unwrap().to_owned(), kind.to_owned())
        })
        .collect()
}

/// One origin's part of a fleet answer.
fn origin<'j>(json: &'j Value, name: &str) -> &'j Value {
    json["origins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["origin"] == name)
        .unwrap_or_else(|| panic!("{name} is not in {json}"))
}

/// The origins a worker judged in full (records read, or missing from the copy).
fn judged(json: &Value) -> BTreeSet<String> {
    json["origins"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["records"].as_u64() > Some(0) || o["findings"][0]["kind"] == "missing-copy")
        .map(|o| o["origin"].as_str().unwrap().to_owned())
        .collect()
}

fn produce(topic: &str, partition: i32, key: &str, value: &str) {
    let producer: ThreadedProducer<DefaultProducerContext> = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", kafka_addr())
        .create()
        .unwrap();
    producer
        .send(BaseRecord::to(topic).partition(partition).key(key).payload(value))
        .map_err(|(e, _)| e)
        .unwrap();
    producer.flush(std::time::Duration::from_secs(30)).unwrap();
}

/// `line` with its payload changed (its hash kept): a forged record.
fn forged(line: &str) -> String {
    let mut record: Value = serde_json::from_str(line).unwrap();
    record["payload_json"] = Value::String(r#"{"forged":true}"#.into());
    record.to_string()
}

async fn a_fleet_in_one_topic_is_verified_in_one_pass_and_sharded_by_partition() {
    let _services = services().await;
    let topic = kafka_topic("fleet-pass", PARTITIONS).await;
    let from = format!("kafka://{}/{topic}", kafka_addr());
    let mut names = origin_names(12);
    names.push("fleet/gone".into());
    let fleet = Fleet::new(&names);
    for i in 0..12 {
        fleet.ship(i, &from, &[]);
    }
    // The SIEM's pipeline lost one runtime: anchored, never in the topic.
    let elsewhere = format!("file:{}", path_str(&fleet.dir.path().join("elsewhere.jsonl")));
    fleet.ship(12, &elsewhere, &[]);

    // Everything as shipped, but the lost runtime: one pass names it alone.
    let (exit, json) = fleet.verify(&from, &[], &[]);
    assert_eq!(exit, 1, "{json}");
    let mut expected: Vec<(String, String)> = names
        .iter()
        .map(|o| {
            (
                o.clone(),
                if o == "fleet/gone" { "missing-copy" } else { "ok" }.to_owned(),
            )
        })
        .collect();
    expected.sort();
    assert_eq!(by_origin(&json), expected, "{json}");
    assert_eq!(
        json["summary"]["records"].as_u64(),
        Some(12 * EVENTS),
        "one read of the topic"
    );
    let gone = origin(&json, "fleet/gone");
    assert_eq!(gone["invalid_ranges"][0]["kind"], "missing", "{gone}");
    assert_eq!(gone["invalid_ranges"][0]["to"].as_u64(), Some(EVENTS), "{gone}");
    // Without the lost one in scope, the fleet passes.
    let (exit, json) = fleet.verify(&from, &["--origin-prefix", "fleet/o"], &[]);
    assert_eq!(exit, 0, "{json}");
    assert_eq!(json["summary"]["ok"].as_u64(), Some(12), "{json}");

    // A forged record of one origin on its home partition, and another
    // origin's record on a partition that is not its home.
    let home = |o: &str| chainship_sinks::kafka::partition_for(o, PARTITIONS as usize);
    let line = fleet.lines(3)[9].clone();
    produce(&topic, home(&names[3]), &names[3], &forged(&line));
    let stray_partition = (home(&names[5]) + 1) % PARTITIONS;
    produce(&topic, stray_partition, &names[5], &fleet.lines(5)[2]);
    let (exit, json) = fleet.verify(&from, &["--origin-prefix", "fleet/o"], &[]);
    assert_eq!(exit, 1, "{json}");
    for (origin, kind) in by_origin(&json) {
        match origin.as_str() {
            "fleet/o03" => assert!(kind == "altered" || kind == "duplicate", "{origin}: {kind}"),
            "fleet/o05" => assert_eq!(kind, "foreign-partition", "{json}"),
            _ => assert_eq!(
                kind, "ok",
                "{origin} is not touched by another origin's forgery: {json}"
            ),
        }
    }
    let o03 = origin(&json, "fleet/o03");
    assert!(
        o03["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["seq"].as_u64() == Some(10)),
        "the forgery is named at its seq: {o03}"
    );

    // A pinned partition is one part of what a consumer reads: refused.
    let (exit, json) = fleet.verify(&from, &[], &[("CHAINSHIP_KAFKA_PARTITION", "0")]);
    assert_eq!(exit, 2, "{json}");

    // Two workers: each reads its partitions; together they judge every
    // origin once, and the stray is named by the worker reading its partition.
    let (_, one) = fleet.verify(&from, &["--shard", "1/2"], &[]);
    let (_, two) = fleet.verify(&from, &["--shard", "2/2"], &[]);
    let (a, b) = (judged(&one), judged(&two));
    assert!(a.is_disjoint(&b), "{a:?} {b:?}");
    let all: BTreeSet<String> = a.union(&b).cloned().collect();
    assert_eq!(all, names.iter().cloned().collect(), "the shards cover the fleet");
    for (json, shard) in [(&one, 0), (&two, 1)] {
        let partitions: Vec<i64> = json["summary"]["partitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_i64().unwrap())
            .collect();
        assert!(partitions.iter().all(|p| p % 2 == shard), "{partitions:?}");
        let named_stray = by_origin(json)
            .iter()
            .any(|(o, k)| o == "fleet/o05" && k == "foreign-partition");
        assert_eq!(named_stray, stray_partition % 2 == shard as i32, "{json}");
    }
}

#[test]
fn a_directory_of_files_is_one_fleet_sharded_by_origin() {
    let names = origin_names(5);
    let fleet = Fleet::new(&names);
    let copies = fleet.dir.path().join("copies");
    std::fs::create_dir(&copies).unwrap();
    for i in 0..5 {
        fleet.ship(
            i,
            &format!("file:{}", path_str(&copies.join(format!("o{i}.jsonl")))),
            &[],
        );
    }
    let from = format!("file:{}", path_str(&copies));
    let (exit, json) = fleet.verify(&from, &[], &[]);
    assert_eq!(exit, 0, "{json}");
    assert_eq!(json["summary"]["origins"].as_u64(), Some(5));
    // The flags that narrow a check are never taken from the environment.
    let (_, narrowed) = fleet.verify(&from, &[], &[("CHAINSHIP_ORIGIN_PREFIX", "fleet/o01")]);
    assert_eq!(narrowed["summary"]["origins"].as_u64(), Some(5), "{narrowed}");
    let (_, narrowed) = fleet.verify(&from, &["--origin-prefix", "fleet/o01"], &[]);
    assert_eq!(
        narrowed["summary"]["origins"].as_u64(),
        Some(1),
        "the flag itself narrows: {narrowed}"
    );
    let shards: Vec<BTreeSet<String>> = (1..=3)
        .map(|i| judged(&fleet.verify(&from, &["--shard", &format!("{i}/3")], &[]).1))
        .collect();
    let mut seen = BTreeSet::new();
    for s in &shards {
        assert!(s.is_disjoint(&seen), "{shards:?}");
        seen.extend(s.iter().cloned());
    }
    assert_eq!(seen, names.iter().cloned().collect());
    indexed_job_as_shipped(&fleet, &from, &names);

    // The store at a glance: every origin's newest head, in one listing.
    let status = |extra: &[&str]| {
        let out = bin()
            .args(["anchor", "status", "--anchor", &fleet.anchor(), "--all-origins"])
            .args(["--trusted-key", path_str(&fleet.keys), "--json"])
            .args(extra)
            .output()
            .unwrap();
        let json: Value = serde_json::from_str(stdout(&out).trim()).unwrap_or_else(|e| panic!("{e}: {}", stderr(&out)));
        (code(&out), json)
    };
    let (exit, json) = status(&["--max-age", "1h"]);
    assert_eq!(exit, 0, "{json}");
    let heads: Vec<u64> = json["origins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["newest_head"]["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(heads, vec![EVENTS; 5], "{json}");
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let prom = fleet.dir.path().join("status.prom");
    let (exit, json) = status(&[
        "--max-age",
        "1s",
        "--origin-prefix",
        "fleet/o0",
        "--metrics-textfile",
        path_str(&prom),
    ]);
    assert_eq!(exit, 1, "{json}");
    assert!(
        json["origins"]
            .as_array()
            .unwrap()
            .iter()
            .all(|o| o["findings"][0]["kind"] == "stale"),
        "{json}"
    );
    let text = std::fs::read_to_string(&prom).unwrap();
    assert!(
        text.contains("chainship_fleet_origins{check=\"anchor_status\",result=\"failed\"} 5"),
        "{text}"
    );
    assert!(
        text.contains("chainship_fleet_origin_failed{check=\"anchor_status\",origin=\"fleet/o03\",kind=\"stale\"} 1"),
        "{text}"
    );

    // Forged records where a collector globbing the directory may read
    // them: a hidden file, a subdirectory, a link to a file elsewhere.
    let lines = fleet.lines(3);
    let forgery = forged(&lines[5]) + "\n";
    for (i, place) in [".hidden.jsonl", "sub/deeper.jsonl", "linked.jsonl"].iter().enumerate() {
        let path = copies.join(place);
        if *place == "linked.jsonl" {
            let target = fleet.dir.path().join("elsewhere.jsonl");
            std::fs::write(&target, &forgery).unwrap();
            std::os::unix::fs::symlink(&target, &path).unwrap();
        } else {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &forgery).unwrap();
        }
        let (exit, json) = fleet.verify(&from, &[], &[]);
        assert_eq!(exit, 1, "{place}: {json}");
        assert_ne!(origin(&json, "fleet/o03")["status"], "ok", "{place} ({i}): {json}");
        std::fs::remove_file(&path).unwrap();
    }
    // A link to what is not a file is named, never passed over.
    std::os::unix::fs::symlink("/dev/null", copies.join("null.jsonl")).unwrap();
    let (exit, json) = fleet.verify(&from, &[], &[]);
    assert_eq!(exit, 1, "{json}");
    assert!(
        json["findings"][0]["message"]
            .as_str()
            .unwrap()
            .contains("not a regular file"),
        "{json}"
    );
    std::fs::remove_file(copies.join("null.jsonl")).unwrap();

    // An origin whose heads were deleted (its checkpoints kept) and whose
    // copy is gone is still missing from the copy.
    for entry in std::fs::read_dir(fleet.anchors.join("fleet/o04")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "head") {
            std::fs::remove_file(path).unwrap();
        }
    }
    std::fs::rename(copies.join("o4.jsonl"), fleet.dir.path().join("o4.jsonl.away")).unwrap();
    let (exit, json) = fleet.verify(&from, &[], &[]);
    assert_eq!(exit, 1, "{json}");
    assert_eq!(
        origin(&json, "fleet/o04")["findings"][0]["kind"],
        "missing-copy",
        "{json}"
    );
    let (exit, json) = status(&[]);
    assert_eq!(exit, 1, "{json}");
    assert_eq!(
        origin(&json, "fleet/o04")["findings"][0]["kind"],
        "head-missing",
        "{json}"
    );
    std::fs::rename(fleet.dir.path().join("o4.jsonl.away"), copies.join("o4.jsonl")).unwrap();

    // One origin's file removed, another's edited, a line of nobody's added.
    std::fs::remove_file(copies.join("o1.jsonl")).unwrap();
    let edited = copies.join("o2.jsonl");
    let mut lines: Vec<String> = std::fs::read_to_string(&edited)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    lines[19] = forged(&lines[19]);
    lines.push("not a record".into());
    std::fs::write(&edited, lines.join("\n") + "\n").unwrap();
    let (exit, json) = fleet.verify(&from, &[], &[]);
    assert_eq!(exit, 1, "{json}");
    let kinds = by_origin(&json);
    assert_eq!(kinds[1], ("fleet/o01".into(), "missing-copy".into()), "{json}");
    assert_eq!(kinds[2], ("fleet/o02".into(), "altered".into()), "{json}");
    for i in [0, 3] {
        assert_eq!(kinds[i].1, "ok", "{json}");
    }
    assert_eq!(
        json["findings"][0]["kind"], "foreign",
        "a line of no origin fails the fleet: {json}"
    );
    assert_eq!(
        json["origins"][2]["invalid_ranges"][0]["from"].as_u64(),
        Some(20),
        "{json}"
    );
}

#[test]
fn another_origins_key_is_refused_by_the_follower_and_never_trusted_by_the_fleet_check() {
    let names = origin_names(2);
    let fleet = Fleet::new(&names);
    let copies = fleet.dir.path().join("copies");
    std::fs::create_dir(&copies).unwrap();
    let follow = |i: usize, key: &str| {
        let sink = format!("file:{}", path_str(&copies.join(format!("o{i}.jsonl"))));
        Follow::new(&fleet.db(i), &names[i])
            .sink(&sink)
            .cursor(&fleet.dir.path().join(format!("o{i}.cursor")))
            .start_at_seq_1()
            .once()
            .args([
                "--anchor",
                &fleet.anchor(),
                "--signing-key",
                path_str(&fleet.dir.path().join(key)),
            ])
            .output()
    };
    // o01 handed o00's key before o00 ever anchored: nothing to tell it by yet.
    let out = follow(1, "o0.key");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = follow(0, "o0.key");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    // The fleet check trusts o01's heads only to the key named after it.
    let (exit, json) = fleet.verify(&format!("file:{}", path_str(&copies)), &[], &[]);
    assert_eq!(exit, 1, "{json}");
    let kinds = by_origin(&json);
    assert_eq!(kinds[0].1, "ok", "{json}");
    assert_ne!(kinds[1].1, "ok", "o01's heads are signed by o00's key: {json}");
    // Now that o00 keeps heads in the store, its key is refused for o01.
    append(&fleet.db(1), 5);
    let out = follow(1, "o0.key");
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains(r#"the signing key is named "fleet/o00", another origin"#),
        "{}",
        stderr(&out)
    );
}

#[tokio::test]
async fn an_s3_prefix_is_one_fleet_each_origin_read_from_its_folder() {
    let _services = services().await;
    let bucket = bucket("fleet").await;
    let names = origin_names(3);
    let mut fleet = Fleet::new(&names);
    // The anchor store in S3 too: origins encoded as one key segment each.
    fleet.s3_store = Some(vec![
        "--anchor".into(),
        format!("s3://{bucket}/heads"),
        "--anchor-s3-endpoint".into(),
        s3_endpoint(),
        "--anchor-s3-path-style".into(),
        "--anchor-s3-region".into(),
        "us-east-1".into(),
    ]);
    let sink = format!("s3://{bucket}/exports");
    for i in 0..3 {
        fleet.ship_s3(i, &bucket);
    }
    let (exit, json) = fleet.verify_s3(&sink, &[]);
    assert_eq!(exit, 0, "{json}");
    assert_eq!(by_origin(&json).len(), 3, "{json}");
    assert_eq!(
        json["summary"]["records"].as_u64(),
        Some(3 * EVENTS),
        "every folder's records: {json}"
    );
    // The S3 store at a glance: one listing names every origin.
    let mut cmd = bin();
    s3_env(&mut cmd)
        .args([
            "anchor",
            "status",
            "--all-origins",
            "--json",
            "--trusted-key",
            path_str(&fleet.keys),
        ])
        .args(fleet.anchor_flags());
    let out = cmd.output().unwrap();
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let status: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    let listed: Vec<&str> = status["origins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["origin"].as_str().unwrap())
        .collect();
    assert_eq!(listed, names.iter().map(String::as_str).collect::<Vec<_>>(), "{status}");
    // The folder of one origin removed: missing from the copy.
    let s3 = s3_client();
    let prefix = format!("exports/{}/", chainship_chain::origin_segment(&names[1]));
    let listed = s3
        .list_objects_v2()
        .bucket(&bucket)
        .prefix(&prefix)
        .send()
        .await
        .unwrap();
    for o in listed.contents() {
        s3.delete_object()
            .bucket(&bucket)
            .key(o.key().unwrap())
            .send()
            .await
            .unwrap();
    }
    let (exit, json) = fleet.verify_s3(&sink, &[]);
    assert_eq!(exit, 1, "{json}");
    assert_eq!(
        by_origin(&json)[1],
        (names[1].clone(), "missing-copy".to_owned()),
        "{json}"
    );
    assert_eq!(by_origin(&json)[0].1, "ok");
}

impl Fleet {
    fn ship_s3(&self, i: usize, bucket: &str) {
        let key = self.dir.path().join(format!("o{i}.key"));
        let cursor = self.dir.path().join(format!("o{i}-s3.cursor"));
        let mut args: Vec<String> = ["--from-start", "--once", "--signing-key", path_str(&key)]
            .iter()
            .map(|a| a.to_string())
            .collect();
        args.extend(self.anchor_flags());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = s3_follow(&self.db(i), bucket, &self.origins[i], &cursor, &args)
            .output()
            .unwrap();
        assert_eq!(code(&out), 0, "{}", stderr(&out));
    }

    fn verify_s3(&self, from: &str, extra: &[&str]) -> (i32, Value) {
        let mut cmd = bin();
        s3_env(&mut cmd);
        cmd.args(["verify-export", "--from", from, "--all-origins"])
            .args(self.anchor_flags())
            .args(["--trusted-key", path_str(&self.keys), "--json"])
            .args(["--s3-endpoint", &s3_endpoint(), "--s3-path-style"])
            .args(extra);
        let out = cmd.output().unwrap();
        let json: Value = serde_json::from_str(stdout(&out).trim())
            .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&out), stderr(&out)));
        (code(&out), json)
    }
}

/// The fleet manifest's nightly Indexed Job, its command run as written by
/// `/bin/sh` for every completion index (only the places swapped for the
/// test's): together the workers judge every origin once.
fn indexed_job_as_shipped(fleet: &Fleet, from: &str, names: &[String]) {
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes/fleet.yaml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let validate = std::env::var("CHAINSHIP_TEST_KUBERNETES_VALIDATE")
        .ok()
        .filter(|p| !p.is_empty())
        .expect("CHAINSHIP_TEST_KUBERNETES_VALIDATE is not set: run this test through ./scripts/test");
    let out = std::process::Command::new(validate)
        .arg("--strict")
        .arg(&manifest)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let docs = yaml_rust2::YamlLoader::load_from_str(&text).unwrap();
    let cron = docs.iter().find(|d| d["kind"].as_str() == Some("CronJob")).unwrap();
    let job = &cron["spec"]["jobTemplate"]["spec"];
    assert_eq!(job["completionMode"].as_str(), Some("Indexed"));
    let completions = job["completions"].as_i64().unwrap();
    let container = &job["template"]["spec"]["containers"][0];
    let script = container["args"][0].as_str().unwrap();
    assert!(
        script.contains(&format!("/{completions}\"")),
        "--shard's N is the Job's completions: {script}"
    );
    let spill = TempDir::new().unwrap();
    let script = script
        .replace("exec chainship", &format!("exec {}", env!("CARGO_BIN_EXE_chainship")))
        .replace("kafka://kafka:9092/audit", from)
        .replace("s3://audit-anchors/heads --anchor-s3-region eu-west-1", &fleet.anchor())
        .replace("/etc/chainship/trusted-keys", path_str(&fleet.keys))
        .replace("/spill", path_str(spill.path()))
        .replace("--log-format json", "");
    let mut seen = BTreeSet::new();
    for index in 0..completions {
        let out = std::process::Command::new("/bin/sh")
            .args(["-c", &script])
            .env("JOB_COMPLETION_INDEX", index.to_string())
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "index {index}: {}{}",
            stdout(&out),
            stderr(&out)
        );
        let json: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
        assert_eq!(json["summary"]["shard"], format!("{}/{completions}", index + 1));
        let mine = judged(&json);
        assert!(mine.is_disjoint(&seen), "index {index}: {mine:?} {seen:?}");
        seen.extend(mine);
    }
    assert_eq!(seen, names.iter().cloned().collect::<BTreeSet<_>>());
    // The StatefulSet's sidecar takes its origin from the pod's name.
    let set = docs.iter().find(|d| d["kind"].as_str() == Some("StatefulSet")).unwrap();
    let sidecar = &set["spec"]["template"]["spec"]["containers"][1];
    let env = sidecar["env"].as_vec().unwrap();
    let origin = env
        .iter()
        .find(|e| e["name"].as_str() == Some("CHAINSHIP_ORIGIN"))
        .unwrap();
    assert_eq!(origin["value"].as_str(), Some("prod-eu1/$(POD_NAME)"));
}
