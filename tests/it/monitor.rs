//! `chainship monitor` (issue 50): with a live follower shipping to Kafka
//! (both brokers), the monitor's verified seq keeps up; a forged record
//! planted in the topic is a finding (a JSON line naming its seq, and a
//! metric) within a minute, trust in the copy ends below it, and the
//! monitor keeps running; a paused broker
//! shows on /readyz, never as a finding; SIGTERM saves the state and a
//! restart goes on from it without reading the plant again. With a file
//! copy and store: a store rolled back and a fork published under the
//! origin's key are findings, and a state of another origin is refused.

use std::fs::File;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use serde_json::Value;
use tempfile::TempDir;

use crate::common::*;

on_both_brokers!(a_monitor_keeps_up_with_a_live_follower_and_names_a_planted_record);

const ORIGIN: &str = "mon/agentrt";

/// `chainship monitor` with its findings (JSON lines) written to `out`.
fn monitor(from: &str, anchor: &str, vkey: &str, state: &Path, port: u16, out: &Path, extra: &[&str]) -> KillOnDrop {
    let stdout = File::create(out).unwrap();
    let stderr = File::create(out.with_extension("log")).unwrap();
    let child = bin()
        .args(["monitor", "--from", from, "--anchor", anchor, "--trusted-key", vkey])
        .args(["--state", path_str(state), "--json", "--store-interval", "300ms"])
        .args(["--metrics-addr", &format!("127.0.0.1:{port}")])
        .args(extra)
        .env("RUST_LOG", "info")
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr))
        .spawn()
        .expect("starting the monitor");
    KillOnDrop(child)
}

