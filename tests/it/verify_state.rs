//! `anchor verify --state`: the second run lists and reads only what was
//! published since the first (proved by damaging everything older, which
//! it must never read), still walks the whole database, and names a state
//! file the database no longer matches.

use std::path::{Path, PathBuf};

use crate::common::*;
use serde_json::Value;

const ORIGIN: &str = "state/agentrt";

fn export(a: &Anchored, extra: &[&str]) -> std::process::Output {
    bin()
        .args([
            "follow",
            "--once",
            "--from-start",
            "--db",
            path_str(&a.db),
            "--origin",
            ORIGIN,
        ])
        .args(["--batch-size", "100"])
        .args([
            "--sink",
            &format!("file:{}", path_str(&a.dir.path().join("events.jsonl"))),
        ])
        .args(["--cursor", path_str(&a.dir.path().join("cursor"))])
        .args(["--anchor", &a.anchor_url(), "--signing-key", path_str(&a.key)])
        .args(extra)
        .output()
        .unwrap()
}

fn verify(a: &Anchored, db: &Path, state: Option<&Path>, extra: &[&str]) -> (i32, Value) {
    let mut cmd = bin();
    cmd.args(["anchor", "verify", "--json", "--origin", ORIGIN])
        .args(["--anchor", &a.anchor_url(), "--trusted-key", &a.verifier])
        .args(extra);
    if !extra.contains(&"--no-db") {
        cmd.args(["--db", path_str(db)]);
    }
    if let Some(state) = state {
        cmd.args(["--state", path_str(state)]);
    }
    let out = cmd.output().unwrap();
    let json = serde_json::from_str(&stdout(&out)).unwrap_or_else(|_| panic!("{}{}", stdout(&out), stderr(&out)));
    (code(&out), json)
}

fn origin_dir(a: &Anchored) -> PathBuf {
    a.anchors.join(ORIGIN)
}

/// The seqs of the heads kept in the file store (the anchoring task
/// publishes the newest delivered head, so a fast export may skip some).
fn head_seqs(a: &Anchored) -> Vec<u64> {
    let mut seqs: Vec<u64> = std::fs::read_dir(origin_dir(a))
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().ok()?;
            name.strip_suffix(".head")?.parse().ok()
        })
        .collect();
    seqs.sort_unstable();
    seqs
}

/// Every head, heartbeat and checkpoint note of a seq below `seq`, and
/// every level-0 tile wholly below it, overwritten with junk.
fn spoil_everything_below(a: &Anchored, seq: u64) -> usize {
    let mut spoiled = 0;
    let dir = origin_dir(a);
    let names: Vec<(PathBuf, u64)> = std::fs::read_dir(&dir)
        .unwrap()
        .chain(std::fs::read_dir(dir.join("checkpoints")).unwrap())
        .map(|e| e.unwrap().path())
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?.to_owned();
            let digits = name.get(..20)?;
            Some((p.clone(), digits.parse().ok()?))
        })
        .collect();
    for (path, s) in names {
        if s < seq {
            std::fs::write(&path, b"junk\n").unwrap();
            spoiled += 1;
        }
    }
    for index in 0..seq / 256 {
        std::fs::write(dir.join(format!("tile/0/{index:03}")), b"junk").unwrap();
        spoiled += 1;
    }
    spoiled
}

/// A history of several heads: the database exported as it grew from 400
/// to 1000 events (a fast export keeps only its newest head).
fn grown(steps: &[u64]) -> Anchored {
    let a = Anchored::new(steps[0], "state/chainship");
    assert_eq!(code(&export(&a, &[])), 0);
    for more in &steps[1..] {
        append(&a.db, *more);
        assert_eq!(code(&export(&a, &[])), 0);
    }
    a
}

