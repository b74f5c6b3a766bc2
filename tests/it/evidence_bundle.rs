//! One run's evidence (`chainship evidence`, `check-evidence`): bundles from
//! the database and from file, S3 and Kafka copies, each injected fault
//! named as the run's finding, every proof checked by an independent
//! implementation, tampering named, and the report loaded in a real browser.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::*;
use serde_json::Value;

const ORIGIN: &str = "evidence/agentrt";

/// Exports `a`'s database to `events.jsonl`, anchored, once.
fn export(a: &Anchored, extra: &[&str]) {
    let out = Follow::new(&a.db, ORIGIN)
        .file_sink(&a.dir.path().join("events.jsonl"))
        .cursor(&a.dir.path().join("cursor"))
        .start_at_seq_1()
        .once()
        .anchored(a)
        .args(["--batch-size", "500"])
        .args(extra)
        .output();
    assert_eq!(code(&out), 0, "follow: {}", stderr(&out));
}

fn evidence_cmd(a: &Anchored, run_id: &str, source: &[&str], out: &Path, extra: &[&str]) -> Command {
    evidence_as(a, ORIGIN, run_id, source, out, extra)
}

fn evidence_as(a: &Anchored, origin: &str, run_id: &str, source: &[&str], out: &Path, extra: &[&str]) -> Command {
    let mut cmd = bin();
    s3_env(&mut cmd)
        .args([
            "evidence",
            "--run",
            run_id,
            "--origin",
            origin,
            "--anchor",
            &a.anchor_url(),
        ])
        .args(["--trusted-key", &a.verifier, "--out", path_str(out), "--json"])
        .args(source)
        .args(extra);
    cmd
}

/// Writes a bundle; asserts it was written.
fn evidence(a: &Anchored, run_id: &str, source: &[&str], out: &Path, extra: &[&str]) -> Value {
    let done = evidence_cmd(a, run_id, source, out, extra).output().unwrap();
    assert_eq!(
        code(&done),
        0,
        "evidence {source:?}: {}{}",
        stdout(&done),
        stderr(&done)
    );
    serde_json::from_slice(&done.stdout).unwrap()
}

fn check(bundle: &Path, verifier: &str, extra: &[&str]) -> (i32, Value, Output) {
    let out = bin()
        .args(["check-evidence", path_str(bundle), "--trusted-key", verifier, "--json"])
        .args(extra)
        .output()
        .unwrap();
    let json = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (code(&out), json, out)
}

/// What someone who changed a bundle's records would do next: render its
/// run.json, report.html and README.txt again from the changed records.
fn rerender(bundle: &Path, verifier: &str) {
    let fresh = bundle.with_extension("rendered");
    let out = bin()
        .args([
            "check-evidence",
            path_str(bundle),
            "--trusted-key",
            verifier,
            "--render",
            path_str(&fresh),
        ])
        .output()
        .unwrap();
    assert_ne!(code(&out), 2, "{}", stderr(&out));
    for name in ["run.json", "report.html", "README.txt"] {
        std::fs::copy(fresh.join(name), bundle.join(name)).unwrap();
    }
    std::fs::remove_dir_all(&fresh).unwrap();
}

fn kinds(json: &Value, key: &str) -> Vec<String> {
    let list = match key {
        "findings" => &json["findings"],
        _ => &json["proven"]["not_proven"],
    };
    list.as_array()
        .map(|l| l.iter().map(|f| f["kind"].as_str().unwrap_or("-").to_owned()).collect())
        .unwrap_or_default()
}