/// The findings the monitor printed so far.
fn findings(out: &Path) -> Vec<Value> {
    std::fs::read_to_string(out)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

fn scrape(port: u16, series: &str) -> Option<f64> {
    let (_, body) = http_get(port, "/metrics", Duration::from_secs(2))?;
    metric(&body, series)
}

/// Waits until `done` holds, at most `limit`; panics naming `what`.
fn wait_until(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn verified(port: u16) -> f64 {
    scrape(port, &format!("chainship_monitor_verified_seq{{origin=\"{ORIGIN}\"}}")).unwrap_or(0.0)
}

fn read_seq(port: u16) -> f64 {
    scrape(port, &format!("chainship_monitor_copy_seq{{origin=\"{ORIGIN}\"}}")).unwrap_or(0.0)
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
    producer.flush(Duration::from_secs(30)).unwrap();
}

async fn a_monitor_keeps_up_with_a_live_follower_and_names_a_planted_record() {
    let _services = services_exclusive().await;
    let a = Anchored::new(100, ORIGIN);
    let dir = a.dir.path();
    let topic = kafka_topic("monitor", 2).await;
    let from = format!("kafka://{}/{topic}", kafka_addr());
    let vkey = dir.join("vkey.txt");
    std::fs::write(&vkey, &a.verifier).unwrap();
    // The genuine records, as a file copy holds them (the topic never ends while the writer runs).
    let side = dir.join("side.jsonl");
    let shipped = Follow::new(&a.db, ORIGIN)
        .file_sink(&side)
        .cursor(&dir.join("side.cursor"))
        .start_at_seq_1()
        .once()
        .output();
    assert_eq!(code(&shipped), 0, "{}", stderr(&shipped));
    let genuine = std::fs::read_to_string(&side).unwrap();
    let mut writer = live_writer(&a.db, "200", &[]);
    let mut follower = KillOnDrop(
        kafka_follow(
            &a.db,
            &topic,
            ORIGIN,
            &dir.join("cursor"),
            &["--from-start", "--anchor-interval", "1s"],
        )
        .args(["--anchor", &a.anchor_url(), "--signing-key", path_str(&a.key)])
        .stderr(Stdio::null())
        .spawn()
        .unwrap(),
    );
    let (state, out, port) = (dir.join("monitor"), dir.join("findings.jsonl"), free_port());
    let mut mon = monitor(
        &from,
        &a.anchor_url(),
        path_str(&vkey),
        &state,
        port,
        &out,
        &["--origin", ORIGIN],
    );

    // It keeps up: the verified seq passes 300, then keeps rising.
    wait_until(Duration::from_secs(60), "verified seq past 300", || {
        verified(port) >= 300.0
    });
    assert_eq!(
        http_get(port, "/readyz", Duration::from_secs(2)).map(|r| r.0),
        Some(200)
    );
    assert_eq!(findings(&out), Vec::<Value>::new(), "an intact copy has no finding");

    // A forged record planted on the origin's partition: a copy of seq 50 with another payload.
    let home = chainship_sinks::kafka::partition_for(ORIGIN, 2);
    let line = genuine.lines().nth(49).unwrap().to_owned();
    let mut record: Value = serde_json::from_str(&line).unwrap();
    record["payload_json"] = Value::String(r#"{"forged":true}"#.into());
    let planted = Instant::now();
    produce(&topic, home, ORIGIN, &record.to_string());
    wait_until(Duration::from_secs(60), "a finding for the plant", || {
        !findings(&out).is_empty()
    });
    let took = planted.elapsed();
    let found = findings(&out);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["origin"], ORIGIN);
    assert_eq!(found[0]["seq"], 50, "{found:?}");
    assert_eq!(found[0]["kind"], "duplicate", "{found:?}");
    assert!(took < Duration::from_secs(60));
    let counted = format!("chainship_monitor_findings_total{{origin=\"{ORIGIN}\",kind=\"duplicate\"}}");
    wait_until(Duration::from_secs(5), "the finding counted", || {
        scrape(port, &counted) == Some(1.0)
    });
    // Trust in the copy ends below the plant: the verified seq goes back under 50.
    wait_until(Duration::from_secs(10), "verified seq below the plant", || {
        verified(port) < 50.0
    });
    // And it keeps watching.
    let before = read_seq(port);
    wait_until(Duration::from_secs(30), "the copy read on after the finding", || {
        read_seq(port) > before + 100.0
    });

    // A paused broker is unreadiness, never a finding; the monitor catches up after it.
    {
        let _paused = Paused::new(kafka_pid());
        wait_until(
            Duration::from_secs(30),
            "/readyz 503 while the broker is paused",
            || http_get(port, "/readyz", Duration::from_secs(2)).is_some_and(|r| r.0 == 503),
        );
    }
    wait_until(Duration::from_secs(60), "/readyz 200 after the broker resumed", || {
        http_get(port, "/readyz", Duration::from_secs(2)).is_some_and(|r| r.0 == 200)
    });
    let after_outage = read_seq(port);
    wait_until(Duration::from_secs(60), "catching up after the outage", || {
        read_seq(port) > after_outage + 100.0
    });
    assert_eq!(
        findings(&out).len(),
        1,
        "the outage added no finding: {:?}",
        findings(&out)
    );

    // SIGTERM: the state is saved; a restart goes on from it and does not read the plant again.
    signal(&mon, SIGTERM);
    assert_eq!(wait_with_limit(&mut mon, Duration::from_secs(20)).code(), Some(0));
    assert!(state.join("monitor.json").exists());
    let head = stop_writer(&mut writer, &a.db);
    wait_for_cursor(&dir.join("cursor"), &head, Duration::from_secs(60));
    let head_seq: f64 = head.split(':').next().unwrap().parse().unwrap();
    let out2 = dir.join("findings2.jsonl");
    let port2 = free_port();
    let mut mon2 = monitor(
        &from,
        &a.anchor_url(),
        path_str(&vkey),
        &state,
        port2,
        &out2,
        &["--origin", ORIGIN],
    );
    wait_until(
        Duration::from_secs(60),
        "the restarted monitor reads to the head",
        || read_seq(port2) >= head_seq,
    );
    assert!(verified(port2) < 50.0, "the plant still ends trust after a restart");
    let log = std::fs::read_to_string(out2.with_extension("log")).unwrap();
    assert!(log.contains("resumed=true"), "{log}");
    assert_eq!(findings(&out2), Vec::<Value>::new(), "nothing read again");
    let records = scrape(port2, "chainship_monitor_records_total").unwrap();
    assert!(
        records < head_seq - 100.0,
        "the restart read {records} records of {head_seq}"
    );
    signal(&mon2, SIGTERM);
    assert_eq!(wait_with_limit(&mut mon2, Duration::from_secs(20)).code(), Some(0));
    signal(&follower, SIGTERM);
    wait_with_limit(&mut follower, Duration::from_secs(20));
}

/// Ships `db` once into `copy`, anchored into `store` with `key`.
fn ship(db: &Path, copy: &Path, cursor: &Path, store: &Path, key: &Path) {
    let out = Follow::new(db, ORIGIN)
        .file_sink(copy)
        .cursor(cursor)
        .start_at_seq_1()
        .once()
        .args([
            "--anchor",
            &format!("file:{}", path_str(store)),
            "--signing-key",
            path_str(key),
        ])
        .output();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

/// Copies every file of `from` that `to` lacks (as an attacker with write access would add them).
fn add_missing(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            add_missing(&entry.path(), &target);
        } else if !target.exists() {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

#[test]
fn a_rolled_back_store_and_a_fork_are_findings_and_a_foreign_state_is_refused() {
    let a = Anchored::new(30, ORIGIN);
    let dir = a.dir.path();
    let vkey = dir.join("vkey.txt");
    std::fs::write(&vkey, &a.verifier).unwrap();
    let copy = dir.join("copy.jsonl");
    ship(&a.db, &copy, &dir.join("c"), &a.anchors, &a.key);
    append(&a.db, 10);
    ship(&a.db, &copy, &dir.join("c"), &a.anchors, &a.key);
    let from = format!("file:{}", path_str(&copy));
    let (state, out, port) = (dir.join("state"), dir.join("out.jsonl"), free_port());
    let mut mon = monitor(
        &from,
        &a.anchor_url(),
        path_str(&vkey),
        &state,
        port,
        &out,
        &["--origin", ORIGIN],
    );
    wait_until(Duration::from_secs(30), "verified through 40", || {
        verified(port) >= 40.0
    });
    assert_eq!(findings(&out), Vec::<Value>::new());

    // Rolled back: the newest head and checkpoint deleted.
    let origin_dir = a.anchors.join("mon/agentrt");
    std::fs::remove_file(origin_dir.join(format!("{:020}.head", 40))).unwrap();
    std::fs::remove_file(origin_dir.join("checkpoints").join(format!("{:020}", 40))).unwrap();
    wait_until(Duration::from_secs(30), "the rollback named", || {
        findings(&out)
            .iter()
            .any(|f| f["kind"] == "heads-disagree" && f["seq"] == 40)
    });
    assert!(
        http_get(port, "/livez", Duration::from_secs(2)).is_some_and(|r| r.0 == 200),
        "it keeps running"
    );
    signal(&mon, SIGTERM);
    assert_eq!(wait_with_limit(&mut mon, Duration::from_secs(20)).code(), Some(0));

    // A fork: another history of the origin, signed with its key, added to a store.
    let b = Anchored::new(30, ORIGIN);
    let bdir = b.dir.path();
    std::fs::write(bdir.join("vkey.txt"), &b.verifier).unwrap();
    let bcopy = bdir.join("copy.jsonl");
    ship(&b.db, &bcopy, &bdir.join("c"), &b.anchors, &b.key);
    let other = generate_with(bdir, "fork.db", 45, &["--seed", "9"]);
    let forked = bdir.join("forked");
    std::fs::create_dir(&forked).unwrap();
    ship(&other, &bdir.join("fork.jsonl"), &bdir.join("fc"), &forked, &b.key);
    let (bstate, bout, bport) = (bdir.join("state"), bdir.join("out.jsonl"), free_port());
    let bfrom = format!("file:{}", path_str(&bcopy));
    let mut bmon = monitor(
        &bfrom,
        &b.anchor_url(),
        path_str(&bdir.join("vkey.txt")),
        &bstate,
        bport,
        &bout,
        &["--origin", ORIGIN],
    );
    wait_until(Duration::from_secs(30), "verified through 30", || {
        verified(bport) >= 30.0
    });
    add_missing(&forked, &b.anchors);
    wait_until(Duration::from_secs(30), "the fork named", || {
        findings(&bout)
            .iter()
            .any(|f| f["kind"] == "checkpoint-fork" && f["seq"] == 45)
    });
    signal(&bmon, SIGTERM);
    assert_eq!(wait_with_limit(&mut bmon, Duration::from_secs(20)).code(), Some(0));

    // One state directory per monitor: another origin's, or another copy's, is refused and named.
    let refused = |args: &[&str]| {
        let out = run(&[
            &[
                "monitor",
                "--anchor",
                &b.anchor_url(),
                "--trusted-key",
                path_str(&bdir.join("vkey.txt")),
            ],
            args,
        ]
        .concat());
        (code(&out), stderr(&out))
    };
    let (exit, err) = refused(&["--from", &bfrom, "--origin", "mon/other", "--state", path_str(&bstate)]);
    assert_eq!(exit, 2, "{err}");
    assert!(err.contains("monitor.json") && err.contains("mon/agentrt"), "{err}");
    let (exit, err) = refused(&["--from", &from, "--origin", ORIGIN, "--state", path_str(&bstate)]);
    assert_eq!(exit, 2, "{err}");
    assert!(err.contains("one state directory per copy and store"), "{err}");
}

/// A whole fleet's directory of copies watched at once: each origin judged
/// with its own key, a call executed twice is a run-rule finding as its
/// records arrive, a record planted in one origin's file is that origin's
/// finding alone, and an origin the store vouches for that the copy lacks is missing.
#[test]
fn a_fleet_directory_is_watched_in_one_monitor() {
    let dir = TempDir::new().unwrap();
    let (store, copies) = (dir.path().join("anchors"), dir.path().join("copies"));
    std::fs::create_dir_all(&store).unwrap();
    std::fs::create_dir_all(&copies).unwrap();
    let mut keys = String::new();
    let origins = ["fleet/a", "fleet/b", "fleet/c"];
    for (i, origin) in origins.iter().enumerate() {
        // fleet/b's runtime executed a call twice: a run-rule finding as its records arrive.
        let seed = (i + 1).to_string();
        let mut extra = vec!["--seed", &seed];
        if i == 1 {
            extra.extend(["--inject", "executed-twice@8"]);
        }
        let db = generate_with(dir.path(), &format!("{i}.db"), 100, &extra);
        let (key, vkey) = keygen(dir.path(), origin, &format!("{i}.key"));
        keys += &format!("{vkey}\n");
        // fleet/c ships to a copy outside the watched directory: missing from it.
        let copy = match i {
            2 => dir.path().join("elsewhere.jsonl"),
            _ => copies.join(format!("{i}.jsonl")),
        };
        let out = Follow::new(&db, origin)
            .file_sink(&copy)
            .cursor(&dir.path().join(format!("{i}.cursor")))
            .start_at_seq_1()
            .once()
            .args([
                "--anchor",
                &format!("file:{}", path_str(&store)),
                "--signing-key",
                path_str(&key),
            ])
            .output();
        assert_eq!(code(&out), 0, "{}", stderr(&out));
    }
    let keys_file = dir.path().join("fleet-keys.txt");
    std::fs::write(&keys_file, keys).unwrap();
    let (state, out, port) = (dir.path().join("state"), dir.path().join("out.jsonl"), free_port());
    let from = format!("file:{}", path_str(&copies));
    let mut mon = monitor(
        &from,
        &format!("file:{}", path_str(&store)),
        path_str(&keys_file),
        &state,
        port,
        &out,
        &["--all-origins", "--reorder-grace", "2s"],
    );
    let seq = |o: &str| scrape(port, &format!("chainship_monitor_verified_seq{{origin=\"{o}\"}}"));
    wait_until(Duration::from_secs(30), "both copies verified", || {
        seq("fleet/a") == Some(100.0) && seq("fleet/b") == Some(100.0)
    });
    wait_until(Duration::from_secs(30), "fleet/b's call executed twice named", || {
        findings(&out).iter().any(|f| {
            f["origin"] == "fleet/b" && f["kind"] == "run-rule" && f["message"].as_str().unwrap().contains("twice")
        })
    });
    wait_until(Duration::from_secs(30), "fleet/c named missing", || {
        findings(&out)
            .iter()
            .any(|f| f["origin"] == "fleet/c" && f["kind"] == "missing-copy")
    });
    // A record of fleet/b appended to fleet/a's file, altered: fleet/b's finding alone.
    let line = std::fs::read_to_string(copies.join("1.jsonl"))
        .unwrap()
        .lines()
        .nth(4)
        .unwrap()
        .to_owned();
    let mut record: Value = serde_json::from_str(&line).unwrap();
    record["payload_json"] = Value::String("{}".into());
    let mut text = record.to_string();
    text.push('\n');
    use std::io::Write;
    std::fs::OpenOptions::new()
        .append(true)
        .open(copies.join("0.jsonl"))
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    wait_until(Duration::from_secs(30), "the plant named", || {
        findings(&out).iter().any(|f| f["origin"] == "fleet/b" && f["seq"] == 5)
    });
    let found = findings(&out);
    assert!(
        found.iter().all(|f| f["origin"] != "fleet/a"),
        "fleet/a has no finding: {found:?}"
    );
    // Records of an origin the store vouches for nothing of: named.
    let evil: String = std::fs::read_to_string(copies.join("0.jsonl"))
        .unwrap()
        .lines()
        .take(10)
        .map(|l| l.replace("\"fleet/a\"", "\"evil/y\"") + "\n")
        .collect();
    std::fs::write(copies.join("evil.jsonl"), evil).unwrap();
    wait_until(Duration::from_secs(30), "evil/y named", || {
        findings(&out)
            .iter()
            .any(|f| f["origin"] == "evil/y" && f["kind"] == "no-trusted-head")
    });
    signal(&mon, SIGTERM);
    assert_eq!(wait_with_limit(&mut mon, Duration::from_secs(20)).code(), Some(0));
}

/// An S3 copy followed by listing new keys: a follower's objects are
/// verified as they land, an S3 outage is unreadiness and no finding, and an object planted with a later name holding a
/// forged repeat of a delivered seq is named (its seq) within a minute.
#[tokio::test]
async fn an_s3_copy_is_followed_object_by_object_and_a_planted_object_is_named() {
    let _services = services_exclusive().await;
    let a = Anchored::new(300, ORIGIN);
    let dir = a.dir.path();
    let vkey = dir.join("vkey.txt");
    std::fs::write(&vkey, &a.verifier).unwrap();
    let bucket = unique_bucket("monitor");
    s3_client().create_bucket().bucket(&bucket).send().await.unwrap();
    let ship = || {
        let out = s3_follow(&a.db, &bucket, ORIGIN, &dir.join("cursor"), &["--once", "--from-start"])
            .args(["--anchor", &a.anchor_url(), "--signing-key", path_str(&a.key)])
            .args(["--s3-batch-events", "100"])
            .output()
            .unwrap();
        assert_eq!(code(&out), 0, "{}", stderr(&out));
    };
    ship();
    let (state, out, port) = (dir.join("state"), dir.join("out.jsonl"), free_port());
    let stdout = File::create(&out).unwrap();
    let mut cmd = bin();
    s3_env(&mut cmd);
    let mut mon = KillOnDrop(
        cmd.args([
            "monitor",
            "--from",
            &format!("s3://{bucket}/exports"),
            "--origin",
            ORIGIN,
        ])
        .args(["--s3-endpoint", &s3_endpoint(), "--s3-path-style"])
        .args(["--anchor", &a.anchor_url(), "--trusted-key", path_str(&vkey)])
        .args(["--state", path_str(&state), "--json", "--store-interval", "300ms"])
        .args(["--metrics-addr", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::null())
        .spawn()
        .unwrap(),
    );
    wait_until(Duration::from_secs(30), "verified through 300", || {
        verified(port) >= 300.0
    });
    append(&a.db, 200);
    ship();
    wait_until(Duration::from_secs(30), "verified through 500", || {
        verified(port) >= 500.0
    });
    assert_eq!(findings(&out), Vec::<Value>::new());

    // A forged seq 42 in an object whose name sorts after everything read.
    let side = dir.join("side.jsonl");
    let shipped = Follow::new(&a.db, ORIGIN)
        .file_sink(&side)
        .cursor(&dir.join("side.cursor"))
        .start_at_seq_1()
        .once()
        .output();
    assert_eq!(code(&shipped), 0, "{}", stderr(&shipped));
    let line = std::fs::read_to_string(&side)
        .unwrap()
        .lines()
        .nth(41)
        .unwrap()
        .to_owned();
    let mut record: Value = serde_json::from_str(&line).unwrap();
    record["payload_json"] = Value::String(r#"{"forged":true}"#.into());
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    use std::io::Write;
    gz.write_all(format!("{record}\n").as_bytes()).unwrap();
    let key = format!(
        "exports/{}/{:020}-{:020}.jsonl.gz",
        ORIGIN.replace('/', "%2F"),
        900,
        900
    );
    s3_client()
        .put_object()
        .bucket(&bucket)
        .key(&key)
        .body(aws_sdk_s3::primitives::ByteStream::from(gz.finish().unwrap()))
        .send()
        .await
        .unwrap();
    wait_until(Duration::from_secs(60), "the forged seq 42 named", || {
        findings(&out)
            .iter()
            .any(|f| f["seq"] == 42 && f["kind"] == "duplicate")
    });
    assert!(
        findings(&out)
            .iter()
            .any(|f| f["message"].as_str().unwrap().contains("its name says seqs 900 to 900")),
        "the object's name is not its range: {:?}",
        findings(&out)
    );
    signal(&mon, SIGTERM);
    assert_eq!(wait_with_limit(&mut mon, Duration::from_secs(20)).code(), Some(0));
}

/// What a state directory claims is checked against what it belongs to: a
/// `monitor.json` claiming a seq its store state never verified is refused,
/// the same copy by another path is the same copy (and the same relative
/// path from another directory is not), and an origin whose whole folder
/// vanished from the store is named, as a rollback.
#[test]
fn a_state_is_held_to_its_copy_and_store_and_a_vanished_origin_is_named() {
    let a = Anchored::new(30, ORIGIN);
    let dir = a.dir.path();
    std::fs::write(dir.join("vkey.txt"), &a.verifier).unwrap();
    ship(&a.db, &dir.join("copy.jsonl"), &dir.join("c"), &a.anchors, &a.key);
    let start = |cwd: &Path, from: &str, port: u16, out: &Path| {
        let stdout = File::create(out).unwrap();
        KillOnDrop(
            bin()
                .current_dir(cwd)
                .args([
                    "monitor",
                    "--from",
                    from,
                    "--origin",
                    ORIGIN,
                    "--anchor",
                    &a.anchor_url(),
                ])
                .args([
                    "--trusted-key",
                    path_str(&dir.join("vkey.txt")),
                    "--state",
                    path_str(&dir.join("state")),
                ])
                .args([
                    "--json",
                    "--store-interval",
                    "300ms",
                    "--metrics-addr",
                    &format!("127.0.0.1:{port}"),
                ])
                .stdout(Stdio::from(stdout))
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        )
    };
    let (port, out) = (free_port(), dir.join("out.jsonl"));
    let mut mon = start(dir, "file:copy.jsonl", port, &out);
    wait_until(Duration::from_secs(30), "verified through 30", || {
        verified(port) >= 30.0
    });
    signal(&mon, SIGTERM);
    assert_eq!(wait_with_limit(&mut mon, Duration::from_secs(20)).code(), Some(0));

    // An edited claim: refused, naming both files.
    let state_file = dir.join("state/monitor.json");
    let saved = std::fs::read_to_string(&state_file).unwrap();
    let mut doc: Value = serde_json::from_str(&saved).unwrap();
    doc["watches"][0]["verified"] = Value::String(format!("999999:{}", "a".repeat(64)));
    std::fs::write(&state_file, doc.to_string()).unwrap();
    let out2 = bin()
        .current_dir(dir)
        .args([
            "monitor",
            "--from",
            "file:copy.jsonl",
            "--origin",
            ORIGIN,
            "--anchor",
            &a.anchor_url(),
        ])
        .args([
            "--trusted-key",
            path_str(&dir.join("vkey.txt")),
            "--state",
            path_str(&dir.join("state")),
        ])
        .output()
        .unwrap();
    assert_eq!(code(&out2), 2, "{}", stderr(&out2));
    assert!(stderr(&out2).contains("never verified"), "{}", stderr(&out2));
    std::fs::write(&state_file, saved).unwrap();

    // The same relative path from another directory is another copy.
    let elsewhere = TempDir::new().unwrap();
    std::fs::write(elsewhere.path().join("copy.jsonl"), "").unwrap();
    let other = bin()
        .current_dir(elsewhere.path())
        .args([
            "monitor",
            "--from",
            "file:copy.jsonl",
            "--origin",
            ORIGIN,
            "--anchor",
            &a.anchor_url(),
        ])
        .args([
            "--trusted-key",
            path_str(&dir.join("vkey.txt")),
            "--state",
            path_str(&dir.join("state")),
        ])
        .output()
        .unwrap();
    assert_eq!(code(&other), 2, "{}", stderr(&other));
    assert!(
        stderr(&other).contains("one state directory per copy and store"),
        "{}",
        stderr(&other)
    );

    // The same copy by its absolute path: the state is taken; then the origin's folder vanishes.
    let port = free_port();
    let absolute = format!("file:{}", path_str(&dir.join("copy.jsonl")));
    let mut mon = start(Path::new("/"), &absolute, port, &out);
    wait_until(Duration::from_secs(30), "verified through 30 again", || {
        verified(port) >= 30.0
    });
    std::fs::rename(a.anchors.join("mon"), dir.join("moved-away")).unwrap();
    wait_until(Duration::from_secs(30), "the vanished origin named", || {
        findings(&out)
            .iter()
            .any(|f| f["kind"] == "heads-disagree" && f["seq"] == 30)
    });
    signal(&mon, SIGTERM);
    assert_eq!(wait_with_limit(&mut mon, Duration::from_secs(20)).code(), Some(0));
}