#[test]
fn the_second_run_reads_only_what_was_published_since_and_still_walks_everything() {
    let a = grown(&[400, 200, 200, 200]);
    let state = a.dir.path().join("verify-state.json");
    let (c, first) = verify(&a, &a.db, Some(&state), &[]);
    assert_eq!(c, 0, "{first}");
    assert_eq!(first["state"]["incremental"], false, "{first}");
    let kept = head_seqs(&a);
    assert!(kept.len() >= 2, "{kept:?}");
    assert_eq!(first["heads"]["kept"], kept.len(), "{first}");
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    assert_eq!(saved["head"]["seq"], 1000, "{saved}");
    assert_eq!(saved["checkpoint"]["size"], 1000, "{saved}");

    for _ in 0..3 {
        append(&a.db, 166);
        assert_eq!(code(&export(&a, &[])), 0);
    }
    append(&a.db, 2);
    assert_eq!(code(&export(&a, &[])), 0);
    // Everything the first run verified is now junk: a run that read any of it would fail.
    assert!(spoil_everything_below(&a, 1000) >= 9);
    let (c, second) = verify(&a, &a.db, Some(&state), &[]);
    assert_eq!(c, 0, "{second}");
    assert_eq!(second["state"]["incremental"], true, "{second}");
    let new = head_seqs(&a).into_iter().filter(|s| *s > 1000).count();
    assert!(new >= 1);
    // The state's own head again, and those published since.
    assert_eq!(second["heads"]["kept"], 1 + new, "{second}");
    assert_eq!(second["checkpoints"]["kept"], 1 + new, "{second}");
    // Each new one but the newest shown a prefix of the newest (1000 is the state's).
    assert_eq!(second["checkpoints"]["consistency_proofs"], new - 1, "{second}");
    assert_eq!(
        second["database"]["checked"], 1500,
        "the whole database is walked: {second}"
    );
    assert_eq!(second["last_trusted_head"]["seq"], 1500, "{second}");
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    assert_eq!(saved["head"]["seq"], 1500, "{saved}");

    // A full run reads it all, and finds the junk.
    let (c, full) = verify(&a, &a.db, None, &[]);
    assert_eq!(c, 1, "{full}");
    let kinds: Vec<&str> = full["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"bad-signature"), "{full}");
    // And so does an incremental run from a state file that is gone.
    std::fs::remove_file(&state).unwrap();
    let (c, again) = verify(&a, &a.db, Some(&state), &[]);
    assert_eq!((c, &again["state"]["incremental"]), (1, &Value::Bool(false)), "{again}");
    assert!(!state.exists(), "a run with findings writes no state");
}

#[test]
fn an_event_altered_before_the_state_head_is_still_found() {
    let a = Anchored::new(1000, "state/chainship");
    assert_eq!(code(&export(&a, &[])), 0);
    let state = a.dir.path().join("verify-state.json");
    assert_eq!(verify(&a, &a.db, Some(&state), &[]).0, 0);
    let before = std::fs::read(&state).unwrap();
    tamper(&a.db)
        .execute(
            "UPDATE events SET payload_json = payload_json || ' ' WHERE seq = 10",
            [],
        )
        .unwrap();
    let (c, v) = verify(&a, &a.db, Some(&state), &[]);
    assert_eq!(c, 1, "{v}");
    let findings = v["findings"].as_array().unwrap();
    assert!(findings.iter().any(|f| f["kind"] == "altered" && f["seq"] == 10), "{v}");
    assert!(
        findings
            .iter()
            .any(|f| f["source"] == path_str(&state) && f["message"].as_str().unwrap().contains("state file")),
        "the state's head lies past the break: {v}"
    );
    assert_eq!(
        std::fs::read(&state).unwrap(),
        before,
        "findings leave the state as it was"
    );
}

#[test]
fn a_state_file_the_database_or_the_store_no_longer_matches_is_named() {
    let a = Anchored::new(1000, "state/chainship");
    assert_eq!(code(&export(&a, &[])), 0);
    let state = a.dir.path().join("verify-state.json");
    assert_eq!(verify(&a, &a.db, Some(&state), &[]).0, 0);

    // Another chain in the database's place (a restored backup of another history).
    let other = generate_with(a.dir.path(), "other.db", 1000, &["--seed", "7"]);
    let (c, v) = verify(&a, &other, Some(&state), &[]);
    assert_eq!(c, 1, "{v}");
    let named: Vec<&Value> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["source"] == path_str(&state))
        .collect();
    assert_eq!(named.len(), 1, "{v}");
    assert!(
        named[0]["message"].as_str().unwrap().contains("records head 1000:"),
        "{v}"
    );

    // The database cut below the state's head.
    let cut = a.dir.path().join("cut.db");
    std::fs::copy(&a.db, &cut).unwrap();
    tamper(&cut).execute("DELETE FROM events WHERE seq > 900", []).unwrap();
    let (c, v) = verify(&a, &cut, Some(&state), &[]);
    assert_eq!(c, 1, "{v}");
    assert!(
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["kind"] == "cut" && f["source"] == path_str(&state)),
        "{v}"
    );

    // The store lost the state's head (rolled back or pruned).
    let head = origin_dir(&a).join(format!("{:020}.head", 1000));
    let kept = std::fs::read(&head).unwrap();
    std::fs::remove_file(&head).unwrap();
    let (c, v) = verify(&a, &a.db, Some(&state), &[]);
    assert_eq!(c, 1, "{v}");
    assert!(
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["message"].as_str().unwrap().contains("no longer kept")),
        "{v}"
    );
    std::fs::write(&head, kept).unwrap();
    assert_eq!(verify(&a, &a.db, Some(&state), &[]).0, 0);

    // A state of another origin, or not a state at all: a setup error naming the file.
    let saved = std::fs::read_to_string(&state).unwrap();
    std::fs::write(&state, saved.replace(ORIGIN, "other/agentrt")).unwrap();
    let out = bin()
        .args(["anchor", "verify", "--db", path_str(&a.db), "--origin", ORIGIN])
        .args(["--anchor", &a.anchor_url(), "--trusted-key", &a.verifier])
        .args(["--state", path_str(&state)])
        .output()
        .unwrap();
    assert_eq!(code(&out), 2, "{}", stdout(&out));
    assert!(stderr(&out).contains(path_str(&state)), "{}", stderr(&out));
    let edge_damaged = saved.replacen("\"edge\": [\n      \"", "\"edge\": [\n      \"AA", 1);
    assert_ne!(edge_damaged, saved);
    std::fs::write(&state, edge_damaged).unwrap();
    let out = bin()
        .args(["anchor", "verify", "--db", path_str(&a.db), "--origin", ORIGIN])
        .args(["--anchor", &a.anchor_url(), "--trusted-key", &a.verifier])
        .args(["--state", path_str(&state)])
        .output()
        .unwrap();
    assert_eq!(code(&out), 2, "{}", stdout(&out));
}

