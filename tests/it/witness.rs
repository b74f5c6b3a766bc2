//! Witness cosigning against real witnesses: `aics-witness` (an independent
//! C2SP tlog-witness server, installed by the test script) runs on loopback
//! as two witnesses; the tests start, stop and roll back their own instances.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::Value;
use tempfile::TempDir;

const ORIGIN: &str = "witness/agentrt";

fn follow_once(a: &Anchored, cursor: &str, extra: &[String]) -> std::process::Output {
    let sink = format!("file:{}", path_str(&a.dir.path().join(format!("{cursor}.jsonl"))));
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
        .args(["--sink", &sink, "--cursor", path_str(&a.dir.path().join(cursor))])
        .args(["--anchor", &a.anchor_url(), "--signing-key", path_str(&a.key)])
        .args(["--shutdown-grace", "10s", "--retry-max-delay", "1s"])
        .args(extra)
        .output()
        .unwrap()
}

fn witness_flags(witnesses: &[&Witness], quorum: usize) -> Vec<String> {
    let mut flags = Vec::new();
    for w in witnesses {
        flags.push("--witness".into());
        flags.push(w.spec());
    }
    flags.push("--witness-quorum".into());
    flags.push(quorum.to_string());
    flags
}

fn cosigned(a: &Anchored, size: u64) -> PathBuf {
    a.anchors.join(ORIGIN).join(format!("cosigned/{size:020}"))
}

fn verify(a: &Anchored, keys: &[&str], quorum: usize) -> (i32, Value) {
    verify_with(a, keys, quorum, &[])
}

fn verify_with(a: &Anchored, keys: &[&str], quorum: usize, extra: &[&str]) -> (i32, Value) {
    let mut cmd = bin();
    cmd.args([
        "anchor",
        "verify",
        "--json",
        "--db",
        path_str(&a.db),
        "--anchor",
        &a.anchor_url(),
    ])
    .args([
        "--origin",
        ORIGIN,
        "--trusted-key",
        &a.verifier,
        "--witness-grace",
        "0s",
    ])
    .args(["--witness-quorum", &quorum.to_string()])
    .args(extra);
    for k in keys {
        cmd.args(["--witness-key", k]);
    }
    let out = cmd.output().unwrap();
    let v: Value =
        serde_json::from_str(&stdout(&out)).unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&out), stderr(&out)));
    (code(&out), v)
}

fn wait_for_file(path: &Path, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while !path.exists() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    true
}