/// The run the run check names for `kind` (over the whole database), and a
/// finished run with no finding.
fn runs_of(db: &Path, kind: &str) -> (String, String) {
    let out = run(&["runs", "--db", path_str(db), "--json"]);
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let faulty = json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} finding: {json}"))["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let clean = json["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["findings"] == 0 && r["status"] == "finished" && r["events"].as_u64().unwrap() > 10)
        .expect("a clean finished run")["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    (faulty, clean)
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn write_lines(path: &Path, lines: &[String]) {
    std::fs::write(path, lines.iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();
}

fn seq_of(line: &str) -> u64 {
    serde_json::from_str::<Value>(line).unwrap()["seq"].as_u64().unwrap()
}

#[test]
fn each_injected_fault_is_the_runs_finding_and_a_clean_run_passes() {
    for fault in [
        "unknown-outcome",
        "executed-twice",
        "started-without-decision",
        "left-running",
        "event-after-finish",
        "unknown-step",
        "unrequested-approval",
    ] {
        let a = Anchored::generated(3000, ORIGIN, &["--inject", &format!("{fault}@1000")]);
        export(&a, &[]);
        let (faulty, clean) = runs_of(&a.db, fault);
        let copy = format!("file:{}", path_str(&a.dir.path().join("events.jsonl")));
        for (source, name) in [(vec!["--db", path_str(&a.db)], "db"), (vec!["--from", &copy], "file")] {
            let bundle = a.dir.path().join(format!("{fault}-{name}"));
            let written = evidence(&a, &faulty, &source, &bundle, &[]);
            assert_eq!(written["proven"]["all"], true, "{fault} {name}: {written}");
            let (c, json, _) = check(&bundle, &a.verifier, &[]);
            assert_eq!(c, 1, "{fault} {name}: a run finding exits 1: {json}");
            assert_eq!(
                json["proven"]["all"], true,
                "{fault} {name}: every record proven: {json}"
            );
            assert!(
                kinds(&json, "findings").contains(&fault.to_owned()),
                "{fault} {name}: {json}"
            );
            assert_eq!(json["run_id"], faulty.as_str());
        }
        let bundle = a.dir.path().join("clean");
        evidence(&a, &clean, &["--db", path_str(&a.db)], &bundle, &[]);
        let (c, json, out) = check(&bundle, &a.verifier, &[]);
        assert_eq!(c, 0, "{fault}: a clean run: {json}");
        assert_eq!(json["status"], "ok");
        assert!(json["proven"]["records"].as_u64().unwrap() > 10);
        let text = run(&["check-evidence", path_str(&bundle), "--trusted-key", &a.verifier]);
        assert!(
            stdout(&text).contains("findings: 0"),
            "{}{}",
            stdout(&text),
            stderr(&out)
        );
    }
}

/// Every record of a bundle is proven by independent C2SP code: its tiles
/// read as a tiles directory through aics-tlog's authenticated reader, each
/// proof computed from them by a reader written apart and checked by
/// aics-tlog against the signed checkpoint; the gaps checked by the same
/// reader; every record re-hashes; a tar bundle reads as the directory does.
#[test]
fn every_proof_checks_with_independent_implementations() {
    let a = Anchored::generated(3000, ORIGIN, &["--inject", "unknown-outcome@1000"]);
    export(&a, &[]);
    let (faulty, _) = runs_of(&a.db, "unknown-outcome");
    let bundle = a.dir.path().join("b");
    evidence(&a, &faulty, &["--db", path_str(&a.db)], &bundle, &["--with-gaps"]);
    let records = lines(&bundle.join("records.jsonl"));
    let mut seqs: Vec<u64> = records.iter().map(|l| seq_of(l)).collect();
    seqs.push(seq_of(&lines(&bundle.join("newest.json"))[0]));
    // The bundle is a C2SP tlog-tiles directory (its checkpoint beside its
    // tiles). aics-tlog checks the checkpoint and that the right edge's tiles
    // give its root; a reader written apart, on aics-tlog's authenticated
    // tile reader, computes each record's proof from the tiles as Go's tlog
    // does; aics-tlog checks each proof against the signed checkpoint.
    let theirs = aics(aics_tlog().args([
        "verify-checkpoint",
        "--tiles",
        path_str(&bundle),
        "--log-key",
        &a.verifier,
    ]));
    assert_eq!(
        (&theirs["ok"], &theirs["tiles_ok"]),
        (&Value::Bool(true), &Value::Bool(true)),
        "{theirs}"
    );
    let proofs = a.dir.path().join("their-proofs");
    let read = tiles_check(&bundle, &proofs);
    assert_eq!(read["ok"], true, "{read}");
    assert_eq!(read["proofs"].as_array().unwrap().len(), seqs.len(), "{read}");
    for seq in &seqs {
        let theirs = aics(aics_tlog().args([
            "verify-inclusion",
            "--proof",
            path_str(&proofs.join(format!("{seq}.proof"))),
            "--checkpoint",
            path_str(&bundle.join("checkpoint")),
            "--log-key",
            &a.verifier,
            "--index",
            &(seq - 1).to_string(),
            "--leaf",
            path_str(&proofs.join(format!("{seq}.leaf"))),
        ]));
        assert_eq!(theirs["ok"], true, "aics-tlog on seq {seq}: {theirs}");
    }
    // Every position from the run's creation to the checkpoint, as the
    // reader written apart sees it: the gaps.
    let size = seqs.last().copied().unwrap();
    assert_eq!(read["positions"].as_u64().unwrap(), size - seqs[0] + 1);
    // A hash of the first record's level-0 tile changed: the reader written
    // apart refuses it (it can fail), and so does check-evidence.
    let changed = a.dir.path().join("changed-tile");
    copy_tree(&bundle, &changed);
    let first = seqs[0];
    let tile = changed.join(format!("tile/0/{:03}", (first - 1) / 256));
    let tile = if tile.exists() {
        tile
    } else {
        std::fs::read_dir(changed.join(format!("tile/0/{:03}.p", (first - 1) / 256)))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path()
    };
    let mut bytes = std::fs::read(&tile).unwrap();
    bytes[((first - 1) % 256) as usize * 32] ^= 1;
    std::fs::write(&tile, bytes).unwrap();
    let read = tiles_check(&changed, &a.dir.path().join("changed-proofs"));
    assert_eq!(read["ok"], false, "a changed tile: {read}");
    let (c, json, _) = check(&changed, &a.verifier, &[]);
    assert_eq!(c, 1, "{json}");
    // The records re-hash from their fields alone, each linking to the one before where they are adjacent.
    for line in &records {
        let r = chainship_chain::record::Record::parse(line.as_bytes()).unwrap();
        assert_eq!(r.expected_hash()[..], *r.hash.as_bytes(), "seq {}", r.seq);
    }
    // The span's last level-0 tile changed (another run's entry, no record's
    // proof reads it): the gaps no longer stand, apart or in check-evidence.
    let broken = a.dir.path().join("broken");
    copy_tree(&bundle, &broken);
    let edge = std::fs::read_dir(broken.join(format!("tile/0/{:03}.p", (size - 1) / 256)))
        .map(|mut d| d.next().unwrap().unwrap().path())
        .unwrap_or_else(|_| broken.join(format!("tile/0/{:03}", (size - 1) / 256)));
    let mut bytes = std::fs::read(&edge).unwrap();
    bytes[0] ^= 1;
    std::fs::write(&edge, bytes).unwrap();
    assert_eq!(tiles_check(&broken, &a.dir.path().join("broken-proofs"))["ok"], false);
    let (c, json, _) = check(&broken, &a.verifier, &[]);
    assert_eq!(c, 1, "{json}");

    // The same bundle as one tar file.
    let tar = a.dir.path().join("b.tar");
    evidence(&a, &faulty, &["--db", path_str(&a.db)], &tar, &["--with-gaps"]);
    let (c, json, _) = check(&tar, &a.verifier, &[]);
    assert_eq!((c, &json["proven"]["all"]), (1, &Value::Bool(true)), "{json}");
    let listed = Command::new("tar").args(["-tf", path_str(&tar)]).output().unwrap();
    assert!(stdout(&listed).contains("tile/0/"), "{}", stdout(&listed));
    // --out is never replaced.
    let again = evidence_cmd(&a, &faulty, &["--db", path_str(&a.db)], &tar, &[])
        .output()
        .unwrap();
    assert_eq!(code(&again), 2, "{}", stderr(&again));
}

fn tiles_check(bundle: &Path, out: &Path) -> Value {
    let python = Path::new(&std::env::var("CHAINSHIP_TEST_AICS_TLOG").expect("CHAINSHIP_TEST_AICS_TLOG"))
        .with_file_name("python3");
    let out = Command::new(python)
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/validators/bundle_tiles.py"))
        .arg(bundle)
        .arg(out)
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}{}", stdout(&out), stderr(&out)))
}

#[tokio::test(flavor = "multi_thread")]
async fn bundles_from_s3_and_kafka_copies_prove_the_run() {
    let _services = services().await;
    let a = Anchored::generated(2500, ORIGIN, &["--inject", "unknown-outcome@800"]);
    let (faulty, _) = runs_of(&a.db, "unknown-outcome");
    let bucket = bucket("evidence").await;
    let topic = kafka_topic("evidence", 1).await;
    let s3 = format!("s3://{bucket}/exports");
    let kafka = format!("kafka://{}/{topic}", kafka_addr());
    let s3_flags = ["--s3-endpoint", &s3_endpoint(), "--s3-path-style"];
    for (sink, cursor) in [(&s3, "s3.cursor"), (&kafka, "kafka.cursor")] {
        let mut cmd = Follow::new(&a.db, ORIGIN)
            .sink(sink)
            .cursor(&a.dir.path().join(cursor))
            .start_at_seq_1()
            .once()
            .anchored(&a)
            .args(["--batch-size", "500", "--s3-batch-events", "500"])
            .args(s3_flags)
            .command();
        let out = tokio::task::block_in_place(|| s3_env(&mut cmd).output().unwrap());
        assert_eq!(code(&out), 0, "follow {sink}: {}", stderr(&out));
        let bundle = a.dir.path().join(format!("{cursor}.bundle"));
        let source = [&["--from", sink.as_str()][..], &s3_flags[..]].concat();
        let written = tokio::task::block_in_place(|| evidence(&a, &faulty, &source, &bundle, &[]));
        assert_eq!(written["proven"]["all"], true, "{sink}: {written}");
        let (c, json, _) = check(&bundle, &a.verifier, &[]);
        assert_eq!(c, 1, "{sink}: {json}");
        assert_eq!(json["proven"]["all"], true, "{sink}: {json}");
        assert_eq!(kinds(&json, "findings"), vec!["unknown-outcome"], "{sink}: {json}");
    }
}

/// A bundle changed on the way to the auditor: each change is named.
#[test]
fn tampering_with_a_bundle_is_named() {
    let a = Anchored::generated(3000, ORIGIN, &["--inject", "unknown-outcome@1000"]);
    export(&a, &[]);
    let (faulty, clean) = runs_of(&a.db, "unknown-outcome");
    let good = a.dir.path().join("good");
    evidence(&a, &clean, &["--db", path_str(&a.db)], &good, &["--with-gaps"]);
    assert_eq!(check(&good, &a.verifier, &[]).0, 0);
    let records = lines(&good.join("records.jsonl"));
    let tampered = |name: &str, change: &dyn Fn(&Path)| -> (i32, Value) {
        let dir = a.dir.path().join(name);
        copy_tree(&good, &dir);
        change(&dir);
        let (c, json, out) = check(&dir, &a.verifier, &[]);
        assert_eq!(c, 1, "{name}: {json} {}", stderr(&out));
        assert_eq!(json["status"], "failed", "{name}");
        (c, json)
    };

    // A record's payload changed: altered, at its seq.
    let victim = seq_of(&records[3]);
    let (_, json) = tampered("payload", &|d| {
        let mut l = lines(&d.join("records.jsonl"));
        let mut v: Value = serde_json::from_str(&l[3]).unwrap();
        v["payload_json"] = Value::String(format!("{} ", v["payload_json"].as_str().unwrap()));
        l[3] = v.to_string();
        write_lines(&d.join("records.jsonl"), &l);
    });
    let not_proven = &json["proven"]["not_proven"][0];
    assert_eq!(
        (not_proven["seq"].as_u64(), &not_proven["kind"]),
        (Some(victim), &Value::from("altered")),
        "{json}"
    );

    // A record removed: under --with-gaps its seq is unaccounted for.
    let removed = seq_of(&records[5]);
    let (_, json) = tampered("removed", &|d| {
        let mut l = lines(&d.join("records.jsonl"));
        l.remove(5);
        write_lines(&d.join("records.jsonl"), &l);
    });
    assert!(kinds(&json, "not_proven").contains(&"gap".to_owned()), "{json}");
    assert!(
        json.to_string().contains(&format!("seq {removed}..={removed}")),
        "{json}"
    );

    // A record of another run added (the tiles prove it too): named as another run's.
    let other_bundle = a.dir.path().join("other");
    evidence(&a, &faulty, &["--db", path_str(&a.db)], &other_bundle, &[]);
    let stranger = lines(&other_bundle.join("records.jsonl"))[2].clone();
    let stranger_seq = seq_of(&stranger);
    let (_, json) = tampered("another-run", &|d| {
        let mut l = lines(&d.join("records.jsonl"));
        l.push(stranger.clone());
        l.sort_by_key(|x| seq_of(x));
        write_lines(&d.join("records.jsonl"), &l);
        assert!(stranger_seq > 0);
    });
    assert!(kinds(&json, "not_proven").contains(&"foreign".to_owned()), "{json}");

    // One hash of a tile the proofs are computed from changed: the tile is
    // named (it no longer hashes to its parent's entry, or the edge to the
    // root), and no record is proven from the bundle's tiles.
    let mut level0: Vec<String> = std::fs::read_dir(good.join("tile/0"))
        .unwrap()
        .map(|e| format!("tile/0/{}", e.unwrap().file_name().to_string_lossy()))
        .filter(|n| !n.ends_with(".p"))
        .collect();
    level0.sort();
    let tile = level0
        .first()
        .expect("a full level-0 tile in a bundle of a 3000-event log")
        .clone();
    let (_, json) = tampered("tile", &|d| {
        let mut bytes = std::fs::read(d.join(&tile)).unwrap();
        bytes[32 * 9] ^= 0x40;
        std::fs::write(d.join(&tile), bytes).unwrap();
    });
    assert!(
        kinds(&json, "not_proven").contains(&"tiles-disagree".to_owned()),
        "{json}"
    );
    assert!(json.to_string().contains(&tile), "{json}");
    // A tile removed: named as what the proofs lack.
    let (_, json) = tampered("tile-removed", &|d| std::fs::remove_file(d.join(&tile)).unwrap());
    assert!(json.to_string().contains(&tile), "{json}");
    assert_eq!(json["proven"]["all"], false, "{json}");

    // A checkpoint (and every proof) from a log signed by another key.
    let b = Anchored::generated(3000, ORIGIN, &["--inject", "unknown-outcome@1000"]);
    export(&b, &[]);
    let forged = a.dir.path().join("forged");
    evidence(&b, &clean, &["--db", path_str(&b.db)], &forged, &[]);
    let (_, json) = tampered("other-key", &|d| {
        for name in ["checkpoint", "head"] {
            std::fs::copy(forged.join(name), d.join(name)).unwrap();
        }
    });
    assert!(
        kinds(&json, "not_proven").contains(&"untrusted-key".to_owned()),
        "{json}"
    );
    let whole = a.dir.path().join("forged-whole");
    copy_tree(&forged, &whole);
    let (c, json, _) = check(&whole, &a.verifier, &[]);
    assert_eq!(c, 1, "a bundle signed by another key: {json}");
    assert!(
        kinds(&json, "not_proven").contains(&"untrusted-key".to_owned()),
        "{json}"
    );

    // A checkpoint of another origin, signed by the trusted key (in a store
    // of its own: a follower refuses a key named after an origin its store
    // keeps heads for).
    let other_origin = a.dir.path().join("other-origin");
    let elsewhere = Anchored {
        dir: tempfile::TempDir::new().unwrap(),
        db: a.db.clone(),
        anchors: a.dir.path().join("elsewhere-anchors"),
        key: a.key.clone(),
        verifier: a.verifier.clone(),
    };
    std::fs::create_dir(&elsewhere.anchors).unwrap();
    let out = Follow::new(&a.db, "elsewhere/agentrt")
        .file_sink(&a.dir.path().join("elsewhere.jsonl"))
        .cursor(&a.dir.path().join("elsewhere.cursor"))
        .start_at_seq_1()
        .once()
        .anchored(&elsewhere)
        .output();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let done = evidence_as(
        &elsewhere,
        "elsewhere/agentrt",
        &clean,
        &["--db", path_str(&a.db)],
        &other_origin,
        &[],
    )
    .output()
    .unwrap();
    assert_eq!(code(&done), 0, "{}", stderr(&done));
    let (_, json) = tampered("origin", &|d| {
        std::fs::remove_dir_all(d.join("tile")).unwrap();
        copy_tree(&other_origin.join("tile"), &d.join("tile"));
        for name in ["checkpoint", "head"] {
            std::fs::copy(other_origin.join(name), d.join(name)).unwrap();
        }
    });
    assert!(kinds(&json, "not_proven").contains(&"foreign".to_owned()), "{json}");

    // Another log's bundle when the auditor names the log.
    let (c, json, _) = check(&good, &a.verifier, &["--origin", "elsewhere/agentrt"]);
    assert_eq!(c, 1, "{json}");
    assert!(kinds(&json, "not_proven").contains(&"foreign".to_owned()), "{json}");

    // A checkpoint whose size is near u64::MAX: named, never a panic.
    let huge = a.dir.path().join("huge");
    copy_tree(&good, &huge);
    let text = std::fs::read_to_string(huge.join("checkpoint")).unwrap();
    let mut l: Vec<&str> = text.split('\n').collect();
    l[1] = "18446744073709551615";
    std::fs::write(huge.join("checkpoint"), l.join("\n")).unwrap();
    let (c, _, out) = check(&huge, &a.verifier, &["--with-gaps"]);
    assert!(c == 1 || c == 2, "{c}: {}", stderr(&out));

    // A file no bundle has, or a name twice in a tar under another spelling: refused.
    let extra = a.dir.path().join("extra");
    copy_tree(&good, &extra);
    std::fs::write(extra.join("report2.html"), "<script>alert(1)</script>").unwrap();
    let (c, _, out) = check(&extra, &a.verifier, &[]);
    assert_eq!(c, 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("report2.html"), "{}", stderr(&out));
    let tar = a.dir.path().join("twice.tar");
    let made = Command::new("python3")
        .args(["-c", "import sys, tarfile, io\nwith tarfile.open(sys.argv[1], 'w') as t:\n  t.add(sys.argv[2], arcname='.')\n  data = b'ALL CLEAR'\n  i = tarfile.TarInfo('././report.html'); i.size = len(data); t.addfile(i, io.BytesIO(data))"])
        .args([path_str(&tar), path_str(&good)])
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", stderr(&made));
    let (c, _, out) = check(&tar, &a.verifier, &[]);
    assert_eq!(c, 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("report.html twice"), "{}", stderr(&out));

    // Not a bundle: exit 2.
    let empty = a.dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    assert_eq!(check(&empty, &a.verifier, &[]).0, 2);
    let junk = a.dir.path().join("junk.tar");
    std::fs::write(&junk, b"not a tar file at all").unwrap();
    let (c, _, out) = check(&junk, &a.verifier, &[]);
    assert_eq!(c, 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("junk.tar"), "{}", stderr(&out));
}

/// Under --with-gaps a record left out is caught even when no transition
/// breaks, and one passed off as another run's hash is refuted by revealing it.
#[test]
fn a_withheld_event_is_caught_by_the_gaps_and_refuted_by_revealing_it() {
    let a = Anchored::generated(3000, ORIGIN, &[]);
    export(&a, &[]);
    let (_, clean) = runs_of_clean(&a.db);
    let good = a.dir.path().join("good");
    evidence(&a, &clean, &["--db", path_str(&a.db)], &good, &["--with-gaps"]);
    let records = lines(&good.join("records.jsonl"));
    // A whole model call (its dispatch and its completion): leaving both out
    // breaks no transition the run check knows.
    let (i, line) = records
        .iter()
        .enumerate()
        .find(|(_, l)| l.contains("\"type\":\"model.completed\""))
        .expect("a model.completed event");
    let call = |l: &str| -> Option<String> {
        let v: Value = serde_json::from_str(l).ok()?;
        let p: Value = serde_json::from_str(v["payload_json"].as_str()?).ok()?;
        p["call_id"].as_str().map(str::to_owned)
    };
    let j = records
        .iter()
        .position(|l| l.contains("\"type\":\"model.dispatched\"") && call(l) == call(line))
        .expect("its dispatch");
    let seq = seq_of(line);
    // The withholder removes the records (the tiles prove any event of
    // their span, so nothing else of the bundle names them).
    let leave_out = |dir: &Path| {
        let mut l = lines(&dir.join("records.jsonl"));
        for at in [i.max(j), i.min(j)] {
            l.remove(at);
        }
        write_lines(&dir.join("records.jsonl"), &l);
    };

    // Without --with-gaps the removal is invisible: the bundle cannot prove completeness.
    let plain = a.dir.path().join("plain");
    evidence(&a, &clean, &["--db", path_str(&a.db)], &plain, &[]);
    leave_out(&plain);
    let (c, json, _) = check(&plain, &a.verifier, &[]);
    assert_eq!(c, 1, "the page no longer matches the records: {json}");
    assert_eq!(json["proven"]["all"], true, "{json}");
    assert!(
        json["renderings"][0]
            .as_str()
            .unwrap()
            .contains("not what these records render"),
        "{json}"
    );
    rerender(&plain, &a.verifier);
    let (c, json, _) = check(&plain, &a.verifier, &[]);
    assert_eq!(c, 0, "no transition breaks, as the README says: {json}");
    // Unless the gaps are insisted on.
    let (c, json, _) = check(&plain, &a.verifier, &["--with-gaps"]);
    assert_eq!(c, 1, "{json}");

    // With the gaps it is named.
    let cut = a.dir.path().join("cut");
    copy_tree(&good, &cut);
    leave_out(&cut);
    let (c, json, _) = check(&cut, &a.verifier, &[]);
    assert_eq!(c, 1, "{json}");
    assert!(json.to_string().contains(&format!("seq {seq}..={seq}")), "{json}");

    // Passed off as another run's event (its seq in gaps.txt, its entry in
    // the tiles): the bundle checks, until the event is revealed.
    let passed_off = a.dir.path().join("passed-off");
    copy_tree(&cut, &passed_off);
    let mut others: std::collections::BTreeSet<u64> = lines(&passed_off.join("gaps.txt"))
        .iter()
        .flat_map(|l| {
            let (lo, hi) = l.split_once('-').unwrap_or((l, l));
            lo.parse::<u64>().unwrap()..=hi.parse::<u64>().unwrap()
        })
        .collect();
    let gave = others.clone();
    others.extend([seq, seq_of(&records[j])]);
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    for s in others {
        match ranges.last_mut() {
            Some((_, b)) if *b + 1 == s => *b = s,
            _ => ranges.push((s, s)),
        }
    }
    let g: Vec<String> = ranges
        .iter()
        .map(|(a, b)| if a == b { a.to_string() } else { format!("{a}-{b}") })
        .collect();
    write_lines(&passed_off.join("gaps.txt"), &g);
    rerender(&passed_off, &a.verifier);
    let (c, json, _) = check(&passed_off, &a.verifier, &["--with-gaps"]);
    assert_eq!(c, 0, "the hash stands in for the event: {json}");
    let (c, json, _) = check(
        &passed_off,
        &a.verifier,
        &["--reveal", &seq.to_string(), "--record", line],
    );
    assert_eq!(c, 1, "{json}");
    assert_eq!(json["reveal"]["withheld"], true, "{json}");
    // The revealed event is the run's again: the run check counts it.
    let events = |j: &Value| j["summary"]["events"].as_u64().unwrap();
    let (_, hidden, _) = check(&passed_off, &a.verifier, &["--with-gaps"]);
    assert_eq!(events(&json), events(&hidden) + 1, "{json}");
    let text = run(&[
        "check-evidence",
        path_str(&passed_off),
        "--trusted-key",
        &a.verifier,
        "--reveal",
        &seq.to_string(),
        "--record",
        line,
    ]);
    assert!(stdout(&text).contains("withheld"), "{}", stdout(&text));
    // Revealing another run's event at a gap clears it.
    let other: String = lines(&a.dir.path().join("events.jsonl"))
        .into_iter()
        .find(|l| {
            let s = seq_of(l);
            gave.contains(&s) && s != seq
        })
        .unwrap();
    let (c, json, _) = check(
        &good,
        &a.verifier,
        &["--reveal", &seq_of(&other).to_string(), "--record", &other],
    );
    assert_eq!(c, 0, "{json}");
    assert_eq!(json["reveal"]["withheld"], false, "{json}");
    // A record that is not the entry there is refused.
    let mut fake: Value = serde_json::from_str(&other).unwrap();
    fake["payload_json"] = Value::String("{}".into());
    let (c, _, out) = check(
        &good,
        &a.verifier,
        &["--reveal", &seq_of(&other).to_string(), "--record", &fake.to_string()],
    );
    assert_eq!(c, 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("is not the event at seq"), "{}", stderr(&out));

    // The run cut at either end (its creation, or its last event): the range
    // runs from the run's creation to the checkpoint, so both are missed.
    for (name, cut) in [("head", 0usize), ("tail", records.len() - 1)] {
        let dir = a.dir.path().join(format!("cut-{name}"));
        copy_tree(&good, &dir);
        let mut l = lines(&dir.join("records.jsonl"));
        l.remove(cut);
        write_lines(&dir.join("records.jsonl"), &l);
        let (c, json, _) = check(&dir, &a.verifier, &["--with-gaps"]);
        assert_eq!(c, 1, "{name}: {json}");
        assert!(kinds(&json, "not_proven").contains(&"gap".to_owned()), "{name}: {json}");
    }
}

fn runs_of_clean(db: &Path) -> (Value, String) {
    let out = run(&["runs", "--db", path_str(db), "--json"]);
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let clean = json["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| {
            r["findings"] == 0
                && r["status"] == "finished"
                && r["last_seq"].as_u64().unwrap() - r["first_seq"].as_u64().unwrap()
                    > 2 * r["events"].as_u64().unwrap()
        })
        .expect("a clean run interleaved with others")["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    (json, clean)
}

/// Witnesses: the bundle uses a checkpoint the quorum cosigned, and
/// stripping the cosignatures fails it under the quorum.
#[test]
fn cosignatures_stripped_under_a_quorum_are_named() {
    let a = Anchored::generated(1500, ORIGIN, &["--inject", "unknown-outcome@600"]);
    let w = Witness::new("test.example/ev", Some((ORIGIN, &a.verifier)));
    export(&a, &["--witness", &w.spec(), "--witness-quorum", "1"]);
    let (faulty, _) = runs_of(&a.db, "unknown-outcome");
    let bundle = a.dir.path().join("cosigned");
    let quorum = ["--witness-key", &w.vkey, "--witness-quorum", "1"];
    let written = evidence(&a, &faulty, &["--db", path_str(&a.db)], &bundle, &quorum);
    assert_eq!(written["checkpoint"]["witnesses"][0], "test.example/ev", "{written}");
    let (c, json, _) = check(&bundle, &a.verifier, &quorum);
    assert_eq!((c, &json["proven"]["all"]), (1, &Value::Bool(true)), "{json}");
    let stripped = a.dir.path().join("stripped");
    copy_tree(&bundle, &stripped);
    let strip = |text: &str| -> String {
        text.lines()
            .filter(|l| !l.starts_with("— test.example/ev "))
            .map(|l| format!("{l}\n"))
            .collect()
    };
    for entry in walk(&stripped) {
        if entry.ends_with("checkpoint") || entry.extension().is_some_and(|e| e == "proof") {
            let text = std::fs::read_to_string(&entry).unwrap();
            assert!(text.contains("— test.example/ev "), "{}", entry.display());
            std::fs::write(&entry, strip(&text)).unwrap();
        }
    }
    let (c, json, _) = check(&stripped, &a.verifier, &quorum);
    assert_eq!(c, 1, "{json}");
    assert!(kinds(&json, "not_proven").contains(&"uncosigned".to_owned()), "{json}");
    // Without the quorum asked for, the same bundle proves its records.
    let (_, json, _) = check(&stripped, &a.verifier, &[]);
    assert_eq!(json["proven"]["all"], true, "{json}");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// The report loaded in a real headless Chromium: no request but the page
/// itself, every event's seq and proof status on it, a screenshot kept
/// (target/test-artifacts/), and the page printed to PDF.
#[test]
fn the_report_loads_in_a_real_browser_with_no_request_and_prints() {
    let a = Anchored::generated(3000, ORIGIN, &["--inject", "unknown-outcome@1000"]);
    export(&a, &[]);
    let (faulty, _) = runs_of(&a.db, "unknown-outcome");
    let bundle = a.dir.path().join("b");
    evidence(&a, &faulty, &["--db", path_str(&a.db)], &bundle, &[]);
    let artifacts = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    let shot = artifacts.join("evidence-report.png");
    let pdf = a.dir.path().join("report.pdf");
    let page = browse(&bundle.join("report.html"), &shot, &pdf);
    let requests: Vec<&str> = page["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    assert_eq!(
        requests,
        vec![page["url"].as_str().unwrap()],
        "only the page itself is loaded"
    );
    assert_eq!(page["scripts"], 0, "no script");
    let rows = page["rows"].as_array().unwrap();
    let records = lines(&bundle.join("records.jsonl"));
    assert_eq!(rows.len(), records.len(), "a row per event");
    for (row, line) in rows.iter().zip(&records) {
        assert_eq!(row["seq"].as_u64(), Some(seq_of(line)));
        assert_eq!(row["proof"], "proven", "{row}");
    }
    let text = page["text"].as_str().unwrap();
    assert!(text.contains("unknown-outcome") && text.contains("reconcile"), "{text}");
    assert!(
        rows.iter()
            .any(|r| r["classes"].as_str().unwrap().contains("reconcile"))
    );
    assert!(std::fs::metadata(&shot).unwrap().len() > 10_000, "a screenshot");
    let printed = std::fs::read(&pdf).unwrap();
    assert!(printed.starts_with(b"%PDF") && printed.len() > 10_000, "printed to PDF");

    // The request check can fail: a page with an external image is caught,
    // and a record whose proof fails shows as not proven.
    let planted = a.dir.path().join("planted.html");
    let html = std::fs::read_to_string(bundle.join("report.html")).unwrap();
    std::fs::write(
        &planted,
        html.replace("</body>", "<img src=\"http://127.0.0.1:9/x.png\"></body>"),
    )
    .unwrap();
    let page = browse(&planted, &a.dir.path().join("p.png"), &a.dir.path().join("p.pdf"));
    assert!(page["requests"].as_array().unwrap().len() > 1, "{}", page["requests"]);
}

fn browse(html: &Path, shot: &Path, pdf: &Path) -> Value {
    let var =
        |name: &str| std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set: run through ./scripts/test"));
    let out = Command::new(var("CHAINSHIP_TEST_NODE"))
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/browser/report.mjs"))
        .args([var("CHAINSHIP_TEST_PLAYWRIGHT"), var("CHAINSHIP_TEST_CHROMIUM")])
        .args([html, shot, pdf])
        .output()
        .unwrap();
    assert!(out.status.success(), "the browser: {}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// What cannot be proven yet is refused, with the reason, and nothing is written.
#[test]
fn a_run_not_covered_or_not_proven_writes_nothing() {
    let a = Anchored::generated(1200, ORIGIN, &[]);
    export(&a, &[]);
    let (_, clean) = runs_of_clean(&a.db);
    // Events of every run after the checkpoint: the newest run is not covered yet.
    append(&a.db, 400);
    let out = run(&["runs", "--db", path_str(&a.db), "--json"]);
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let newest = json["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["first_seq"].as_u64().unwrap() < 1200 && r["last_seq"].as_u64().unwrap() > 1200)
        .map(|r| r["run_id"].as_str().unwrap().to_owned())
        .next()
        .expect("a run across the checkpoint");
    let out_dir = a.dir.path().join("later");
    let done = evidence_cmd(&a, &newest, &["--db", path_str(&a.db)], &out_dir, &[])
        .output()
        .unwrap();
    assert_eq!(code(&done), 2, "{}", stderr(&done));
    assert!(stderr(&done).contains("after checkpoint 1200"), "{}", stderr(&done));
    assert!(!out_dir.exists());
    // An unknown run: nothing to prove.
    let done = evidence_cmd(&a, "run_nope", &["--db", path_str(&a.db)], &out_dir, &[])
        .output()
        .unwrap();
    assert_eq!(code(&done), 2, "{}", stderr(&done));
    assert!(!out_dir.exists());
    // A database altered since it was anchored, in the run or beside it (an
    // event moved to another run would be handed out as that run's hash):
    // refused, naming the seq, nothing written.
    let (first,): (i64,) = tamper(&a.db)
        .query_row("SELECT MIN(seq) FROM events WHERE run_id = ?1", [&clean], |r| {
            Ok((r.get(0)?,))
        })
        .unwrap();
    let (other,): (i64,) = tamper(&a.db)
        .query_row(
            "SELECT MIN(seq) FROM events WHERE run_id <> ?1 AND seq > ?2",
            rusqlite::params![&clean, first],
            |r| Ok((r.get(0)?,)),
        )
        .unwrap();
    tamper(&a.db)
        .execute("UPDATE events SET run_id = 'run_elsewhere' WHERE seq = ?1", [other])
        .unwrap();
    let done = evidence_cmd(&a, &clean, &["--db", path_str(&a.db)], &out_dir, &["--with-gaps"])
        .output()
        .unwrap();
    assert_eq!(code(&done), 1, "{}{}", stdout(&done), stderr(&done));
    assert!(
        stderr(&done).contains(&format!("seq {other}: its fields do not hash")),
        "{}",
        stderr(&done)
    );
    tamper(&a.db)
        .execute("DELETE FROM events WHERE seq = ?1", [other])
        .unwrap();
    // Another run's event deleted: only a walk of the log sees it.
    let done = evidence_cmd(&a, &clean, &["--db", path_str(&a.db)], &out_dir, &["--walk"])
        .output()
        .unwrap();
    assert_eq!(code(&done), 1, "{}{}", stdout(&done), stderr(&done));
    assert!(
        stderr(&done).contains(&format!("seqs {other}..={other} are missing")),
        "{}",
        stderr(&done)
    );
    assert!(!out_dir.exists(), "nothing written");
    assert!(
        std::fs::read_dir(a.dir.path()).unwrap().all(|e| !e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .contains(".partial")),
        "no partial left"
    );
}

/// Ctrl-C or SIGTERM while a bundle is being written leaves nothing behind:
/// not the partial directory, not a partial tar, not `--out`. The signal is
/// sent at growing delays until one lands mid-write (exit 130), so the
/// test fails if none ever does.
#[test]
fn an_interrupted_evidence_leaves_nothing_behind() {
    let a = Anchored::generated(0, ORIGIN, &[]);
    // One run of 6,000 events: thousands of proofs to write.
    {
        let conn = tamper(&a.db);
        let mut prev = String::new();
        let tx = conn.unchecked_transaction().unwrap();
        for seq in 1..=6000u64 {
            let (run, kind) = match seq {
                1 => ("run_long", "run.created"),
                6000 => ("run_after", "run.created"),
                _ => ("run_long", "agent.note"),
            };
            let at = format!("2026-12-02T10:{:02}:{:02}.000Z", (seq / 60) % 60, seq % 60);
            let hash = chainship_chain::event_hash(
                prev.as_bytes(),
                seq,
                run.as_bytes(),
                b"",
                at.as_bytes(),
                kind.as_bytes(),
                b"{}",
            );
            let hash = String::from_utf8(hash.to_vec()).unwrap();
            tx.execute(
                "INSERT INTO events (seq, run_id, step_id, at, type, payload_json, hash) VALUES (?1, ?2, '', ?3, ?4, '{}', ?5)",
                rusqlite::params![seq as i64, run, at, kind, hash],
            )
            .unwrap();
            prev = hash;
        }
        tx.commit().unwrap();
    }
    export(&a, &[]);
    let mut interrupted = 0;
    for (i, delay_ms) in [50u64, 150, 300, 500, 800, 1200, 1800, 2500].into_iter().enumerate() {
        let out = a.dir.path().join(format!("b{i}.tar"));
        let mut child = KillOnDrop(
            evidence_cmd(&a, "run_long", &["--db", path_str(&a.db)], &out, &["--with-gaps"])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap(),
        );
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        signal(&child, SIGTERM);
        let status = wait_with_limit(&mut child, std::time::Duration::from_secs(60));
        let left: Vec<String> = std::fs::read_dir(a.dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".partial") || n.contains(".writing"))
            .collect();
        assert!(left.is_empty(), "after {delay_ms} ms: {left:?} ({status:?})");
        match status.code() {
            Some(130) => {
                interrupted += 1;
                assert!(!out.exists(), "an interrupted bundle is not placed");
            }
            Some(0) => assert!(out.exists()),
            // Killed by the signal before the bundle was begun: nothing was written.
            None => assert!(!out.exists()),
            other => panic!("after {delay_ms} ms: exit {other:?}"),
        }
    }
    assert!(interrupted > 0, "no signal landed while the bundle was written");
}

/// Issue 47: evidence from a copy that is not evidence answers with the
/// copy's verdict (its findings at their seqs, as verify-export names
/// them), exit 1, and writes nothing; it stopped with one line of error.
#[test]
fn evidence_from_a_damaged_copy_is_the_copy_s_verdict_and_writes_nothing() {
    let a = Anchored::generated(3000, ORIGIN, &["--inject", "unknown-outcome@1000"]);
    export(&a, &[]);
    let (faulty, _) = runs_of(&a.db, "unknown-outcome");
    let lines = lines(&a.dir.path().join("events.jsonl"));
    let mut damaged = lines.clone();
    damaged[1499] = damaged[1499].replacen("\"at\":\"", "\"at\":\"1", 1); // seq 1500
    let copy = a.dir.path().join("damaged.jsonl");
    std::fs::write(&copy, damaged.join("\n") + "\n").unwrap();
    let from = format!("file:{}", path_str(&copy));
    let bundle = a.dir.path().join("from-damaged");
    let out = evidence_cmd(&a, &faulty, &["--from", &from], &bundle, &[])
        .output()
        .unwrap();
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["status"], "failed", "{json}");
    let kinds: Vec<(String, u64)> = json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["kind"].as_str().unwrap().to_owned(), f["seq"].as_u64().unwrap_or(0)))
        .collect();
    assert!(kinds.contains(&("altered".to_owned(), 1500)), "{json}");
    assert!(!bundle.exists(), "no bundle: {json}");
    let exported = run(&[
        "verify-export",
        "--from",
        &from,
        "--anchor",
        &a.anchor_url(),
        "--trusted-key",
        &a.verifier,
        "--json",
    ]);
    let exported: Value = serde_json::from_slice(&exported.stdout).unwrap();
    assert_eq!(
        json["findings"], exported["findings"],
        "the same verdict as verify-export"
    );
    assert_eq!(json["invalid_ranges"], exported["invalid_ranges"]);
}

/// Evidence from a database reads the run's own rows and the checkpoint's
/// newest, and the store's tiles prove them (issue 52): the same bundle as
/// a walk of the whole log, refused as the walk refuses it for anything
/// done to the run's own events, and a walk (`--walk`) kept for what only
/// it sees: damage elsewhere, an event of the run deleted with its seq.
#[test]
fn evidence_from_the_run_s_own_rows_is_the_walk_s_bundle_and_refuses_the_same_forgeries() {
    let a = Anchored::generated(1200, ORIGIN, &[]);
    export(&a, &[]);
    let (_, clean) = runs_of_clean(&a.db);
    let db = path_str(&a.db).to_owned();
    let files = |dir: &Path| -> Vec<(String, Vec<u8>)> {
        let mut all: Vec<(String, Vec<u8>)> = walk(dir)
            .into_iter()
            .map(|p| {
                (
                    p.strip_prefix(dir).unwrap().display().to_string(),
                    std::fs::read(&p).unwrap(),
                )
            })
            .collect();
        all.sort();
        all
    };
    let fast = a.dir.path().join("fast");
    let walked = a.dir.path().join("walked");
    evidence(&a, &clean, &["--db", &db], &fast, &[]);
    evidence(&a, &clean, &["--db", &db], &walked, &["--walk"]);
    let (fast_files, walked_files) = (files(&fast), files(&walked));
    // The database as anchored, put back after each forgery.
    let kept = a.dir.path().join("kept.db");
    std::fs::copy(&a.db, &kept).unwrap();
    assert!(fast_files.iter().filter(|(n, _)| n.starts_with("tile/0/")).count() >= 2);
    assert!(
        fast_files == walked_files,
        "the run's rows and the walk make the same bundle"
    );

    let seqs = |sql: &str| -> Vec<i64> {
        tamper(&a.db)
            .prepare(sql)
            .unwrap()
            .query_map([&clean], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    let run_seqs = seqs("SELECT seq FROM events WHERE run_id = ?1 ORDER BY seq");
    // Another run's event past the run's stretch of the log (its last event
    // and the row after it), before the checkpoint.
    let past = run_seqs.last().unwrap() + 1;
    let other = seqs("SELECT seq FROM events WHERE run_id <> ?1 ORDER BY seq")
        .into_iter()
        .find(|s| *s > past && *s < 1200)
        .expect("another run's event past the run's stretch");
    let original: String = tamper(&a.db)
        .query_row("SELECT payload_json FROM events WHERE seq = ?1", [other], |r| r.get(0))
        .unwrap();
    tamper(&a.db)
        .execute(
            "UPDATE events SET payload_json = '{\"edited\":1}' WHERE seq = ?1",
            [other],
        )
        .unwrap();
    let out = a.dir.path().join("out");
    let refused = |extra: &[&str], says: &str| {
        let done = evidence_cmd(&a, &clean, &["--db", &db], &out, extra).output().unwrap();
        assert_eq!(code(&done), 1, "{extra:?}: {}{}", stdout(&done), stderr(&done));
        assert!(
            stderr(&done).contains(says) || stdout(&done).contains(says),
            "{extra:?}: {}{}",
            stdout(&done),
            stderr(&done)
        );
        assert!(!out.exists(), "nothing written");
    };
    refused(&["--walk"], &format!("seq {other}: its fields do not hash"));
    let beside = a.dir.path().join("beside");
    evidence(&a, &clean, &["--db", &db], &beside, &[]);
    assert!(
        files(&beside) == fast_files,
        "the run's bundle does not depend on an event past its stretch"
    );
    // Inside the stretch (the row after the run's last): refused either way.
    tamper(&a.db)
        .execute(
            "UPDATE events SET payload_json = payload_json || ' ' WHERE seq = ?1",
            [past],
        )
        .unwrap();
    for extra in [&[][..], &["--walk"][..]] {
        refused(extra, &format!("seq {past}: its fields do not hash"));
    }
    tamper(&a.db)
        .execute(
            "UPDATE events SET payload_json = substr(payload_json, 1, length(payload_json) - 1) WHERE seq = ?1",
            [past],
        )
        .unwrap();
    tamper(&a.db)
        .execute(
            "UPDATE events SET payload_json = ?2 WHERE seq = ?1",
            rusqlite::params![other, original],
        )
        .unwrap();

    // The run's own event edited: refused both ways, naming it.
    let mid = run_seqs[run_seqs.len() / 2];
    let prev: String = tamper(&a.db)
        .query_row("SELECT hash FROM events WHERE seq = ?1 - 1", [mid], |r| r.get(0))
        .unwrap();
    tamper(&a.db)
        .execute(
            "UPDATE events SET payload_json = '{\"forged\":true}' WHERE seq = ?1",
            [mid],
        )
        .unwrap();
    for extra in [&[][..], &["--walk"][..]] {
        refused(extra, &format!("seq {mid}: its fields do not hash"));
    }
    // ... and rewritten with a hash that fits the forged content: the next
    // row no longer links to it, both ways.
    let rehash = |seq: i64, prev: &str| -> String {
        let (run, step, at, kind, payload): (String, String, String, String, String) = tamper(&a.db)
            .query_row(
                "SELECT run_id, step_id, at, type, payload_json FROM events WHERE seq = ?1",
                [seq],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
            )
            .unwrap();
        let hash = chainship_chain::event_hash(
            prev.as_bytes(),
            seq as u64,
            run.as_bytes(),
            step.as_bytes(),
            at.as_bytes(),
            kind.as_bytes(),
            payload.as_bytes(),
        );
        let hash = String::from_utf8(hash.to_vec()).unwrap();
        tamper(&a.db)
            .execute(
                "UPDATE events SET hash = ?2 WHERE seq = ?1",
                rusqlite::params![seq, hash],
            )
            .unwrap();
        hash
    };
    let mut forged = rehash(mid, &prev);
    for extra in [&[][..], &["--walk"][..]] {
        refused(extra, &format!("seq {}: its fields do not hash", mid + 1));
    }
    // ... and every hash after it recomputed, as a forger rewriting the
    // tail would: the chain holds, but the tiles do not hold the forged
    // hashes at their seqs, so the proofs fail.
    let top: i64 = tamper(&a.db)
        .query_row("SELECT max(seq) FROM events", [], |r| r.get(0))
        .unwrap();
    for seq in mid + 1..=top {
        forged = rehash(seq, &forged);
    }
    let done = evidence_cmd(&a, &clean, &["--db", &db], &out, &[]).output().unwrap();
    assert_eq!(code(&done), 1, "{}{}", stdout(&done), stderr(&done));
    let json: Value = serde_json::from_slice(&done.stdout).unwrap_or(Value::Null);
    assert!(
        json.to_string().contains(&format!("{mid}")),
        "the forged seq is named: {json}"
    );
    assert!(!out.exists(), "nothing written");
    std::fs::copy(&kept, &a.db).unwrap();
    evidence(&a, &clean, &["--db", &db], &a.dir.path().join("mended"), &[]);

    // The event just before one of the run's deleted: refused both ways.
    let before = run_seqs[1] - 1;
    tamper(&a.db)
        .execute("DELETE FROM events WHERE seq = ?1", [before])
        .unwrap();
    for extra in [&[][..], &["--walk"][..]] {
        refused(extra, &format!("seqs {before}..={before} are missing"));
    }
    std::fs::copy(&kept, &a.db).unwrap();

    // Within the run's stretch of the log, an event of the run relabelled to
    // another run, or deleted with its seq, between other runs' events:
    // every event of the stretch is hashed and linked, so both are refused
    // (found by an attack round: the run's rows alone did not show them).
    let lone = run_seqs[1..run_seqs.len() - 1]
        .iter()
        .copied()
        .find(|s| !run_seqs.contains(&(s + 1)) && !run_seqs.contains(&(s - 1)))
        .expect("an event of the run between other runs' events");
    tamper(&a.db)
        .execute("UPDATE events SET run_id = 'run_elsewhere' WHERE seq = ?1", [lone])
        .unwrap();
    refused(&[], &format!("seq {lone}: its fields do not hash"));
    std::fs::copy(&kept, &a.db).unwrap();
    tamper(&a.db)
        .execute("DELETE FROM events WHERE seq = ?1", [lone])
        .unwrap();
    refused(&[], &format!("seqs {lone}..={lone} are missing"));
    refused(&["--walk"], &format!("seqs {lone}..={lone} are missing"));
    std::fs::copy(&kept, &a.db).unwrap();

    // An index that lies (rebuilt to leave out one of the run's rows, its
    // text in the schema made to look like agentrt's): the row is still in
    // the table, inside the stretch, and is named (an attack round's find).
    tamper(&a.db)
        .execute_batch(&format!(
            "DROP INDEX events_run; CREATE INDEX events_run ON events(run_id, seq) WHERE seq <> {lone};
             PRAGMA writable_schema = ON;
             UPDATE sqlite_schema SET sql = 'CREATE INDEX events_run ON events(run_id, seq)' WHERE name = 'events_run';"
        ))
        .unwrap();
    refused(
        &[],
        &format!("seq {lone}: an event of the run that the database's run index does not return"),
    );
    let walked_anyway = a.dir.path().join("walked-anyway");
    evidence(&a, &clean, &["--db", &db], &walked_anyway, &["--walk"]);
    assert!(files(&walked_anyway) == fast_files, "the walk reads without the index");
    std::fs::copy(&kept, &a.db).unwrap();

    // A seq held twice (a table rebuilt without its key, an altered copy of a
    // row of the run after the genuine one): refused both ways, as verify does.
    tamper(&a.db)
        .execute_batch(&format!(
            "BEGIN; CREATE TABLE e2 (seq INTEGER, run_id TEXT, step_id TEXT, at TEXT, type TEXT, payload_json TEXT, hash TEXT);
             INSERT INTO e2 SELECT * FROM events; DROP TABLE events; ALTER TABLE e2 RENAME TO events;
             CREATE INDEX events_run ON events(run_id, seq);
             INSERT INTO events SELECT seq, run_id, step_id, at, type, payload_json || ' ', hash FROM events WHERE seq = {mid};
             COMMIT;"
        ))
        .unwrap();
    for extra in [&[][..], &["--walk"][..]] {
        refused(extra, &format!("seq {mid}: the database holds it twice"));
    }
    std::fs::copy(&kept, &a.db).unwrap();

    // The run's tail deleted with its seqs (its events from the last one
    // that stands apart from the event before it): past the run's stretch
    // as it then reads (its last remaining event and the row after). The
    // walk refuses; the run's rows cannot show it (documented: without
    // --with-gaps, which walks, a bundle makes no claim to hold every event
    // of the run, and the run check judges what is left).
    let cut = (1..run_seqs.len())
        .rev()
        .find(|k| run_seqs[*k] > run_seqs[k - 1] + 1)
        .expect("an event of the run apart from the one before it");
    let tail = &run_seqs[cut..];
    for seq in tail {
        tamper(&a.db)
            .execute("DELETE FROM events WHERE seq = ?1", [seq])
            .unwrap();
    }
    let first_gone = tail[0];
    refused(&["--walk"], &format!("seqs {first_gone}..={first_gone} are missing"));
    refused(
        &["--with-gaps"],
        &format!("seqs {first_gone}..={first_gone} are missing"),
    );
    let without = a.dir.path().join("without");
    let done = evidence_cmd(&a, &clean, &["--db", &db], &without, &[])
        .output()
        .unwrap();
    assert_eq!(code(&done), 0, "{}", stderr(&done));
    let records = std::fs::read_to_string(without.join("records.jsonl")).unwrap();
    assert_eq!(records.lines().count(), cut, "{}", stderr(&done));
}