/// A checkpoint published after the state that is not one tree with the
/// state's (planted by someone with write access) is named, though the
/// incremental run never reads the older tiles.
#[test]
fn a_new_checkpoint_that_forks_from_the_state_is_found() {
    let a = Anchored::new(1000, "state/chainship");
    assert_eq!(code(&export(&a, &[])), 0);
    let state = a.dir.path().join("verify-state.json");
    assert_eq!(verify(&a, &a.db, Some(&state), &[]).0, 0);
    // Another history of the same origin and key, grown past the state's size.
    let (_fork, elsewhere) = other_history(&a, 1300, &["--batch-size", "1300"]);
    // Its checkpoint, head and the tiles our store lacks, planted.
    let from = elsewhere.join(ORIGIN);
    for rel in walk(&from) {
        let target = origin_dir(&a).join(&rel);
        if !target.exists() && (rel.starts_with("tile") || rel.contains("1300")) {
            std::fs::create_dir_all(target.parent().unwrap()).unwrap();
            std::fs::copy(from.join(&rel), &target).unwrap();
        }
    }
    let (c, v) = verify(&a, &a.db, Some(&state), &["--no-db"]);
    assert_eq!(c, 1, "{v}");
    let kinds: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["kind"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains(&"checkpoint-fork") || kinds.contains(&"tiles-disagree"),
        "{v}"
    );
}