#[test]
fn two_witnesses_cosign_and_auditors_and_aics_tlog_check_the_cosignatures() {
    let a = Anchored::new(1_000, ORIGIN);
    let mut w1 = Witness::new("test.example/w1", Some((ORIGIN, &a.verifier)));
    let w2 = Witness::new("test.example/w2", Some((ORIGIN, &a.verifier)));
    let out = follow_once(&a, "c", &witness_flags(&[&w1, &w2], 2));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let note = std::fs::read_to_string(cosigned(&a, 1000)).expect("the cosigned checkpoint is kept");
    assert_eq!(note.matches("\u{2014} test.example/w").count(), 2, "{note}");

    let (c, v) = verify(&a, &[&w1.vkey, &w2.vkey], 2);
    assert_eq!(c, 0, "{v}");
    assert_eq!(v["checkpoints"]["cosigned"]["newest"], 1000, "{v}");
    // The nightly check with --state: it records the newest cosigned checkpoint.
    let state = a.dir.path().join("state.json");
    let with_state = ["--state", path_str(&state)];
    let (c, v) = verify_with(&a, &[&w1.vkey, &w2.vkey], 2, &with_state);
    assert_eq!((c, &v["state"]["incremental"]), (0, &Value::Bool(false)), "{v}");
    // An independent verifier agrees with the cosignatures.
    let checked = aics_tlog()
        .args([
            "verify-checkpoint",
            "--note",
            path_str(&cosigned(&a, 1000)),
            "--log-key",
            &a.verifier,
        ])
        .args([
            "--witness-key",
            &w1.vkey,
            "--witness-key",
            &w2.vkey,
            "--quorum",
            "2",
            "--origin",
            ORIGIN,
        ])
        .output()
        .unwrap();
    assert!(
        stdout(&checked).contains("\"ok\": true"),
        "{}{}",
        stdout(&checked),
        stderr(&checked)
    );
    // A witness the auditor trusts that never cosigned: uncosigned.
    let stranger = Witness::new("test.example/w3", Some((ORIGIN, &a.verifier)));
    let (c, v) = verify(&a, &[&w1.vkey, &stranger.vkey], 2);
    assert_eq!(c, 1, "{v}");
    assert!(
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["kind"] == "uncosigned"),
        "{v}"
    );

    // A proof carries the cosignatures; check-proof holds it to the quorum.
    let proof = a.dir.path().join("p");
    let out = run(&["prove", "--anchor", &a.anchor_url(), "--origin", ORIGIN, "--seq", "500"]);
    std::fs::write(&proof, stdout(&out)).unwrap();
    let record = std::fs::read_to_string(a.dir.path().join("c.jsonl"))
        .unwrap()
        .lines()
        .nth(499)
        .unwrap()
        .to_owned();
    let check = |keys: &[&str], quorum: &str| {
        let mut cmd = bin();
        cmd.args([
            "check-proof",
            "--proof",
            path_str(&proof),
            "--record",
            &record,
            "--trusted-key",
            &a.verifier,
        ]);
        for k in keys {
            cmd.args(["--witness-key", k]);
        }
        cmd.args(["--witness-quorum", quorum]).output().unwrap()
    };
    assert_eq!(code(&check(&[&w1.vkey, &w2.vkey], "2")), 0);
    let out = check(&[&w1.vkey, &w2.vkey, &stranger.vkey], "3");
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    assert!(stdout(&out).contains("uncosigned"), "{}", stdout(&out));

    // The log grows: the witnesses cosign from the size they know.
    let backup = a.dir.path().join("w1-backup.db");
    std::fs::copy(w1.dir.path().join("witness.db"), &backup).unwrap();
    append(&a.db, 500);
    assert_eq!(code(&follow_once(&a, "c", &witness_flags(&[&w1, &w2], 2))), 0);
    assert!(cosigned(&a, 1500).exists());
    // Incremental: the state's checkpoint (cosigned) and the new one (cosigned).
    let (c, v) = verify_with(&a, &[&w1.vkey, &w2.vkey], 2, &with_state);
    assert_eq!((c, &v["state"]["incremental"]), (0, &Value::Bool(true)), "{v}");
    assert_eq!(v["checkpoints"]["cosigned"]["newest"], 1500, "{v}");
    // A trusted witness that never cosigned: uncosigned, incremental or not.
    let (c, v) = verify_with(&a, &[&w1.vkey, &stranger.vkey], 2, &with_state);
    assert_eq!(c, 1, "{v}");
    assert!(
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["kind"] == "uncosigned"),
        "{v}"
    );
    // w1 comes back with its state of size 1000: it answers 409 with 1000,
    // the follower proves 1000 → 2000 instead, and both cosign.
    w1.stop();
    std::fs::copy(&backup, w1.dir.path().join("witness.db")).unwrap();
    for leftover in ["witness.db-wal", "witness.db-shm"] {
        let _ = std::fs::remove_file(w1.dir.path().join(leftover));
    }
    w1.start();
    append(&a.db, 500);
    let out = follow_once(&a, "c", &witness_flags(&[&w1, &w2], 2));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let note = std::fs::read_to_string(cosigned(&a, 2000)).expect("cosigned after the 409");
    assert_eq!(note.matches("\u{2014} test.example/w").count(), 2, "{note}");
    let (c, v) = verify(&a, &[&w1.vkey, &w2.vkey], 2);
    assert_eq!(c, 0, "{v}");
}

