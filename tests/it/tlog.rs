//! The transparency log beside the heads (RFC 6962 tree, C2SP checkpoints,
//! tiles and proofs), checked with an independent implementation: the
//! `aics-tlog` tool the test script installs builds the tiles from the
//! database's hashes on its own and verifies our checkpoints, tiles and
//! proofs. Never only our own code.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;
use serde_json::Value;

const ORIGIN: &str = "tlog/agentrt";

fn follow_once(a: &Anchored, extra: &[&str]) -> std::process::Output {
    let cursor = a.dir.path().join("cursor");
    let sink = format!("file:{}", path_str(&a.dir.path().join("events.jsonl")));
    let mut cmd = bin();
    cmd.args([
        "follow",
        "--once",
        "--from-start",
        "--db",
        path_str(&a.db),
        "--origin",
        ORIGIN,
        "--sink",
        &sink,
        "--cursor",
        &format!("file:{}", path_str(&cursor)),
        "--anchor",
        &a.anchor_url(),
        "--signing-key",
        path_str(&a.key),
    ])
    .args(extra)
    // What the tree builder says it did (resumed or rebuilt).
    .env("RUST_LOG", "warn,chainship_follower::tree_log=info");
    cmd.output().unwrap()
}

/// The log's directory in a file store: `<store>/<origin>`.
fn log_dir(a: &Anchored) -> PathBuf {
    a.anchors.join(ORIGIN)
}