/// Another history of `events` events under the same origin and key,
/// exported into a store of its own (returned with the scratch dir holding it).
fn other_history(a: &Anchored, events: u64, extra: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let fork = tempfile::TempDir::new().unwrap();
    let fork_db = generate_with(fork.path(), "fork.db", events, &["--seed", "9"]);
    let elsewhere = fork.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let out = bin()
        .args([
            "follow",
            "--once",
            "--from-start",
            "--db",
            path_str(&fork_db),
            "--origin",
            ORIGIN,
        ])
        .args(["--sink", &format!("file:{}", path_str(&fork.path().join("f.jsonl")))])
        .args(["--cursor", path_str(&fork.path().join("fcursor"))])
        .args([
            "--anchor",
            &format!("file:{}", path_str(&elsewhere)),
            "--signing-key",
            path_str(&a.key),
        ])
        .args(extra)
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    (fork, elsewhere)
}

fn walk(dir: &Path) -> Vec<String> {
    files_under(dir)
        .iter()
        .map(|p| p.strip_prefix(dir).unwrap().to_string_lossy().into_owned())
        .collect()
}

/// The same against the S3 server: the listing starts after the state's
/// head (`StartAfter`), so the old heads are never listed or read.
#[tokio::test]
async fn on_s3_the_second_run_lists_only_the_new_heads() {
    let _services = services().await;
    let a = Anchored::new(400, "state/chainship");
    let bucket = bucket("state").await;
    let store = [
        "--anchor".to_owned(),
        format!("s3://{bucket}/heads"),
        "--anchor-s3-endpoint".to_owned(),
        s3_endpoint(),
        "--anchor-s3-path-style".to_owned(),
        "--anchor-s3-region".to_owned(),
        "us-east-1".to_owned(),
    ];
    let follow = |a: &Anchored| {
        let mut cmd = bin();
        s3_env(&mut cmd)
            .args([
                "follow",
                "--once",
                "--from-start",
                "--db",
                path_str(&a.db),
                "--origin",
                ORIGIN,
            ])
            .args(["--batch-size", "100"])
            .args([
                "--sink",
                &format!("file:{}", path_str(&a.dir.path().join("events.jsonl"))),
            ])
            .args(["--cursor", path_str(&a.dir.path().join("cursor"))])
            .args(["--signing-key", path_str(&a.key)])
            .args(&store);
        cmd.output().unwrap()
    };
    let state = a.dir.path().join("verify-state.json");
    let verify = |a: &Anchored| {
        let mut cmd = bin();
        s3_env(&mut cmd)
            .args([
                "anchor",
                "verify",
                "--json",
                "--db",
                path_str(&a.db),
                "--origin",
                ORIGIN,
            ])
            .args(["--trusted-key", &a.verifier, "--state", path_str(&state)])
            .args(&store);
        let out = cmd.output().unwrap();
        (code(&out), serde_json::from_str::<Value>(&stdout(&out)).unwrap())
    };
    assert_eq!(code(&follow(&a)), 0);
    for _ in 0..3 {
        append(&a.db, 200);
        assert_eq!(code(&follow(&a)), 0);
    }
    let (c, first) = verify(&a);
    assert_eq!(c, 0, "{first}");
    let first_kept = first["heads"]["kept"].as_u64().unwrap();
    for _ in 0..3 {
        append(&a.db, 100);
        assert_eq!(code(&follow(&a)), 0);
    }
    // The old heads, overwritten with junk: never read by the second run.
    let s3 = s3_client();
    let prefix = format!("heads/{}/", chainship_chain::origin_segment(ORIGIN));
    let listed = s3
        .list_objects_v2()
        .bucket(&bucket)
        .prefix(&prefix)
        .delimiter("/")
        .send()
        .await
        .unwrap();
    let seqs: Vec<u64> = listed
        .contents()
        .iter()
        .filter_map(|o| o.key()?.strip_prefix(&prefix)?.strip_suffix(".head")?.parse().ok())
        .collect();
    assert_eq!(
        seqs.iter().filter(|s| **s <= 1000).count() as u64,
        first_kept,
        "{seqs:?}"
    );
    let new = seqs.iter().filter(|s| **s > 1000).count();
    assert!(new >= 1, "{seqs:?}");
    for seq in seqs.iter().filter(|s| **s < 1000) {
        s3.put_object()
            .bucket(&bucket)
            .key(format!("{prefix}{seq:020}.head"))
            .body(b"junk\n".to_vec().into())
            .send()
            .await
            .unwrap();
    }
    let (c, second) = verify(&a);
    assert_eq!(c, 0, "{second}");
    assert_eq!(
        second["heads"]["kept"],
        1 + new,
        "the state's head and the new ones: {second}"
    );
    assert_eq!(second["checkpoints"]["kept"], 1 + new, "{second}");
    assert_eq!(second["last_trusted_head"]["seq"], 1300, "{second}");
    std::fs::remove_file(&state).unwrap();
    let (c, full) = verify(&a);
    assert_eq!(c, 1, "a full listing reads the junk: {full}");
}