#[test]
fn a_witness_down_delays_cosigning_never_the_export() {
    let a = Anchored::new(500, ORIGIN);
    let w1 = Witness::new("test.example/w1", Some((ORIGIN, &a.verifier)));
    let mut w2 = Witness::new("test.example/w2", Some((ORIGIN, &a.verifier)));
    w2.stop();
    let out = follow_once(&a, "c", &witness_flags(&[&w1, &w2], 2));
    // The export went on; a run that ends without the quorum says so (exit 2,
    // as for an unpublished head: nothing contradicted the log).
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(a.dir.path().join("c.jsonl"))
            .unwrap()
            .lines()
            .count(),
        500
    );
    assert!(!cosigned(&a, 500).exists(), "no quorum while a witness is down");
    assert!(
        stderr(&out).contains("no quorum of witness cosignatures within the shutdown grace"),
        "{}",
        stderr(&out)
    );
    // The witness is back: a running follower asks again and the quorum is reached.
    w2.start();
    let sink = format!("file:{}", path_str(&a.dir.path().join("c.jsonl")));
    let child = bin()
        .args(["follow", "--db", path_str(&a.db), "--origin", ORIGIN, "--sink", &sink])
        .args([
            "--cursor",
            path_str(&a.dir.path().join("c")),
            "--anchor",
            &a.anchor_url(),
        ])
        .args(["--signing-key", path_str(&a.key), "--retry-max-delay", "1s"])
        .args(witness_flags(&[&w1, &w2], 2))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut child = KillOnDrop(child);
    assert!(
        wait_for_file(&cosigned(&a, 500), Duration::from_secs(30)),
        "cosigning catches up"
    );
    signal(&child, SIGTERM);
    assert!(wait_with_limit(&mut child, Duration::from_secs(20)).success());
}

/// A witness that does not know the log (403/404) is named, and kept in
/// `<cursor>.witnesses`, but never stops the export: every record is
/// delivered and the head published; the run ends as for any missing
/// quorum (exit 2).
#[test]
fn a_witness_that_does_not_know_the_log_is_named_and_never_stops_the_export() {
    let a = Anchored::new(200, ORIGIN);
    let w = Witness::new("test.example/nolog", None);
    let out = follow_once(&a, "c", &witness_flags(&[&w], 1));
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("test.example/nolog") && stderr(&out).contains("refuses origin"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("no quorum of witness cosignatures"),
        "{}",
        stderr(&out)
    );
    let delivered = std::fs::read_to_string(a.dir.path().join("c.jsonl")).unwrap();
    assert_eq!(delivered.lines().count(), 200);
    assert!(a.anchors.join(ORIGIN).join(format!("{:020}.head", 200)).is_file());
    let said = std::fs::read_to_string(a.dir.path().join("c.witnesses")).unwrap();
    assert!(said.contains("refuses origin"), "{said}");
}

/// A database restored from an older backup and grown again, followed from
/// a fresh cursor with the same key into a fresh store: the witnesses,
/// which saw the real log, answer 422; the follower reports both sizes and
/// stops; no cosigned checkpoint of the fork exists.
#[test]
fn a_fork_is_refused_by_the_witnesses() {
    let a = Anchored::new(600, ORIGIN);
    let restored = a.dir.path().join("restored.db");
    std::fs::copy(&a.db, &restored).unwrap();
    append(&a.db, 400);
    let w1 = Witness::new("test.example/w1", Some((ORIGIN, &a.verifier)));
    let w2 = Witness::new("test.example/w2", Some((ORIGIN, &a.verifier)));
    assert_eq!(code(&follow_once(&a, "c", &witness_flags(&[&w1, &w2], 2))), 0);
    assert!(cosigned(&a, 1000).exists());

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
    assert_eq!(code(&grow), 0);
    let fresh = TempDir::new().unwrap();
    let fork = Anchored {
        dir: TempDir::new().unwrap(),
        db: restored,
        anchors: fresh.path().to_owned(),
        key: a.key.clone(),
        verifier: a.verifier.clone(),
    };
    let out = follow_once(&fork, "f", &witness_flags(&[&w1, &w2], 2));
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let err = stderr(&out);
    // The fork's checkpoint 1100 (or its 1000, when that one went first) against the witnessed 1000.
    assert!(
        err.contains("witness-inconsistent") && err.contains("size 1000"),
        "{err}"
    );
    assert!(
        !fresh.path().join(ORIGIN).join("cosigned").exists(),
        "no cosigned checkpoint of the fork"
    );

    // With --on-break wait the export goes on, and the run still ends with exit 1, never a quiet 0.
    let other = TempDir::new().unwrap();
    let waiting = Anchored {
        dir: TempDir::new().unwrap(),
        db: fork.db.clone(),
        anchors: other.path().to_owned(),
        key: a.key.clone(),
        verifier: a.verifier.clone(),
    };
    let mut flags = witness_flags(&[&w1, &w2], 2);
    flags.extend(["--on-break".to_owned(), "wait".to_owned()]);
    let out = follow_once(&waiting, "w", &flags);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(stderr(&out).contains("witness-inconsistent"), "{}", stderr(&out));
    let delivered = std::fs::read_to_string(waiting.dir.path().join("w.jsonl")).unwrap();
    assert_eq!(delivered.lines().count(), 1100, "the export went on");
    assert!(!other.path().join(ORIGIN).join("cosigned").exists());
}