/// Every file under `dir`, relative, sorted.
fn files_under(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            // A writer's temp file (one killed mid-write leaves it) is no object.
            if p.file_name().unwrap().to_string_lossy().starts_with('.') {
                continue;
            }
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                out.push(p.strip_prefix(root).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// aics-tlog builds the tiles from the database's hashes on its own: every
/// tile and bundle it writes must be in our store byte for byte, and each of
/// our partial tiles must be the prefix of its tile at the final size (a
/// partial tile never disagrees with the tree).
fn assert_tiles_match_an_independent_build(a: &Anchored) {
    let leaves = a.dir.path().join("leaves.txt");
    hashes_file(&a.db, &leaves);
    let reference = a.dir.path().join("reference-tiles");
    let _ = std::fs::remove_dir_all(&reference);
    let built = aics(aics_tlog().args([
        "build-tiles",
        "--leaves",
        path_str(&leaves),
        "--out",
        path_str(&reference),
    ]));
    assert_eq!(built["ok"], true, "{built}");
    let ours = log_dir(a);
    let theirs = files_under(&reference.join("tile"));
    assert!(!theirs.is_empty());
    for name in &theirs {
        let want = std::fs::read(reference.join("tile").join(name)).unwrap();
        let got = std::fs::read(ours.join("tile").join(name)).unwrap_or_else(|_| panic!("our store lacks tile/{name}"));
        assert!(got == want, "tile/{name} differs from aics-tlog's");
    }
    for name in files_under(&ours.join("tile")) {
        let Some((base, _width)) = name.split_once(".p/") else {
            assert!(
                theirs.contains(&name),
                "our full tile/{name} is not in aics-tlog's tree"
            );
            continue;
        };
        let got = std::fs::read(ours.join("tile").join(&name)).unwrap();
        let full = reference.join("tile").join(base);
        let final_partial = theirs.iter().find(|t| t.starts_with(&format!("{base}.p/")));
        let whole = match (full.exists(), final_partial) {
            (true, _) => std::fs::read(full).unwrap(),
            (false, Some(p)) => std::fs::read(reference.join("tile").join(p)).unwrap(),
            (false, None) => panic!("our partial tile/{name} has no tile in aics-tlog's tree"),
        };
        assert!(
            whole.starts_with(&got),
            "partial tile/{name} is not a prefix of its tile"
        );
    }
    assert_eq!(built["root"], checkpoint_root(&ours.join("checkpoint")), "same root");
}

fn checkpoint_root(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    Value::String(text.lines().nth(2).unwrap().to_owned())
}

fn prove(a: &Anchored, seq: u64, extra: &[&str]) -> std::process::Output {
    let mut cmd = bin();
    cmd.args([
        "prove",
        "--anchor",
        &a.anchor_url(),
        "--origin",
        ORIGIN,
        "--seq",
        &seq.to_string(),
    ])
    .args(extra);
    cmd.output().unwrap()
}

fn check_proof(proof: &Path, record: &str, key: &str) -> std::process::Output {
    run(&[
        "check-proof",
        "--proof",
        path_str(proof),
        "--record",
        record,
        "--trusted-key",
        key,
    ])
}

#[test]
fn checkpoints_tiles_and_proofs_agree_with_an_independent_implementation() {
    let a = Anchored::new(2_000, ORIGIN);
    let out = follow_once(&a, &["--batch-size", "300"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let log = log_dir(&a);
    let kept = files_under(&log.join("checkpoints"));
    let heads = std::fs::read_dir(&log)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "head"))
        .count();
    assert_eq!(heads, kept.len(), "a checkpoint with every head: {kept:?}");
    assert!(kept.len() >= 2, "{kept:?}");
    assert!(kept.last().unwrap().ends_with("2000"), "{kept:?}");

    assert_tiles_match_an_independent_build(&a);
    let verified = aics(aics_tlog().args([
        "verify-checkpoint",
        "--tiles",
        path_str(&log),
        "--log-key",
        &a.verifier,
        "--origin",
        ORIGIN,
    ]));
    assert_eq!(
        (verified["ok"].clone(), verified["size"].clone()),
        (Value::Bool(true), 2000.into()),
        "{verified}"
    );
    for name in &kept {
        let old = log.join("checkpoints").join(name);
        let consistent = aics(aics_tlog().args([
            "verify-consistency",
            "--tiles",
            path_str(&log),
            "--old-checkpoint",
            path_str(&old),
            "--log-key",
            &a.verifier,
        ]));
        assert_eq!(consistent["ok"], true, "{name}: {consistent}");
    }

    // Proofs at the first and last entries, around tile boundaries and
    // powers of two, and inside the last (partial) tile.
    let records = a.lines();
    let (_, other_key) = keygen(a.dir.path(), "someone/else", "other.key");
    for seq in [1u64, 2, 255, 256, 257, 512, 1024, 1025, 1793, 1999, 2000] {
        let out = prove(&a, seq, &[]);
        assert_eq!(code(&out), 0, "prove {seq}: {}", stderr(&out));
        let proof_text = stdout(&out);
        assert!(proof_text.starts_with(&format!("c2sp.org/tlog-proof@v1\nindex {}\n", seq - 1)));
        assert!(proof_text.len() < 1200, "a few hundred bytes: {}", proof_text.len());
        let proof = a.dir.path().join(format!("{seq}.tlog-proof"));
        std::fs::write(&proof, &proof_text).unwrap();
        let record = &records[seq as usize - 1];

        let ok = check_proof(&proof, record, &a.verifier);
        assert_eq!(code(&ok), 0, "check-proof {seq}: {}{}", stdout(&ok), stderr(&ok));
        // Any field changed fails, naming the seq.
        for field in ["payload_json", "at", "run_id", "prev_hash"] {
            let mut v: Value = serde_json::from_str(record).unwrap();
            let changed = match field {
                "prev_hash" => "0".repeat(64),
                _ => format!("{} ", v[field].as_str().unwrap()),
            };
            v[field] = Value::String(changed);
            let bad = check_proof(&proof, &v.to_string(), &a.verifier);
            assert_eq!(code(&bad), 1, "{field} changed at {seq}: {}", stdout(&bad));
            assert!(
                stdout(&bad).contains(&format!("not proven: seq {seq}")),
                "{}",
                stdout(&bad)
            );
        }
        // Another event's record with this proof fails.
        let other = &records[(seq as usize) % records.len()];
        assert_eq!(
            code(&check_proof(&proof, other, &a.verifier)),
            1,
            "another record at {seq}"
        );
        // A key the auditor does not trust proves nothing.
        let untrusted = check_proof(&proof, record, &other_key);
        assert_eq!(code(&untrusted), 1);
        assert!(stdout(&untrusted).contains("untrusted-key"), "{}", stdout(&untrusted));

        // aics-tlog agrees, from the proof's own hashes and checkpoint.
        let (hashes, note, index) = split_proof(a.dir.path(), &proof_text);
        let leaf = a.dir.path().join("leaf.bin");
        let hash: Value = serde_json::from_str(record).unwrap();
        std::fs::write(&leaf, hash["hash"].as_str().unwrap()).unwrap();
        let mut verify = aics_tlog();
        verify.args([
            "verify-inclusion",
            "--index",
            &index.to_string(),
            "--proof",
            path_str(&hashes),
        ]);
        verify.args([
            "--checkpoint",
            path_str(&note),
            "--log-key",
            &a.verifier,
            "--leaf",
            path_str(&leaf),
        ]);
        let theirs = aics(&mut verify);
        assert_eq!(theirs["ok"], true, "aics-tlog on seq {seq}: {theirs}");
        let mut wrong_key = aics_tlog();
        wrong_key.args([
            "verify-inclusion",
            "--index",
            &index.to_string(),
            "--proof",
            path_str(&hashes),
        ]);
        wrong_key.args([
            "--checkpoint",
            path_str(&note),
            "--log-key",
            &other_key,
            "--leaf",
            path_str(&leaf),
        ]);
        assert_ne!(aics(&mut wrong_key)["ok"], true, "aics-tlog refuses another key");
    }

    // Against an older checkpoint, and past it.
    let first: u64 = kept[0].parse().unwrap();
    let out = prove(
        &a,
        first,
        &["--checkpoint", &first.to_string(), "--trusted-key", &a.verifier],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout(&out).contains(&format!("\n\n{ORIGIN}\n{first}\n")),
        "{}",
        stdout(&out)
    );
    let past = prove(&a, first + 1, &["--checkpoint", &first.to_string()]);
    assert_eq!(code(&past), 2, "{}", stderr(&past));
    assert!(
        stderr(&past).contains(&format!("seq {}: beyond checkpoint {first}", first + 1))
            && stderr(&past).contains("(--seq)"),
        "{}",
        stderr(&past)
    );
    let none = prove(&a, 5, &["--checkpoint", "1999"]);
    assert_eq!(code(&none), 2);

    // The auditor's checks: with the database, and the store alone.
    for extra in [vec!["--db", path_str(&a.db)], vec!["--no-db"]] {
        let mut cmd = bin();
        cmd.args([
            "anchor",
            "verify",
            "--json",
            "--anchor",
            &a.anchor_url(),
            "--origin",
            ORIGIN,
        ]);
        cmd.args(["--trusted-key", &a.verifier]).args(&extra);
        let out = cmd.output().unwrap();
        assert_eq!(code(&out), 0, "{extra:?}: {}", stdout(&out));
        let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
        assert_eq!(v["checkpoints"]["trusted"], kept.len(), "{v}");
        assert_eq!(v["checkpoints"]["consistency_proofs"], kept.len() - 1, "{v}");
        if extra[0] == "--db" {
            assert_eq!(v["checkpoints"]["matched_database"], kept.len(), "{v}");
        }
    }
    // verify-export compares the copy's tree with each checkpoint.
    let sink = format!("file:{}", path_str(&a.dir.path().join("events.jsonl")));
    let mut cmd = bin();
    cmd.args([
        "verify-export",
        "--json",
        "--from",
        &sink,
        "--anchor",
        &a.anchor_url(),
        "--trusted-key",
        &a.verifier,
    ]);
    let out = cmd.output().unwrap();
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["checkpoints"]["matched_copy"], kept.len(), "{v}");
}

/// A database restored from an older backup and grown again, under the
/// same origin and key: the follower refuses to publish its tree, and a
/// store where someone put its checkpoint anyway is named as forked by
/// `anchor verify` from the store alone.
#[test]
fn a_fork_is_never_published_and_a_forked_store_is_named_without_the_database() {
    let a = Anchored::new(600, ORIGIN);
    let restored = a.dir.path().join("restored.db");
    std::fs::copy(&a.db, &restored).unwrap();
    append(&a.db, 400); // the original goes on: 1000 events
    let grow = run(&[
        "generate",
        "--db",
        path_str(&restored),
        "--append",
        "--events",
        "500",
        "--seed",
        "2",
    ]);
    assert_eq!(code(&grow), 0, "{}", stderr(&grow));
    let out = follow_once(&a, &["--batch-size", "250"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let log = log_dir(&a);
    let before = files_under(&log);

    // The restored database, followed from a fresh cursor with the same key.
    let fork = Anchored {
        dir: tempfile::TempDir::new().unwrap(),
        db: restored.clone(),
        anchors: a.anchors.clone(),
        key: a.key.clone(),
        verifier: a.verifier.clone(),
    };
    // Batches of 300 never deliver seq 1000, where the kept head would
    // disagree first: the tree's own check must stop it, before it writes
    // anything (one tile of the fork would block the real log for good).
    let out = follow_once(&fork, &["--batch-size", "300"]);
    assert_eq!(code(&out), 1, "the follower stops on another tree: {}", stderr(&out));
    // Named by the checkpoints or by a tile of the kept tree: another tree either way.
    assert!(
        stderr(&out).contains("checkpoints-disagree") || stderr(&out).contains("tiles-disagree"),
        "{}",
        stderr(&out)
    );
    assert_eq!(files_under(&log), before, "nothing of the fork was written");
    // The real log goes on growing past the fork's sizes.
    append(&a.db, 300);
    let out = follow_once(&a, &["--batch-size", "250"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let grown = run(&[
        "anchor",
        "verify",
        "--db",
        path_str(&a.db),
        "--anchor",
        &a.anchor_url(),
        "--origin",
        ORIGIN,
        "--trusted-key",
        &a.verifier,
    ]);
    assert_eq!(code(&grown), 0, "{}", stdout(&grown));

    // Someone with write access puts the fork's checkpoint and tiles in
    // anyway (built in a store of its own, signed by the same key).
    let elsewhere = tempfile::TempDir::new().unwrap();
    let own = Anchored {
        dir: tempfile::TempDir::new().unwrap(),
        db: restored,
        anchors: elsewhere.path().to_owned(),
        key: a.key.clone(),
        verifier: a.verifier.clone(),
    };
    assert_eq!(code(&follow_once(&own, &["--batch-size", "1100"])), 0);
    // Its checkpoint 1100 lies between the real 1000 and 1300.
    let fork_log = elsewhere.path().join(ORIGIN);
    for name in files_under(&fork_log) {
        let target = log.join(&name);
        if !target.exists() {
            std::fs::create_dir_all(target.parent().unwrap()).unwrap();
            std::fs::copy(fork_log.join(&name), &target).unwrap();
        }
    }
    let mut cmd = bin();
    cmd.args([
        "anchor",
        "verify",
        "--no-db",
        "--json",
        "--anchor",
        &a.anchor_url(),
        "--origin",
        ORIGIN,
    ]);
    cmd.args(["--trusted-key", &a.verifier]);
    let out = cmd.output().unwrap();
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let findings = v["findings"].as_array().unwrap();
    assert!(
        findings.iter().any(|f| f["kind"] == "checkpoint-fork"
            && (f["message"].as_str().unwrap().contains("checkpoints 1000 and 1100")
                || f["message"].as_str().unwrap().contains("checkpoints 1100 and 1300"))),
        "{v}"
    );
    // aics-tlog agrees that 1000 and 1100 are not one tree.
    let consistent = aics(aics_tlog().args([
        "verify-consistency",
        "--tiles",
        path_str(&log),
        "--old-checkpoint",
        path_str(&log.join("checkpoints/00000000000000001000")),
        "--checkpoint",
        path_str(&log.join("checkpoints/00000000000000001100")),
        "--log-key",
        &a.verifier,
    ]));
    assert_ne!(consistent["ok"], true, "{consistent}");

    // A planted note that no trusted key signed is named too.
    std::fs::write(
        log.join("checkpoints/00000000000000001200"),
        format!("{ORIGIN}\n1200\nAAAA\n\n\u{2014} x AAAAAAAA\n"),
    )
    .unwrap();
    let out = cmd.output().unwrap();
    assert!(
        stdout(&out).contains("bad-signature") || stdout(&out).contains("untrusted-key"),
        "{}",
        stdout(&out)
    );
}

/// The follower keeps the tree's right edge beside the cursor: a restart
/// extends it from there, and losing or corrupting that file costs only
/// a rebuild from seq 1 that writes the same bytes.
#[test]
fn a_restart_extends_the_tree_from_its_edge_and_a_lost_edge_rebuilds_the_same_tree() {
    let a = Anchored::new(1_000, ORIGIN);
    assert_eq!(code(&follow_once(&a, &[])), 0);
    let edge = a.dir.path().join("cursor.tlog");
    assert!(std::fs::read_to_string(&edge).unwrap().contains("\nsize 1000\n"));

    append(&a.db, 300);
    let out = follow_once(&a, &[]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stderr(&out).contains("tree edge resumed"), "{}", stderr(&out));
    assert!(stderr(&out).contains("size=1000"), "{}", stderr(&out));
    assert!(
        !stderr(&out).contains("building the tree from seq 1"),
        "{}",
        stderr(&out)
    );

    for damage in ["remove", "garbage"] {
        match damage {
            "remove" => std::fs::remove_file(&edge).unwrap(),
            _ => std::fs::write(&edge, "chainship-tlog-edge/v1\nhead 5:zz\n").unwrap(),
        }
        append(&a.db, 100);
        let out = follow_once(&a, &[]);
        assert_eq!(code(&out), 0, "{damage}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("building the tree from seq 1"),
            "{damage}: {}",
            stderr(&out)
        );
    }
    assert_tiles_match_an_independent_build(&a);
    let verified = aics(aics_tlog().args([
        "verify-checkpoint",
        "--tiles",
        path_str(&log_dir(&a)),
        "--log-key",
        &a.verifier,
    ]));
    assert_eq!(verified["size"], 1500, "{verified}");
}

/// kill -9 of the follower at 20 moments while it exports and publishes:
/// afterwards the store's tiles and checkpoints are complete and one tree
/// (aics-tlog checks the tile directory), and nothing was written twice
/// with different content (every tile matches an independent build).
#[test]
fn kill_9_of_the_follower_leaves_tiles_and_checkpoints_complete() {
    let a = Anchored::new(5_000, ORIGIN);
    // A runtime that keeps writing, so every life has work to be killed in.
    let mut writer = live_writer(&a.db, "3000", &[]);
    let cursor = a.dir.path().join("cursor");
    let sink = format!("file:{}", path_str(&a.dir.path().join("events.jsonl")));
    let mut rng = XorShift::from_clock();
    let start = || {
        bin()
            .args([
                "follow",
                "--from-start",
                "--db",
                path_str(&a.db),
                "--origin",
                ORIGIN,
                "--sink",
                &sink,
            ])
            .args([
                "--cursor",
                &format!("file:{}", path_str(&cursor)),
                "--anchor",
                &a.anchor_url(),
            ])
            .args(["--signing-key", path_str(&a.key), "--batch-size", "97"])
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let checkpoints = || std::fs::read_dir(log_dir(&a).join("checkpoints")).map_or(0, |d| d.count());
    // Every other life first publishes a checkpoint (however slow the start
    // under load), then dies within the delay; the others die at any moment.
    kill_9_loop_mid_export(20, &mut rng, 50..900, start, checkpoints);
    let head = stop_writer(&mut writer, &a.db);
    let size: u64 = head.split(':').next().unwrap().parse().unwrap();
    assert_eq!(code(&follow_once(&a, &["--batch-size", "97"])), 0);

    let log = log_dir(&a);
    let kept = files_under(&log.join("checkpoints"));
    // Half the lives published one before dying, and the last run one more.
    assert!(
        kept.len() > 10,
        "checkpoints were published between kills: {}",
        kept.len()
    );
    assert!(kept.last().unwrap().ends_with(&format!("{size}")), "{kept:?}");
    assert_tiles_match_an_independent_build(&a);
    let verified = aics(aics_tlog().args(["verify-checkpoint", "--tiles", path_str(&log), "--log-key", &a.verifier]));
    assert_eq!(
        (verified["ok"].clone(), verified["size"].clone()),
        (Value::Bool(true), size.into()),
        "{verified}"
    );
    // Every kept checkpoint is consistent with the final one (aics-tlog, from the tiles).
    for name in kept.iter().step_by(7) {
        let consistent = aics(aics_tlog().args([
            "verify-consistency",
            "--tiles",
            path_str(&log),
            "--old-checkpoint",
            path_str(&log.join("checkpoints").join(name)),
            "--log-key",
            &a.verifier,
        ]));
        assert_eq!(consistent["ok"], true, "{name}: {consistent}");
    }
    let out = run(&[
        "anchor",
        "verify",
        "--db",
        path_str(&a.db),
        "--anchor",
        &a.anchor_url(),
        "--origin",
        ORIGIN,
        "--trusted-key",
        &a.verifier,
    ]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
}

/// The same log in an S3 anchor store with Object Lock: tiles and
/// checkpoints written write-once and locked, readable by aics-tlog once
/// mirrored, and proofs made from the bucket alone.
#[tokio::test]
async fn checkpoints_and_tiles_in_an_object_lock_bucket() {
    let _services = services().await;
    let a = Anchored::new(1_500, ORIGIN);
    let bucket = locked_bucket("tlog").await;
    let s3_flags = |cmd: &mut Command| {
        s3_env(cmd).args([
            "--anchor",
            &format!("s3://{bucket}/heads"),
            "--anchor-s3-endpoint",
            &s3_endpoint(),
            "--anchor-s3-path-style",
            "--anchor-s3-region",
            "us-east-1",
        ]);
    };
    let mut follow = bin();
    follow.args([
        "follow",
        "--once",
        "--from-start",
        "--db",
        path_str(&a.db),
        "--origin",
        ORIGIN,
    ]);
    follow.args([
        "--sink",
        &format!("file:{}", path_str(&a.dir.path().join("events.jsonl"))),
    ]);
    follow.args(["--cursor", &format!("file:{}", path_str(&a.dir.path().join("cursor")))]);
    follow.args([
        "--signing-key",
        path_str(&a.key),
        "--batch-size",
        "400",
        "--anchor-retain-days",
        "2",
    ]);
    s3_flags(&mut follow);
    let out = follow.output().unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));

    // Mirror the log's objects to a directory, checking each is locked.
    let client = s3_client();
    let prefix = "heads/tlog%2Fagentrt/";
    let mirror = a.dir.path().join("mirror");
    let mut token = None;
    let mut objects = 0;
    loop {
        let page = client
            .list_objects_v2()
            .bucket(&bucket)
            .prefix(prefix)
            .set_continuation_token(token)
            .send()
            .await
            .unwrap();
        for o in page.contents() {
            let key = o.key().unwrap();
            let name = key.strip_prefix(prefix).unwrap();
            if !(name.starts_with("tile/") || name.starts_with("checkpoints/")) {
                continue;
            }
            let head = client.head_object().bucket(&bucket).key(key).send().await.unwrap();
            assert_eq!(
                head.object_lock_mode().map(|m| m.as_str()),
                Some("COMPLIANCE"),
                "{key} is locked"
            );
            let body = client.get_object().bucket(&bucket).key(key).send().await.unwrap();
            let bytes = body.body.collect().await.unwrap().into_bytes();
            let path = mirror.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, bytes).unwrap();
            objects += 1;
        }
        token = page.next_continuation_token().map(str::to_owned);
        if token.is_none() {
            break;
        }
    }
    assert!(objects > 10, "{objects} objects");
    let latest = client
        .get_object()
        .bucket(&bucket)
        .key(format!("{prefix}checkpoint"))
        .send()
        .await
        .unwrap();
    std::fs::write(
        mirror.join("checkpoint"),
        latest.body.collect().await.unwrap().into_bytes(),
    )
    .unwrap();
    let verified = aics(aics_tlog().args([
        "verify-checkpoint",
        "--tiles",
        path_str(&mirror),
        "--log-key",
        &a.verifier,
    ]));
    assert_eq!(
        (verified["ok"].clone(), verified["size"].clone()),
        (Value::Bool(true), 1500.into()),
        "{verified}"
    );

    // A proof from the bucket alone, checked against the SIEM's record.
    let mut prove = bin();
    prove.args(["prove", "--origin", ORIGIN, "--seq", "777"]);
    s3_flags(&mut prove);
    let out = prove.output().unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let proof = a.dir.path().join("777.tlog-proof");
    std::fs::write(&proof, stdout(&out)).unwrap();
    let ok = check_proof(&proof, &a.lines()[776], &a.verifier);
    assert_eq!(code(&ok), 0, "{}", stdout(&ok));

    let mut audit = bin();
    audit.args([
        "anchor",
        "verify",
        "--no-db",
        "--json",
        "--origin",
        ORIGIN,
        "--trusted-key",
        &a.verifier,
    ]);
    s3_flags(&mut audit);
    let out = audit.output().unwrap();
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert!(v["checkpoints"]["trusted"].as_u64().unwrap() >= 1, "{v}");
    assert_eq!(v["checkpoints"]["largest"]["size"], 1500, "{v}");
}

fn audit_no_db(a: &Anchored) -> (i32, Value) {
    let out = run(&[
        "anchor",
        "verify",
        "--no-db",
        "--json",
        "--anchor",
        &a.anchor_url(),
        "--origin",
        ORIGIN,
        "--trusted-key",
        &a.verifier,
    ]);
    json_answer(&out)
}

/// A verifier's exit code and its `--json` answer.
fn json_answer(out: &std::process::Output) -> (i32, Value) {
    let v = serde_json::from_str(&stdout(out)).unwrap_or_else(|e| panic!("{e}: {}{}", stdout(out), stderr(out)));
    (code(out), v)
}

/// Whether a finding of `kind` names `text`.
fn names(v: &Value, kind: &str, text: &str) -> bool {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["kind"] == kind && f["message"].as_str().unwrap().contains(text))
}

/// Every kept tile and bundle is checked, not only those a proof passes
/// through: a flipped byte, a wrong length, a directory or a missing bundle
/// anywhere is `tiles-disagree`, and a deleted checkpoint `checkpoint-missing`.
#[test]
fn every_tile_and_bundle_is_audited() {
    let a = Anchored::new(3_000, ORIGIN);
    assert_eq!(code(&follow_once(&a, &["--batch-size", "1000"])), 0);
    let log = log_dir(&a);
    let (c, v) = audit_no_db(&a);
    assert_eq!(c, 0, "{v}");
    assert!(v["checkpoints"]["tiles_checked"].as_u64().unwrap() >= 23, "{v}");
    let pristine = a.dir.path().join("pristine");
    copy_tree(&a.anchors, &pristine);
    let restore = || {
        std::fs::remove_dir_all(&a.anchors).unwrap();
        copy_tree(&pristine, &a.anchors);
    };
    type Damage = fn(&Path);
    let damages: [(&str, Damage, &str); 6] = [
        (
            "a flipped byte in a full tile off every proof path",
            |l| flip(&l.join("tile/0/003")),
            "tile/0/003",
        ),
        ("a truncated tile", |l| truncate(&l.join("tile/0/001")), "tile/0/001"),
        (
            "a directory where a tile is",
            |l| {
                std::fs::remove_file(l.join("tile/0/000")).unwrap();
                std::fs::create_dir(l.join("tile/0/000")).unwrap();
            },
            "tile/0/000",
        ),
        (
            "junk in an entry bundle",
            |l| std::fs::write(l.join("tile/entries/004"), b"junk").unwrap(),
            "tile/entries/004",
        ),
        (
            "the entry bundles gone",
            |l| std::fs::remove_dir_all(l.join("tile/entries")).unwrap(),
            "tile/entries/000",
        ),
        (
            "a flipped byte in a bundle",
            |l| flip(&l.join("tile/entries/002")),
            "tile/entries/002",
        ),
    ];
    for (what, damage, path) in damages {
        damage(&log);
        let (c, v) = audit_no_db(&a);
        assert_eq!(c, 1, "{what}: {v}");
        assert!(names(&v, "tiles-disagree", path), "{what}: {v}");
        restore();
    }
    // A full tile reaching past the newest checkpoint that disagrees with its partial tile.
    let mut full = std::fs::read(log.join("tile/0/011.p/184")).unwrap();
    full.resize(256 * 32, 7);
    full[0] ^= 1;
    std::fs::write(log.join("tile/0/011"), &full).unwrap();
    let (c, v) = audit_no_db(&a);
    assert_eq!(c, 1, "{v}");
    assert!(names(&v, "tiles-disagree", "tile/0/011:"), "{v}");
    restore();
    // The newest checkpoint deleted, its head kept.
    std::fs::remove_file(log.join("checkpoints/00000000000000003000")).unwrap();
    let (c, v) = audit_no_db(&a);
    assert_eq!(c, 1, "{v}");
    assert!(names(&v, "checkpoint-missing", "head 3000:"), "{v}");
    restore();

    // A junk file where the follower's next tile goes (no checkpoint covers
    // it) no longer stops it: replaced with the chain's own, and said.
    append(&a.db, 500);
    std::fs::create_dir_all(log.join("tile/0/013.p")).unwrap();
    std::fs::write(log.join("tile/0/013.p/172"), [0u8; 100]).unwrap();
    let out = follow_once(&a, &["--batch-size", "1000"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("tile/0/013.p/172") && stderr(&out).contains("tile-replaced"),
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read(log.join("tile/0/013.p/172")).unwrap().len(), 172 * 32);
    assert_eq!(code(&follow_once(&a, &["--batch-size", "1000"])), 0);

    // prove passes over a newest checkpoint whose tiles are gone, to the next one.
    std::fs::remove_file(log.join("tile/0/013.p/172")).unwrap();
    let out = prove(&a, 10, &[]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout(&out).contains(&format!("\n\n{ORIGIN}\n3000\n")),
        "{}",
        stdout(&out)
    );
}

/// check-proof on hostile input: exit 1 or 2 with a message, never a panic;
/// and a key trusted for one origin only vouches for no other.
#[test]
fn check_proof_refuses_hostile_input_without_panicking() {
    let a = Anchored::new(300, ORIGIN);
    assert_eq!(code(&follow_once(&a, &[])), 0);
    let out = prove(&a, 200, &[]);
    let proof = a.dir.path().join("p");
    std::fs::write(&proof, stdout(&out)).unwrap();
    let record = a.lines()[199].clone();
    assert_eq!(code(&check_proof(&proof, &record, &a.verifier)), 0);

    let huge = a.dir.path().join("huge");
    std::fs::write(
        &huge,
        stdout(&out).replace("index 199\n", "index 18446744073709551615\n"),
    )
    .unwrap();
    let out = check_proof(&huge, &record, &a.verifier);
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("not proven: seq 200: the proof is for index 18446744073709551615"));

    let mut zero: Value = serde_json::from_str(&record).unwrap();
    zero["seq"] = 0.into();
    let out = check_proof(&proof, &zero.to_string(), &a.verifier);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("seq 0 is not an event"), "{}", stderr(&out));

    for garbage in ["", "c2sp.org/tlog-proof@v1\nindex +199\n\nx\n", "\u{0}\u{1}"] {
        std::fs::write(&huge, garbage).unwrap();
        let out = check_proof(&huge, &record, &a.verifier);
        assert_eq!(code(&out), 2, "{garbage:?}: {}", stderr(&out));
        assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
    }
    // A path that is not UTF-8: a usage error, not a panic.
    use std::os::unix::ffi::OsStrExt;
    let out = bin()
        .args(["check-proof", "--proof"])
        .arg(std::ffi::OsStr::from_bytes(b"\xff\xfe"))
        .args(["--record", &record, "--trusted-key", &a.verifier])
        .output()
        .unwrap();
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("not valid UTF-8"), "{}", stderr(&out));

    // Another log's key, scoped to that log, does not vouch for this one.
    let scoped = a.dir.path().join("keys");
    std::fs::write(&scoped, format!("{} origin=other/agentrt\n", a.verifier)).unwrap();
    let out = check_proof(&proof, &record, path_str(&scoped));
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    assert!(stdout(&out).contains("untrusted-key"), "{}", stdout(&out));
    std::fs::write(&scoped, format!("{} origin={ORIGIN}\n", a.verifier)).unwrap();
    assert_eq!(code(&check_proof(&proof, &record, path_str(&scoped))), 0);
}

fn flip(path: &Path) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[5] ^= 1;
    std::fs::write(path, bytes).unwrap();
}