/// A head and a checkpoint of another history planted after the state, at a
/// seq below its head (where an incremental run reads nothing): the store's
/// count below the head changed, and that is named.
#[test]
fn notes_planted_below_the_state_head_are_named() {
    let a = grown(&[400, 200, 200, 200]);
    let state = a.dir.path().join("verify-state.json");
    assert_eq!(verify(&a, &a.db, Some(&state), &[]).0, 0);
    // A seq below the state's head where the real export kept no head.
    let kept = head_seqs(&a);
    let free = (901..1000).find(|s| !kept.contains(s)).unwrap();
    let (_fork, elsewhere) = other_history(&a, free, &[]);
    let name = format!("{free:020}");
    let (from, to) = (elsewhere.join(ORIGIN), origin_dir(&a));
    assert!(!to.join(format!("{name}.head")).exists());
    std::fs::copy(from.join(format!("{name}.head")), to.join(format!("{name}.head"))).unwrap();
    std::fs::copy(from.join("checkpoints").join(&name), to.join("checkpoints").join(&name)).unwrap();
    for extra in [&[][..], &["--no-db"][..]] {
        let (c, v) = verify(&a, &a.db, Some(&state), extra);
        assert_eq!(c, 1, "{extra:?}: {v}");
        let kinds: Vec<&str> = v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["source"] == format!("the state file {}", path_str(&state)))
            .map(|f| f["kind"].as_str().unwrap())
            .collect();
        assert!(
            kinds.contains(&"heads-disagree") && kinds.contains(&"checkpoint-fork"),
            "{extra:?}: {v}"
        );
    }
    // A full run judges the planted notes themselves.
    let (c, v) = verify(&a, &a.db, None, &[]);
    assert_eq!(c, 1, "{v}");
    assert!(
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["kind"] == "fork" && f["seq"] == free),
        "{v}"
    );
}

fn kinds_at(v: &Value) -> Vec<(String, Option<u64>)> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["kind"].as_str().unwrap().to_owned(), f["seq"].as_u64()))
        .collect()
}