/// A witness counted twice never fills a quorum, `check` passes a witness
/// only when its cosignature verifies with the key given, and bad URLs are
/// usage errors.
#[test]
fn a_witness_counts_once_and_check_verifies_its_key() {
    let a = Anchored::new(300, ORIGIN);
    let w1 = Witness::new("test.example/w1", Some((ORIGIN, &a.verifier)));
    let w2 = Witness::new("test.example/w2", Some((ORIGIN, &a.verifier)));
    let twice = follow_once(&a, "c", &witness_flags(&[&w1, &w1], 2));
    assert_eq!(code(&twice), 2, "{}", stderr(&twice));
    assert!(stderr(&twice).contains("listed twice"), "{}", stderr(&twice));
    let bad_port = follow_once(
        &a,
        "c",
        &["--witness".into(), format!("http://127.0.0.1:99999={}", w1.vkey)],
    );
    assert_eq!(code(&bad_port), 2, "{}", stderr(&bad_port));
    assert_eq!(code(&follow_once(&a, "c", &witness_flags(&[&w1, &w2], 2))), 0);

    // An auditor listing one witness twice still needs two witnesses.
    let (c, _) = verify(&a, &[&w1.vkey], 1);
    assert_eq!(c, 0);
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
        "--witness-key",
        &w1.vkey,
        "--witness-key",
        &w1.vkey,
        "--witness-quorum",
        "2",
    ]);
    assert_eq!(code(&out), 2, "{}{}", stdout(&out), stderr(&out));

    let check = |spec: String| {
        bin()
            .args(["check", "--db", path_str(&a.db), "--origin", ORIGIN])
            .args(["--sink", &format!("file:{}", path_str(&a.dir.path().join("c.jsonl")))])
            .args([
                "--cursor",
                path_str(&a.dir.path().join("c")),
                "--anchor",
                &a.anchor_url(),
            ])
            .args(["--signing-key", path_str(&a.key), "--witness", &spec])
            .output()
            .unwrap()
    };
    let ok = check(w1.spec());
    assert_eq!(code(&ok), 0, "{}", stdout(&ok));
    assert!(stdout(&ok).contains("its cosignature verifies"), "{}", stdout(&ok));
    // w2's URL with w1's key: the cosignature does not verify.
    let wrong = check(format!("{}={}", w2.url(), w1.vkey));
    assert_eq!(code(&wrong), 1, "{}", stdout(&wrong));
    assert!(
        stdout(&wrong).contains("no cosignature that verifies"),
        "{}",
        stdout(&wrong)
    );
}