fn truncate(path: &Path) {
    let bytes = std::fs::read(path).unwrap();
    std::fs::write(path, &bytes[..bytes.len() - 32]).unwrap();
}

/// A follower of another history, behind the store's newest head (so it has
/// nothing to publish), still proves its tree is a prefix of the kept one:
/// a fork stops it (exit 1) and writes nothing; the same history passes.
#[test]
fn a_follower_behind_the_store_proves_its_history_is_the_kept_one() {
    let a = Anchored::new(1000, ORIGIN);
    assert_eq!(code(&follow_once(&a, &[])), 0);
    let before = files_under(&a.anchors);
    let behind = |db: &std::path::Path, name: &str| {
        bin()
            .args([
                "follow",
                "--once",
                "--from-start",
                "--db",
                path_str(db),
                "--origin",
                ORIGIN,
            ])
            .args([
                "--sink",
                &format!("file:{}", path_str(&a.dir.path().join(format!("{name}.jsonl")))),
            ])
            .args(["--cursor", path_str(&a.dir.path().join(format!("{name}.cursor")))])
            .args(["--anchor", &a.anchor_url(), "--signing-key", path_str(&a.key)])
            .output()
            .unwrap()
    };
    // The same history, cut to 700: covered by the kept heads, and one tree with them.
    let same = a.dir.path().join("same.db");
    std::fs::copy(&a.db, &same).unwrap();
    tamper(&same).execute("DELETE FROM events WHERE seq > 700", []).unwrap();
    let out = behind(&same, "same");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    // Another history of 700 events under the same origin and key.
    let other = generate_with(a.dir.path(), "other.db", 700, &["--seed", "5"]);
    let out = behind(&other, "other");
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(stderr(&out).contains("checkpoints-disagree"), "{}", stderr(&out));
    assert_eq!(files_under(&a.anchors), before, "nothing was written to the store");
}