#[test]
fn a_swap_below_the_state_head_and_a_tile_it_needs_are_found_with_state() {
    let a = grown(&[400, 200, 200, 200]);
    let state = a.dir.path().join("verify-state.json");
    assert_eq!(verify(&a, &a.db, Some(&state), &[]).0, 0);
    append(&a.db, 200);
    assert_eq!(code(&export(&a, &[])), 0);
    let kept = head_seqs(&a);
    // One head below the state's head removed, another name given its place
    // with a later head's bytes: the count stays the same.
    let state_head = kept.iter().copied().filter(|s| *s <= 1000).max().unwrap();
    let gone = kept[1];
    let free = (gone + 1..state_head).find(|s| !kept.contains(s)).unwrap();
    let dir = origin_dir(&a);
    let (gone_path, free_path) = (
        dir.join(format!("{gone:020}.head")),
        dir.join(format!("{free:020}.head")),
    );
    let gone_bytes = std::fs::read(&gone_path).unwrap();
    std::fs::remove_file(&gone_path).unwrap();
    std::fs::copy(dir.join(format!("{:020}.head", kept[kept.len() - 1])), &free_path).unwrap();
    let (c, v) = verify(&a, &a.db, Some(&state), &[]);
    assert_eq!(c, 1, "{v}");
    assert!(
        v["findings"]
            .to_string()
            .contains("other names (one removed and another put in its place)"),
        "{v}"
    );
    // Put back, the state passes (and moves to the new head).
    std::fs::remove_file(&free_path).unwrap();
    std::fs::write(&gone_path, gone_bytes).unwrap();
    assert_eq!(verify(&a, &a.db, Some(&state), &[]).0, 0);
    // A level-0 tile (and a bundle) the newest tree needs, below the state's size: gone.
    std::fs::remove_file(dir.join("tile/0/000")).unwrap();
    let (c, v) = verify(&a, &a.db, Some(&state), &[]);
    assert_eq!(c, 1, "{v}");
    assert!(
        v["findings"].to_string().contains("tile/0/000") && kinds_at(&v).iter().any(|(k, _)| k == "tiles-disagree"),
        "{v}"
    );
    std::fs::remove_file(dir.join("tile/entries/000")).unwrap();
    let (_, v) = verify(&a, &a.db, Some(&state), &[]);
    assert!(v["findings"].to_string().contains("tile/entries/000"), "{v}");
}

#[test]
fn the_checkpoint_pointer_is_judged_by_every_verifier() {
    let a = grown(&[400, 200, 200, 200]);
    assert_eq!(verify(&a, &a.db, None, &[]).0, 0);
    let dir = origin_dir(&a);
    let pointer = dir.join("checkpoint");
    let good = std::fs::read(&pointer).unwrap();
    let kept = head_seqs(&a);
    // Rolled back to an older checkpoint, garbage, deleted: each a finding on every path.
    let older = std::fs::read(dir.join("checkpoints").join(format!("{:020}", kept[0]))).unwrap();
    for (name, bytes) in [
        ("rolled back", Some(older)),
        ("garbage", Some(b"junk\n".to_vec())),
        ("deleted", None),
    ] {
        match bytes {
            Some(b) => std::fs::write(&pointer, b).unwrap(),
            None => std::fs::remove_file(&pointer).unwrap(),
        }
        for extra in [&[][..], &["--no-db"][..]] {
            let (c, v) = verify(&a, &a.db, None, extra);
            assert_eq!(c, 1, "{name} {extra:?}: {v}");
            assert!(
                v["findings"].to_string().contains("the checkpoint pointer"),
                "{name} {extra:?}: {v}"
            );
        }
        let out = bin()
            .args(["verify-export", "--json", "--from"])
            .arg(format!("file:{}", path_str(&a.dir.path().join("events.jsonl"))))
            .args(["--anchor", &a.anchor_url(), "--trusted-key", &a.verifier])
            .output()
            .unwrap();
        assert_eq!(code(&out), 1, "verify-export, pointer {name}: {}", stdout(&out));
        assert!(stdout(&out).contains("the checkpoint pointer"), "{}", stdout(&out));
    }
    std::fs::write(&pointer, &good).unwrap();
    assert_eq!(verify(&a, &a.db, None, &[]).0, 0);
}