/// The raw Ed25519 key, in hex, inside a C2SP verifier or witness key text
/// (`name+id+base64(type || key)`), as a Sigsum policy writes keys.
fn policy_hex(vkey: &str) -> String {
    use base64::Engine;
    let blob = base64::engine::general_purpose::STANDARD
        .decode(vkey.splitn(3, '+').nth(2).unwrap())
        .unwrap();
    assert_eq!(blob.len(), 33, "{vkey}");
    hex::encode(&blob[1..])
}

fn verify_policy(a: &Anchored, policy: &str, extra: &[&str]) -> (i32, Value) {
    let file = a.dir.path().join("trust.policy");
    std::fs::write(&file, policy).unwrap();
    let out = bin()
        .args([
            "anchor",
            "verify",
            "--json",
            "--db",
            path_str(&a.db),
            "--anchor",
            &a.anchor_url(),
        ])
        .args(["--origin", ORIGIN, "--policy", path_str(&file), "--witness-grace", "0s"])
        .args(extra)
        .output()
        .unwrap();
    let v: Value =
        serde_json::from_str(&stdout(&out)).unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&out), stderr(&out)));
    (code(&out), v)
}

/// Trust given as a Sigsum policy file: its `log` key vouches for heads and
/// checkpoints (under whatever name they are signed), its witnesses and
/// nested groups decide the quorum, and a quorum the cosignatures do not
/// meet fails naming the checkpoint and the group.
#[test]
fn a_sigsum_policy_decides_trust_and_the_quorum() {
    let a = Anchored::new(500, ORIGIN);
    let w1 = Witness::new("test.example/w1", Some((ORIGIN, &a.verifier)));
    let w2 = Witness::new("test.example/w2", Some((ORIGIN, &a.verifier)));
    let out = follow_once(&a, "c", &witness_flags(&[&w1, &w2], 2));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let (log, k1, k2) = (policy_hex(&a.verifier), policy_hex(&w1.vkey), policy_hex(&w2.vkey));
    // A witness that never cosigned (any key will do).
    let absent = hex::encode(
        ed25519_dalek::SigningKey::from_bytes(&[0x3b; 32])
            .verifying_key()
            .as_bytes(),
    );
    let met = format!(
        "# the auditors' policy\nlog {log}\nwitness alpha {k1}\nwitness beta {k2}\nwitness gamma {absent}\ngroup two 2 alpha beta gamma\nquorum two\n"
    );
    let (c, v) = verify_policy(&a, &met, &[]);
    assert_eq!(c, 0, "{v}");
    assert_eq!(v["last_trusted_head"]["seq"], 500, "{v}");
    let unmet = format!(
        "log {log}\nwitness alpha {k1}\nwitness beta {k2}\nwitness gamma {absent}\ngroup pair any alpha beta\ngroup all-three all pair gamma\nquorum all-three\n"
    );
    let (c, v) = verify_policy(&a, &unmet, &[]);
    assert_eq!(c, 1, "{v}");
    let uncosigned: Vec<&Value> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "uncosigned")
        .collect();
    assert!(
        uncosigned
            .iter()
            .any(|f| f["message"].as_str().unwrap().contains("group all-three") && f["seq"] == 500),
        "{v}"
    );
    // A proof is held to the policy's quorum too (check-proof).
    let proof = a.dir.path().join("p");
    let out = run(&["prove", "--anchor", &a.anchor_url(), "--origin", ORIGIN, "--seq", "500"]);
    std::fs::write(&proof, stdout(&out)).unwrap();
    let record = std::fs::read_to_string(a.dir.path().join("c.jsonl"))
        .unwrap()
        .lines()
        .nth(499)
        .unwrap()
        .to_owned();
    let check = |policy: &str| {
        let file = a.dir.path().join("proof.policy");
        std::fs::write(&file, policy).unwrap();
        bin()
            .args(["check-proof", "--proof", path_str(&proof), "--record", &record])
            .args(["--policy", path_str(&file)])
            .output()
            .unwrap()
    };
    let out = check(&met);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let out = check(&unmet);
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    assert!(
        stdout(&out).contains("uncosigned") && stdout(&out).contains("group all-three"),
        "{}",
        stdout(&out)
    );

    // A policy that trusts another log key trusts none of these heads.
    let other = format!("log {absent}\nquorum none\n");
    let (c, v) = verify_policy(&a, &other, &[]);
    assert_eq!(c, 1, "{v}");
    assert!(
        v.to_string().contains("no-trusted-head") || v.to_string().contains("untrusted-key"),
        "{v}"
    );
    // A malformed policy is one line naming the file and the line, exit 2.
    let out = bin()
        .args([
            "anchor",
            "verify",
            "--db",
            path_str(&a.db),
            "--anchor",
            &a.anchor_url(),
            "--origin",
            ORIGIN,
        ])
        .args(["--policy", path_str(&a.dir.path().join("bad.policy"))])
        .output()
        .unwrap();
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    std::fs::write(a.dir.path().join("bad.policy"), format!("log {log}\nquorum nobody\n")).unwrap();
    let out = bin()
        .args([
            "anchor",
            "verify",
            "--db",
            path_str(&a.db),
            "--anchor",
            &a.anchor_url(),
            "--origin",
            ORIGIN,
        ])
        .args(["--policy", path_str(&a.dir.path().join("bad.policy"))])
        .output()
        .unwrap();
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("bad.policy: line 2"), "{}", stderr(&out));
}