/// One flipped bit in a full level-0 tile is the tiles' fault, not the
/// signer's: `tiles-disagree` naming the tile, never `checkpoint-fork`.
#[test]
fn a_damaged_level_0_tile_is_tiles_disagree_not_a_fork() {
    let a = Anchored::new(600, ORIGIN);
    assert_eq!(code(&follow_once(&a, &[])), 0);
    append(&a.db, 400);
    assert_eq!(code(&follow_once(&a, &[])), 0);
    let tile = a.anchors.join(ORIGIN).join("tile/0/001");
    let mut bytes = std::fs::read(&tile).unwrap();
    bytes[5] ^= 1;
    std::fs::write(&tile, bytes).unwrap();
    for extra in [vec!["--no-db"], vec!["--db", path_str(&a.db)]] {
        let out = bin()
            .args([
                "anchor",
                "verify",
                "--json",
                "--anchor",
                &a.anchor_url(),
                "--origin",
                ORIGIN,
            ])
            .args(["--trusted-key", &a.verifier])
            .args(&extra)
            .output()
            .unwrap();
        assert_eq!(code(&out), 1, "{}", stdout(&out));
        let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
        let findings = v["findings"].as_array().unwrap();
        assert!(findings.iter().all(|f| f["kind"] == "tiles-disagree"), "{extra:?}: {v}");
        assert!(findings.iter().any(|f| f["source"] == "tile/0/001"), "{extra:?}: {v}");
    }
}