/// What a verdict says, less the findings that name the state file: its
/// findings by kind and seq, ranges, last trusted head and affected runs.
fn answer(v: &Value, state: &Path) -> (Vec<(String, Value)>, Value, Value, Value) {
    let mut findings: Vec<(String, Value)> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| !f["source"].as_str().is_some_and(|s| s.contains(path_str(state))))
        .map(|f| (f["kind"].as_str().unwrap().to_owned(), f["seq"].clone()))
        .collect();
    findings.sort_by_key(|(k, s)| (k.clone(), s.to_string()));
    (
        findings,
        v["invalid_ranges"].clone(),
        v["last_trusted_head"].clone(),
        v["affected"].clone(),
    )
}

/// Issue 47's attack: a run with --state that finds anything gave another
/// verdict than a full run on the same data (no range, no last trusted
/// head, every run affected; after a rollback a false no-trusted-head).
#[test]
fn a_run_with_state_that_finds_anything_answers_as_a_full_run_would() {
    let a = grown(&[400, 200, 200, 200]);
    let state = a.dir.path().join("verify-state.json");
    let (c, clean) = verify(&a, &a.db, Some(&state), &[]);
    assert_eq!((c, &clean["state"]["saved"]), (0, &Value::Bool(true)), "{clean}");
    let before = std::fs::read(&state).unwrap();
    // Below the state's head: one row edited, then a consistent rewrite.
    for (name, sql) in [
        (
            "edited",
            "UPDATE events SET payload_json = payload_json || ' ' WHERE seq = 500",
        ),
        ("deleted", "DELETE FROM events WHERE seq BETWEEN 500 AND 509"),
        ("cut", "DELETE FROM events WHERE seq > 950"),
    ] {
        let db = a.dir.path().join(format!("{name}.db"));
        std::fs::copy(&a.db, &db).unwrap();
        tamper(&db).execute(sql, []).unwrap();
        let (c_full, full) = verify(&a, &db, None, &[]);
        let (c_state, with_state) = verify(&a, &db, Some(&state), &[]);
        assert_eq!((c_full, c_state), (1, 1), "{name}: {full} {with_state}");
        assert_eq!(
            answer(&with_state, &state),
            answer(&full, &state),
            "{name}: {with_state}\n{full}"
        );
        assert_eq!(
            std::fs::read(&state).unwrap(),
            before,
            "{name}: findings leave the state as it was"
        );
        assert_eq!(with_state["state"]["saved"], false, "{name}");
    }
    // The store rolled back below the state's head: the newest head and
    // checkpoint gone, the pointer at the one before.
    let dir = origin_dir(&a);
    let seqs = head_seqs(&a);
    let (newest, previous) = (seqs[seqs.len() - 1], seqs[seqs.len() - 2]);
    std::fs::remove_file(dir.join(format!("{newest:020}.head"))).unwrap();
    std::fs::remove_file(dir.join(format!("checkpoints/{newest:020}"))).unwrap();
    std::fs::copy(dir.join(format!("checkpoints/{previous:020}")), dir.join("checkpoint")).unwrap();
    let (_, full) = verify(&a, &a.db, None, &[]);
    let (c, with_state) = verify(&a, &a.db, Some(&state), &[]);
    assert_eq!(c, 1, "the state names the rollback: {with_state}");
    assert!(!with_state.to_string().contains("no-trusted-head"), "{with_state}");
    assert_eq!(
        with_state["last_trusted_head"], full["last_trusted_head"],
        "{with_state}\n{full}"
    );
    assert_eq!(
        answer(&with_state, &state),
        answer(&full, &state),
        "{with_state}\n{full}"
    );
}