/// The metric names a PromQL text uses (`chainship_…`).
fn metric_names(text: &str) -> std::collections::BTreeSet<String> {
    let mut names = std::collections::BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("chainship_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        names.insert(tail[..end].to_owned());
        rest = &tail[end..];
    }
    names
}

/// The names an exposition declares (`# TYPE NAME KIND`).
fn exposed(text: &str) -> std::collections::BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// The names the dashboard's panel queries use that `known` lacks.
fn unknown_in_dashboard(dashboard: &str, known: &std::collections::BTreeSet<String>) -> Vec<String> {
    let doc: Value = serde_json::from_str(dashboard).expect("the dashboard is JSON");
    let mut exprs = String::new();
    for panel in doc["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().expect("each panel has targets") {
            exprs += target["expr"].as_str().expect("each target has an expr");
            exprs.push('\n');
        }
    }
    metric_names(&exprs)
        .into_iter()
        .filter(|n| !known.contains(n))
        .collect()
}

/// The Grafana dashboard and the alert rules query only metrics the program
/// exports: read from a running follower's `/metrics` (anchoring, a witness
/// and the run check on) and the textfiles of `anchor verify` and
/// `verify-export`. A metric renamed in the code and not in the dashboard
/// fails this test; so does one renamed in a copy of the dashboard.
#[test]
fn the_dashboard_and_the_alert_rules_use_only_metrics_the_program_exports() {
    let a = Anchored::new(300, ORIGIN);
    let w = Witness::new("test.example/metrics", Some((ORIGIN, &a.verifier)));
    let port = free_port();
    let sink = a.dir.path().join("events.jsonl");
    let mut follower = KillOnDrop(
        Follow::new(&a.db, ORIGIN)
            .file_sink(&sink)
            .cursor(&a.dir.path().join("cursor"))
            .start_at_seq_1()
            .anchored(&a)
            .args(witness_flags(&[&w], 1))
            .args([
                "--metrics-addr",
                &format!("127.0.0.1:{port}"),
                "--anchor-interval",
                "0s",
            ])
            .command()
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let metrics = loop {
        if let Some((200, body)) = http_get(port, "/metrics", Duration::from_secs(2))
            && body.contains("chainship_witness_last_success_timestamp_seconds{")
        {
            break body;
        }
        assert!(Instant::now() < deadline, "the follower never reported a cosignature");
        std::thread::sleep(Duration::from_millis(200));
    };
    signal(&follower, SIGTERM);
    let _ = follower.wait();

    let verify_file = a.dir.path().join("verify.prom");
    let out = bin()
        .args(["anchor", "verify", "--db", path_str(&a.db), "--anchor", &a.anchor_url()])
        .args(["--origin", ORIGIN, "--trusted-key", &a.verifier])
        .args(["--metrics-textfile", path_str(&verify_file)])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let export_file = a.dir.path().join("export.prom");
    let out = bin()
        .args(["verify-export", "--from", &format!("file:{}", path_str(&sink))])
        .args([
            "--anchor",
            &a.anchor_url(),
            "--origin",
            ORIGIN,
            "--trusted-key",
            &a.verifier,
        ])
        .args(["--metrics-textfile", path_str(&export_file)])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));

    // The monitor's series, a finding among them: a forged repeat of seq 5 appended to the copy.
    let line = std::fs::read_to_string(&sink)
        .unwrap()
        .lines()
        .nth(4)
        .unwrap()
        .to_owned();
    let mut forged: serde_json::Value = serde_json::from_str(&line).unwrap();
    forged["payload_json"] = serde_json::Value::String("{}".into());
    let mut text = std::fs::read_to_string(&sink).unwrap();
    text += &format!("{forged}\n");
    std::fs::write(&sink, text).unwrap();
    let monitor_port = free_port();
    let mut monitor = KillOnDrop(
        bin()
            .args([
                "monitor",
                "--from",
                &format!("file:{}", path_str(&sink)),
                "--anchor",
                &a.anchor_url(),
            ])
            .args(["--origin", ORIGIN, "--trusted-key", &a.verifier, "--max-age", "1h"])
            .args(["--state", path_str(&a.dir.path().join("monitor"))])
            .args(["--metrics-addr", &format!("127.0.0.1:{monitor_port}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let monitor_metrics = loop {
        if let Some((200, body)) = http_get(monitor_port, "/metrics", Duration::from_secs(2))
            && body.contains("chainship_monitor_findings_total{")
            && body.contains("chainship_monitor_verified_seq{")
            && body.contains("chainship_monitor_head_age_seconds{")
        {
            break body;
        }
        assert!(Instant::now() < deadline, "the monitor never reported its finding");
        std::thread::sleep(Duration::from_millis(200));
    };
    signal(&monitor, SIGTERM);
    let _ = monitor.wait();

    let mut known = exposed(&metrics);
    known.extend(exposed(&monitor_metrics));
    known.extend(exposed(&std::fs::read_to_string(&verify_file).unwrap()));
    known.extend(exposed(&std::fs::read_to_string(&export_file).unwrap()));
    assert!(known.len() > 25, "{known:?}");

    let dashboard = std::fs::read_to_string(repo_file("deploy/grafana/chainship.json")).unwrap();
    let unknown = unknown_in_dashboard(&dashboard, &known);
    assert!(
        unknown.is_empty(),
        "the dashboard queries metrics the program does not export: {unknown:?}"
    );
    // Every panel the operator needs is there, each with a query.
    for needed in [
        "chainship_export_lag_events",
        "chainship_anchor_seconds_since_publish",
        "chainship_witness_last_success_timestamp_seconds",
        "chainship_run_findings_total",
        "chainship_unknown_outcomes",
        "chainship_job_findings",
        "chainship_job_result",
        "chainship_monitor_verified_seq",
        "chainship_monitor_findings_total",
        "chainship_monitor_head_age_seconds",
        "chainship_monitor_checkpoint_size",
    ] {
        assert!(dashboard.contains(needed), "the dashboard has no panel on {needed}");
    }
    let rules = std::fs::read_to_string(repo_file("deploy/prometheus/chainship-rules.yml")).unwrap();
    let unknown: Vec<String> = metric_names(&rules)
        .into_iter()
        .filter(|n| !known.contains(n))
        .collect();
    assert!(
        unknown.is_empty(),
        "the alert rules query metrics the program does not export: {unknown:?}"
    );

    // The check itself catches a rename: a copy of the dashboard with one
    // metric renamed is refused, naming it.
    let renamed = dashboard.replace("chainship_export_lag_events", "chainship_export_lag");
    assert_eq!(
        unknown_in_dashboard(&renamed, &known),
        vec!["chainship_export_lag".to_owned()]
    );
}

/// A file of the repository.
fn repo_file(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}