fn audit_with_db(a: &Anchored) -> (i32, Value) {
    let out = run(&[
        "anchor",
        "verify",
        "--json",
        "--db",
        path_str(&a.db),
        "--anchor",
        &a.anchor_url(),
        "--origin",
        ORIGIN,
        "--trusted-key",
        &a.verifier,
    ]);
    json_answer(&out)
}

fn kinds(v: &Value) -> Vec<String> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["kind"].as_str().unwrap().to_owned())
        .collect()
}

/// What a verifier with no memory can still see of deletions in the store:
/// the heads say, signed, that their checkpoint came first; a checkpoint's
/// head follows it; a partial tile is written only with its checkpoint.
/// Deleting the first checkpoint, every checkpoint and tile, a head whose
/// checkpoint stays, or a head and its checkpoint together is named, with
/// the database and without; and a checkpoint the database matches still
/// vouches for its size as the last trusted head.
#[test]
fn deletions_in_the_store_are_named_by_what_they_leave() {
    // Heads and checkpoints at 1000, 2000 and 3000, one run each.
    let a = Anchored::new(1_000, ORIGIN);
    assert_eq!(code(&follow_once(&a, &["--batch-size", "1000"])), 0);
    for _ in 0..2 {
        append(&a.db, 1000);
        assert_eq!(code(&follow_once(&a, &["--batch-size", "1000"])), 0);
    }
    let log = log_dir(&a);
    let head = |seq: u64| log.join(format!("{seq:020}.head"));
    let checkpoint = |seq: u64| log.join(format!("checkpoints/{seq:020}"));
    let head_text = std::fs::read_to_string(head(1000)).unwrap();
    assert!(head_text.contains("\ncheckpoint 1000\n"), "{head_text}");
    for (c, v) in [audit_no_db(&a), audit_with_db(&a)] {
        assert_eq!(c, 0, "{v}");
    }
    let pristine = a.dir.path().join("pristine");
    copy_tree(&a.anchors, &pristine);
    let restore = || {
        std::fs::remove_dir_all(&a.anchors).unwrap();
        copy_tree(&pristine, &a.anchors);
    };

    // The first checkpoint: what is left starts at 2000 and looks whole.
    std::fs::remove_file(checkpoint(1000)).unwrap();
    for (c, v) in [audit_no_db(&a), audit_with_db(&a)] {
        assert_eq!(c, 1, "{v}");
        assert!(names(&v, "checkpoint-missing", "head 1000:"), "{v}");
        assert!(names(&v, "checkpoint-missing", "signed saying"), "{v}");
    }
    restore();

    // Every checkpoint and tile: what is left looks like a heads-only store.
    std::fs::remove_dir_all(log.join("checkpoints")).unwrap();
    std::fs::remove_dir_all(log.join("tile")).unwrap();
    std::fs::remove_file(log.join("checkpoint")).unwrap();
    for (c, v) in [audit_no_db(&a), audit_with_db(&a)] {
        assert_eq!(c, 1, "{v}");
        for seq in [1000, 2000, 3000] {
            assert!(names(&v, "checkpoint-missing", &format!("head {seq}:")), "{v}");
        }
    }
    restore();

    // Heads 1000 and 2000, their checkpoints kept; the database altered at
    // 2500: the checkpoint of 2000 still vouches for it.
    std::fs::remove_file(head(1000)).unwrap();
    std::fs::remove_file(head(2000)).unwrap();
    let (c, v) = audit_no_db(&a);
    assert_eq!(c, 1, "{v}");
    assert!(names(&v, "head-missing", "checkpoint 1000 "), "{v}");
    assert!(names(&v, "head-missing", "checkpoint 2000 "), "{v}");
    let db_copy = a.dir.path().join("db-copy");
    std::fs::copy(&a.db, &db_copy).unwrap();
    tamper(&a.db)
        .execute("UPDATE events SET payload_json = '{\"x\":1}' WHERE seq = 2500", [])
        .unwrap();
    let (c, v) = audit_with_db(&a);
    assert_eq!(c, 1, "{v}");
    assert!(names(&v, "head-missing", "checkpoint 2000 "), "{v}");
    assert_eq!(v["last_trusted_head"]["seq"], 2000, "{v}");
    std::fs::copy(&db_copy, &a.db).unwrap();
    restore();

    // A head and its checkpoint together: the partial tile of 2000 remains.
    std::fs::remove_file(head(2000)).unwrap();
    std::fs::remove_file(checkpoint(2000)).unwrap();
    for (c, v) in [audit_no_db(&a), audit_with_db(&a)] {
        assert_eq!(c, 1, "{v}");
        assert!(names(&v, "checkpoint-missing", "tile/0/007.p/208"), "{v}");
    }
    restore();

    // The newest head alone: a publication that may be in flight is a
    // warning, and its checkpoint still vouches for seq 3000 as a head
    // would, for every verifier alike.
    std::fs::remove_file(head(3000)).unwrap();
    let db_head = db_head(&a.db);
    for (c, v) in [audit_no_db(&a), audit_with_db(&a), verify_export_json(&a)] {
        assert!(!kinds(&v).contains(&"head-missing".to_owned()), "{v}");
        assert!(
            v.to_string().contains("the newest checkpoint (3000) has no head yet"),
            "{v}"
        );
        assert_eq!(c, 0, "{v}");
        let trusted = format!(
            "{}:{}",
            v["last_trusted_head"]["seq"],
            v["last_trusted_head"]["hash"].as_str().unwrap()
        );
        assert_eq!(trusted, db_head, "{v}");
    }
    restore();

    // The newest head gone, and the database and copy cut below its
    // checkpoint: the checkpoint still vouches for seq 3000, so both are cut.
    std::fs::remove_file(head(3000)).unwrap();
    let db_copy = a.dir.path().join("db-before-cut");
    std::fs::copy(&a.db, &db_copy).unwrap();
    tamper(&a.db)
        .execute("DELETE FROM events WHERE seq > 2900", [])
        .unwrap();
    let (c, v) = audit_with_db(&a);
    assert_eq!(c, 1, "{v}");
    assert!(names(&v, "cut", "checkpoint 3000 (kept without its head)"), "{v}");
    std::fs::copy(&db_copy, &a.db).unwrap();
    let copy = a.dir.path().join("events.jsonl");
    let whole = std::fs::read_to_string(&copy).unwrap();
    let cut: String = whole.lines().take(2900).map(|l| format!("{l}\n")).collect();
    std::fs::write(&copy, cut).unwrap();
    let (c, v) = verify_export_json(&a);
    assert_eq!(c, 1, "{v}");
    assert!(names(&v, "cut", "checkpoint 3000 vouches for seq 3000"), "{v}");
    std::fs::write(&copy, whole).unwrap();
    restore();

    // The newest head and checkpoint with the pointer rolled back: no
    // verifier without memory can tell it from a publication in flight,
    // but the partial tiles left are said.
    std::fs::remove_file(head(3000)).unwrap();
    std::fs::remove_file(checkpoint(3000)).unwrap();
    std::fs::copy(checkpoint(2000), log.join("checkpoint")).unwrap();
    let (c, v) = audit_no_db(&a);
    assert_eq!(c, 0, "{v}");
    assert!(v.to_string().contains("partial tiles of a tree of size 3000"), "{v}");
    restore();

    // The newest head and checkpoint together: the pointer still names it.
    std::fs::remove_file(head(3000)).unwrap();
    std::fs::remove_file(checkpoint(3000)).unwrap();
    for (c, v) in [audit_no_db(&a), audit_with_db(&a)] {
        assert_eq!(c, 1, "{v}");
        assert!(names(&v, "checkpoint-missing", "pointer names checkpoint 3000"), "{v}");
    }
    restore();

    // A smaller checkpoint's partial tile: one whose full tile is kept may go
    // (C2SP tlog-tiles), one still needed for proofs against it may not.
    std::fs::remove_file(log.join("tile/0/003.p/232")).unwrap();
    assert_eq!(audit_no_db(&a).0, 0);
    std::fs::remove_file(log.join("tile/1/000.p/3")).unwrap();
    let (c, v) = audit_no_db(&a);
    assert_eq!(c, 1, "{v}");
    assert!(names(&v, "tiles-disagree", "tile/1/000.p/3"), "{v}");
    restore();

    // A head replaced by a directory is named, not passed over.
    std::fs::remove_file(head(2000)).unwrap();
    std::fs::create_dir(head(2000)).unwrap();
    for (c, v) in [audit_no_db(&a), audit_with_db(&a)] {
        assert_eq!(c, 1, "{v}");
        assert!(names(&v, "bad-signature", "cannot be read as a note"), "{v}");
    }
    restore();
}

fn verify_export_json(a: &Anchored) -> (i32, Value) {
    let out = run(&[
        "verify-export",
        "--json",
        "--from",
        &format!("file:{}", path_str(&a.dir.path().join("events.jsonl"))),
        "--anchor",
        &a.anchor_url(),
        "--origin",
        ORIGIN,
        "--trusted-key",
        &a.verifier,
    ]);
    json_answer(&out)
}

/// Rows past the last trusted head are said (a warning with their count);
/// more than `--max-unvouched` fails, and no variable left in a job's
/// environment can raise the limit.
#[test]
fn rows_past_the_last_trusted_head_are_counted_and_bounded() {
    let a = Anchored::new(1_000, ORIGIN);
    assert_eq!(code(&follow_once(&a, &["--batch-size", "1000"])), 0);
    append(&a.db, 20);
    let (c, v) = audit_with_db(&a);
    assert_eq!(c, 0, "{v}");
    assert_eq!(v["unvouched"]["from"], 1001, "{v}");
    assert_eq!(v["unvouched"]["records"], 20, "{v}");
    assert!(
        v.to_string()
            .contains("20 row(s) after the last trusted head (seq 1001..1020)"),
        "{v}"
    );
    let args = [
        "anchor",
        "verify",
        "--json",
        "--db",
        path_str(&a.db),
        "--anchor",
        &a.anchor_url(),
        "--origin",
        ORIGIN,
        "--trusted-key",
        &a.verifier,
        "--max-unvouched",
        "5",
    ];
    let out = run(&args);
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    assert!(stdout(&out).contains("\"unvouched\""), "{}", stdout(&out));
    let out = bin()
        .args(&args[..args.len() - 2])
        .env("CHAINSHIP_MAX_UNVOUCHED", "1000000")
        .args(["--max-unvouched", "5"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    // Without the flag, a variable does not loosen the default either.
    append(&a.db, 10_001);
    let out = bin()
        .args(&args[..args.len() - 2])
        .env("CHAINSHIP_MAX_UNVOUCHED", "1000000")
        .output()
        .unwrap();
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    // A nonsense --after names findings, never panics.
    let after = format!("18446744073709551615:{}", "a".repeat(64));
    let out = run(&[
        "verify-export",
        "--from",
        &format!("file:{}", path_str(&a.dir.path().join("events.jsonl"))),
        "--anchor",
        &a.anchor_url(),
        "--origin",
        ORIGIN,
        "--trusted-key",
        &a.verifier,
        "--after",
        &after,
    ]);
    assert!(matches!(code(&out), 1 | 2), "{}", stderr(&out));
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
}

/// A directory planted where the follower's next head goes does not stop
/// anchoring: the head is written beside it, and verifiers name the stranger.
#[test]
fn a_directory_planted_at_a_heads_name_does_not_stop_anchoring() {
    let a = Anchored::new(1_000, ORIGIN);
    assert_eq!(code(&follow_once(&a, &["--batch-size", "1000"])), 0);
    append(&a.db, 1000);
    let log = log_dir(&a);
    std::fs::create_dir(log.join(format!("{:020}.head", 2000))).unwrap();
    let out = follow_once(&a, &["--batch-size", "1000"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let beside = std::fs::read_dir(&log)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .any(|n| n.starts_with(&format!("{:020}.", 2000)) && n.ends_with(".head") && n != format!("{:020}.head", 2000));
    assert!(beside, "the head went beside the planted directory");
    let (c, v) = audit_with_db(&a);
    assert_eq!(c, 1, "{v}");
    assert!(names(&v, "bad-signature", "cannot be read as a note"), "{v}");
    assert_eq!(v["last_trusted_head"]["seq"], 2000, "{v}");
}

/// A publication the store failed halfway (partial tiles written, the
/// checkpoint refused) is recorded, and finished at its own size by a
/// later run, however far delivery got meanwhile: no partial tile without
/// its checkpoint, no checkpoint without its head, and a full audit passes.
#[test]
fn a_publication_cut_short_is_finished_at_its_own_size() {
    let a = Anchored::new(2_000, ORIGIN);
    assert_eq!(code(&follow_once(&a, &["--batch-size", "1000"])), 0);
    append(&a.db, 500);
    let log = log_dir(&a);
    // A file where the checkpoints directory is: the store refuses checkpoint 2500.
    let checkpoints = log.join("checkpoints");
    let aside = log.join("checkpoints.aside");
    std::fs::rename(&checkpoints, &aside).unwrap();
    std::fs::write(&checkpoints, b"not a directory").unwrap();
    let out = follow_once(&a, &["--batch-size", "1000", "--shutdown-grace", "2s"]);
    assert_ne!(code(&out), 0, "{}", stderr(&out));
    assert!(
        log.join("tile/0/009.p/196").exists(),
        "the partial tile of 2500 was written first"
    );
    assert!(!log.join(format!("{:020}.head", 2500)).exists());
    let pending = a.dir.path().join("cursor.tlog.pending");
    assert!(std::fs::read_to_string(&pending).unwrap().starts_with("2500:"));
    std::fs::remove_file(&checkpoints).unwrap();
    std::fs::rename(&aside, &checkpoints).unwrap();

    // The next run, with more delivered meanwhile, leaves 2500 whole.
    append(&a.db, 500);
    let out = follow_once(&a, &["--batch-size", "1000"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(log.join(format!("checkpoints/{:020}", 2500)).is_file());
    let head = std::fs::read_to_string(log.join(format!("{:020}.head", 2500))).unwrap();
    assert!(head.contains("\ncheckpoint 2500\n"), "{head}");
    assert!(!pending.exists());
    for (c, v) in [audit_no_db(&a), audit_with_db(&a)] {
        assert_eq!(c, 0, "{v}");
        assert_eq!(v["checkpoints"]["largest"]["size"], 3000, "{v}");
    }
}

/// The recorded publication is finished before a larger one even when the
/// larger is the first this run publishes (delivery went past it).
#[test]
fn a_recorded_publication_is_finished_before_a_larger_one() {
    let a = Anchored::new(2_000, ORIGIN);
    assert_eq!(code(&follow_once(&a, &["--batch-size", "1000"])), 0);
    append(&a.db, 1000);
    // As a run cut short at 2500 leaves it (the store then refused the rest).
    let at_2500 = tamper(&a.db)
        .query_row("SELECT hash FROM events WHERE seq = 2500", [], |r| {
            r.get::<_, String>(0)
        })
        .unwrap();
    let pending = a.dir.path().join("cursor.tlog.pending");
    std::fs::write(&pending, format!("2500:{at_2500}\n")).unwrap();
    let out = follow_once(&a, &["--batch-size", "1000"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("finishing a publication that was cut short"),
        "{}",
        stderr(&out)
    );
    let log = log_dir(&a);
    assert!(log.join(format!("checkpoints/{:020}", 2500)).is_file());
    assert!(log.join("tile/0/009.p/196").is_file());
    assert!(log.join(format!("{:020}.head", 2500)).is_file());
    assert!(!pending.exists());
    let (c, v) = audit_with_db(&a);
    assert_eq!(c, 0, "{v}");
    assert_eq!(v["checkpoints"]["largest"]["size"], 3000, "{v}");
}
