//! Anchoring end to end with the file anchor store: a database exported
//! and anchored by the follower, then damaged in each way the failure
//! table names, and `anchor verify` naming each by kind and seq.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common::*;
use tempfile::TempDir;

const ORIGIN: &str = "audit/agentrt";

/// `events` events exported with batches of 100. A fast export keeps only
/// the newest delivered head, so the database grows in four steps, each
/// exported: at least four heads are kept.
fn export_anchored(events: u64) -> Anchored {
    let step = events / 4;
    let a = Anchored::new(events - 3 * step, "audit/chainship");
    follow(&a, &a.db, &a.key, "out.jsonl", "cursor");
    for _ in 0..3 {
        append(&a.db, step);
        follow(&a, &a.db, &a.key, "out.jsonl", "cursor");
    }
    a
}

fn follow(a: &Anchored, db: &Path, key: &Path, out: &str, cursor: &str) {
    let res = bin()
        .args([
            "follow",
            "--once",
            "--db",
            path_str(db),
            "--origin",
            ORIGIN,
            "--batch-size",
            "100",
            "--from-start",
        ])
        .args(["--sink", &format!("file:{}", path_str(&a.dir.path().join(out)))])
        .args(["--cursor", path_str(&a.dir.path().join(cursor))])
        .args([
            "--anchor",
            &format!("file:{}", path_str(&a.anchors)),
            "--signing-key",
            path_str(key),
        ])
        .output()
        .unwrap();
    assert_eq!(code(&res), 0, "{}", stderr(&res));
}

fn anchor_verify(a: &Anchored, db: &Path, keys: &[&str]) -> (Output, serde_json::Value) {
    let mut cmd = bin();
    cmd.args(["anchor", "verify", "--json", "--db", path_str(db), "--origin", ORIGIN]);
    cmd.args(["--anchor", &format!("file:{}", path_str(&a.anchors))]);
    for k in keys {
        cmd.args(["--trusted-key", k]);
    }
    let out = cmd.output().unwrap();
    let json = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&out), stderr(&out)));
    (out, json)
}

/// The findings as (kind, seq) pairs.
fn findings(json: &serde_json::Value) -> Vec<(String, Option<u64>)> {
    json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["kind"].as_str().unwrap().to_owned(), f["seq"].as_u64()))
        .collect()
}

fn last_trusted(json: &serde_json::Value) -> Option<u64> {
    json["last_trusted_head"]["seq"].as_u64()
}

fn damaged_copy(a: &Anchored, name: &str, sql: &str) -> PathBuf {
    let copy = a.dir.path().join(name);
    std::fs::copy(&a.db, &copy).unwrap();
    tamper(&copy).execute_batch(sql).unwrap();
    copy
}

fn head_file(a: &Anchored, seq: u64) -> PathBuf {
    a.anchors.join(ORIGIN).join(format!("{seq:020}.head"))
}

/// The seqs of the heads kept. The publisher coalesces heads when the store
/// is slower than the batches, so tests ask the store rather than assume.
fn kept_seqs(a: &Anchored) -> Vec<u64> {
    kept_seqs_in(&a.anchors)
}

fn kept_seqs_in(anchors: &Path) -> Vec<u64> {
    // Heads and heartbeats; the transparency log beside them is not a head.
    let mut seqs: Vec<u64> = std::fs::read_dir(anchors.join(ORIGIN))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".head"))
        .map(|n| n[..20].parse().unwrap())
        .collect();
    seqs.sort();
    seqs
}

/// The highest kept head below `seq`.
fn kept_below(a: &Anchored, seq: u64) -> Option<u64> {
    kept_seqs(a).into_iter().filter(|s| *s < seq).max()
}

#[test]
fn an_intact_export_verifies_against_every_head() {
    let a = export_anchored(1000);
    let heads = kept_seqs(&a).len();
    assert!(
        heads >= 2,
        "a head per delivered batch (coalesced while one is in flight): {heads}"
    );
    assert!(head_file(&a, 1000).exists(), "the final head is always published");
    let (out, json) = anchor_verify(&a, &a.db, &[&a.verifier]);
    assert_eq!(code(&out), 0, "{json}");
    assert_eq!(json["status"], "ok");
    assert_eq!(last_trusted(&json), Some(1000));
    assert_eq!(json["heads"]["trusted"].as_u64().unwrap() as usize, heads);
}

#[test]
fn the_failure_table_names_each_kind_and_seq() {
    let a = export_anchored(1000);
    let v = a.verifier.as_str();

    let dropped = damaged_copy(&a, "dropped.db", "DELETE FROM events WHERE seq = 420");
    let (out, json) = anchor_verify(&a, &dropped, &[v]);
    assert_eq!(code(&out), 1);
    // The row is missing; the next is checked against the log's entry at
    // seq 420; the rest is vouched for again (heads and checkpoint leaves past it).
    assert_eq!(findings(&json), vec![("gap".into(), Some(420))], "{json}");
    assert_eq!(last_trusted(&json), kept_below(&a, 420));

    let swapped = damaged_copy(
        &a,
        "swapped.db",
        "UPDATE events SET seq = -1 WHERE seq = 555; UPDATE events SET seq = 555 WHERE seq = 556; UPDATE events SET seq = 556 WHERE seq = -1;",
    );
    let (_, json) = anchor_verify(&a, &swapped, &[v]);
    assert_eq!(findings(&json), vec![("altered".into(), Some(555))], "{json}");

    let mutated = damaged_copy(
        &a,
        "mutated.db",
        "UPDATE events SET type = 'approval.forged' WHERE seq = 77",
    );
    let (_, json) = anchor_verify(&a, &mutated, &[v]);
    assert_eq!(findings(&json), vec![("altered".into(), Some(77))], "{json}");
    assert_eq!(last_trusted(&json), None, "no head below seq 77 (batches of 100)");

    let cut = damaged_copy(&a, "cut.db", "DELETE FROM events WHERE seq > 950");
    let (out, json) = anchor_verify(&a, &cut, &[v]);
    assert_eq!(code(&out), 1);
    assert_eq!(findings(&json), vec![("cut".into(), Some(1000))], "{json}");
    assert!(
        json["findings"][0]["source"]
            .as_str()
            .unwrap()
            .ends_with("00000000000000001000.head")
    );
    assert_eq!(last_trusted(&json), kept_below(&a, 951));
}

#[test]
fn a_restored_older_copy_that_grew_again_is_a_fork_at_the_first_head_past_it() {
    let a = export_anchored(600);
    // The backup taken at 350 events, restored, then written to again.
    let restored = damaged_copy(&a, "restored.db", "DELETE FROM events WHERE seq > 350");
    let grew = run(&[
        "generate",
        "--db",
        path_str(&restored),
        "--append",
        "--events",
        "400",
        "--seed",
        "99",
    ]);
    assert_eq!(code(&grew), 0, "{}", stderr(&grew));
    let (out, json) = anchor_verify(&a, &restored, &[&a.verifier]);
    assert_eq!(code(&out), 1);
    let found = findings(&json);
    let first_past = kept_seqs(&a).into_iter().find(|s| *s > 350);
    // Rewritten from exactly the first event past the backup (the
    // checkpoint's leaves say where), and contradicted by the heads past it.
    assert_eq!(found[0], ("fork".into(), Some(351)), "{json}");
    assert!(found.contains(&("fork".into(), first_past)), "{json}");
    assert!(found.iter().all(|(k, _)| k == "fork"), "{json}");
    assert_eq!(last_trusted(&json), kept_below(&a, 351));
}

#[test]
fn an_edited_head_is_a_bad_signature() {
    let a = export_anchored(500);
    let edited = kept_seqs(&a)[0];
    let path = head_file(&a, edited);
    let text = std::fs::read_to_string(&path).unwrap();
    let hash_line = text.lines().find(|l| l.starts_with("hash ")).unwrap().to_owned();
    let forged = hash_line.replace(&hash_line[5..9], "0000");
    std::fs::write(&path, text.replace(&hash_line, &forged)).unwrap();
    let (out, json) = anchor_verify(&a, &a.db, &[&a.verifier]);
    assert_eq!(code(&out), 1);
    assert_eq!(findings(&json), vec![("bad-signature".into(), Some(edited))], "{json}");
    assert_eq!(last_trusted(&json), Some(500), "the other heads still hold");
}

#[test]
fn key_rotation_and_dropping_the_old_key() {
    let a = export_anchored(300);
    let old_heads = kept_seqs(&a);
    // More events, exported and anchored with a new key only.
    append(&a.db, 300);
    let (new_key, new_verifier) = keygen(a.dir.path(), "audit/chainship-2027", "new.key");
    follow(&a, &a.db, &new_key, "out.jsonl", "cursor");

    let (out, json) = anchor_verify(&a, &a.db, &[&a.verifier, &new_verifier]);
    assert_eq!(code(&out), 0, "both keys trusted: {json}");
    assert_eq!(last_trusted(&json), Some(600));

    let (out, json) = anchor_verify(&a, &a.db, &[&new_verifier]);
    assert_eq!(code(&out), 1);
    // Each old head, and the checkpoint published with it, signed by the dropped key.
    let found = findings(&json);
    assert_eq!(
        found.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
        vec!["untrusted-key"; 2 * old_heads.len()],
        "{json}"
    );
    let mut seqs: Vec<u64> = found.iter().map(|(_, s)| s.unwrap()).collect();
    seqs.dedup();
    assert_eq!(seqs, old_heads);
    assert_eq!(last_trusted(&json), Some(600));
}

#[test]
fn a_head_that_goes_backwards_is_heads_disagree() {
    let a = export_anchored(300);
    // Forge, with the real key, a head published later but with a lower seq
    // and another hash, stored where no head is yet.
    let key = chainship_anchor::SignerKey::load(&a.key).unwrap();
    let hash = "ab".repeat(32);
    let head: chainship_chain::Head = format!("150:{hash}").parse().unwrap();
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(3600);
    let note = chainship_anchor::SignedHead::new(ORIGIN, head, later)
        .sign(&[key.shared()])
        .unwrap();
    std::fs::write(head_file(&a, 150), note).unwrap();
    let (out, json) = anchor_verify(&a, &a.db, &[&a.verifier]);
    assert_eq!(code(&out), 1);
    let kinds: Vec<String> = findings(&json).into_iter().map(|(k, _)| k).collect();
    assert!(kinds.contains(&"heads-disagree".to_owned()), "{json}");
    assert!(
        kinds.contains(&"fork".to_owned()),
        "the forged hash is not the database's: {json}"
    );
}

#[test]
fn max_age_reports_a_stale_log() {
    let a = export_anchored(100);
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let out = bin()
        .args([
            "anchor",
            "verify",
            "--db",
            path_str(&a.db),
            "--origin",
            ORIGIN,
            "--max-age",
            "1s",
        ])
        .args([
            "--anchor",
            &format!("file:{}", path_str(&a.anchors)),
            "--trusted-key",
            &a.verifier,
        ])
        .output()
        .unwrap();
    assert_eq!(code(&out), 1);
    assert!(
        stdout(&out).contains("stale: the newest head (100:"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn a_head_signature_verifies_with_openssl_from_the_note_and_verifier_key_alone() {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD;
    let a = export_anchored(100);
    let note = std::fs::read_to_string(head_file(&a, 100)).unwrap();
    let (text, sig_line) = note.rsplit_once("\n\n").unwrap();
    let text = format!("{text}\n");
    let sig_b64 = sig_line.trim_end().rsplit(' ').next().unwrap();
    let sig = b64.decode(sig_b64).unwrap();
    let mut parts = a.verifier.splitn(3, '+');
    let (_name, id, key) = (parts.next().unwrap(), parts.next().unwrap(), parts.next().unwrap());
    let key = b64.decode(key).unwrap();
    assert_eq!(key[0], 1, "Ed25519 type byte");
    assert_eq!(hex::encode(&sig[..4]), id, "the signature line carries the key id");
    // SubjectPublicKeyInfo for an Ed25519 key: fixed DER prefix + 32 bytes.
    let mut der = hex::decode("302a300506032b6570032100").unwrap();
    der.extend_from_slice(&key[1..]);
    let dir = a.dir.path();
    std::fs::write(dir.join("pub.der"), &der).unwrap();
    std::fs::write(dir.join("msg"), text.as_bytes()).unwrap();
    std::fs::write(dir.join("sig"), &sig[4..]).unwrap();
    let check = |msg: &str| {
        std::process::Command::new("openssl")
            .args(["pkeyutl", "-verify", "-pubin", "-keyform", "DER", "-rawin"])
            .args([
                "-inkey",
                path_str(&dir.join("pub.der")),
                "-in",
                msg,
                "-sigfile",
                path_str(&dir.join("sig")),
            ])
            .output()
            .expect("openssl is installed")
    };
    let ok = check(path_str(&dir.join("msg")));
    assert!(ok.status.success(), "openssl rejects: {}{}", stdout(&ok), stderr(&ok));
    std::fs::write(dir.join("msg2"), text.replace("seq 100", "seq 101")).unwrap();
    assert!(
        !check(path_str(&dir.join("msg2"))).status.success(),
        "openssl must reject an edited note"
    );
}

#[test]
fn keygen_and_follow_refuse_unsafe_key_files() {
    let dir = TempDir::new().unwrap();
    let (key, _) = keygen(dir.path(), "k", "k.key");
    let again = run(&["keygen", "--name", "k", "--out", path_str(&key)]);
    assert_eq!(code(&again), 2, "never overwrites a key");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let db = generate(dir.path(), "a.db", 10);
    std::fs::create_dir(dir.path().join("anchors")).unwrap();
    let res = bin()
        .args([
            "follow",
            "--once",
            "--db",
            path_str(&db),
            "--origin",
            ORIGIN,
            "--from-start",
        ])
        .args(["--sink", &format!("file:{}", path_str(&dir.path().join("o.jsonl")))])
        .args(["--cursor", path_str(&dir.path().join("c"))])
        .args(["--anchor", &format!("file:{}", path_str(&dir.path().join("anchors")))])
        .args(["--signing-key", path_str(&key)])
        .output()
        .unwrap();
    assert_eq!(code(&res), 2);
    assert!(stderr(&res).contains("chmod 600"), "{}", stderr(&res));
    assert!(!dir.path().join("o.jsonl").exists(), "nothing shipped with a bad key");
}

#[test]
fn an_unreadable_anchor_store_is_exit_2_not_a_pass() {
    let a = export_anchored(100);
    let out = bin()
        .args([
            "anchor",
            "verify",
            "--db",
            path_str(&a.db),
            "--origin",
            ORIGIN,
            "--trusted-key",
            &a.verifier,
        ])
        .args(["--anchor", "file:/nonexistent-anchor-mount"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 2, "{}{}", stdout(&out), stderr(&out));
    assert!(stderr(&out).contains("/nonexistent-anchor-mount"), "{}", stderr(&out));
}

#[test]
fn a_second_export_of_the_origin_never_publishes_below_the_kept_heads() {
    let a = export_anchored(1000);
    let before = kept_seqs(&a);
    // The same origin exported again (another sink, another cursor), in batches
    // whose heads would fall between and below the kept ones.
    let res = bin()
        .args([
            "follow",
            "--once",
            "--from-start",
            "--db",
            path_str(&a.db),
            "--origin",
            ORIGIN,
            "--batch-size",
            "70",
        ])
        .args([
            "--sink",
            &format!("file:{}", path_str(&a.dir.path().join("second.jsonl"))),
        ])
        .args(["--cursor", path_str(&a.dir.path().join("cursor2"))])
        .args([
            "--anchor",
            &format!("file:{}", path_str(&a.anchors)),
            "--signing-key",
            path_str(&a.key),
        ])
        .output()
        .unwrap();
    assert_eq!(code(&res), 0, "{}", stderr(&res));
    assert_eq!(kept_seqs(&a), before, "no head below the highest kept one");
    let (out, json) = anchor_verify(&a, &a.db, &[&a.verifier]);
    assert_eq!(code(&out), 0, "{json}");
}

#[test]
fn the_anchor_interval_bounds_the_heads_and_the_last_one_goes_out_at_stop() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "busy.db", 200);
    let anchors = dir.path().join("anchors");
    std::fs::create_dir(&anchors).unwrap();
    let (key, _) = keygen(dir.path(), "audit/chainship", "head.key");
    let cursor = dir.path().join("cursor");
    let mut writer = live_writer(&db, "400", &[]);
    let mut follower = KillOnDrop(
        bin()
            .args(["follow", "--db", path_str(&db), "--origin", ORIGIN, "--from-start"])
            .args([
                "--batch-size",
                "20",
                "--poll-interval",
                "50ms",
                "--anchor-interval",
                "60s",
            ])
            .args(["--sink", &format!("file:{}", path_str(&dir.path().join("out.jsonl")))])
            .args(["--cursor", path_str(&cursor)])
            .args([
                "--anchor",
                &format!("file:{}", path_str(&anchors)),
                "--signing-key",
                path_str(&key),
            ])
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(std::time::Duration::from_secs(4));
    let head = stop_writer(&mut writer, &db);
    wait_for_cursor(&cursor, &head, std::time::Duration::from_secs(20));
    let final_seq: u64 = head.split(':').next().unwrap().parse().unwrap();
    assert!(final_seq > 200 + 1000, "the writer wrote on: {final_seq}");
    let heads = || kept_seqs_in(&anchors);
    // Dozens of batches of at most 20 events went out, but within the interval only the first head.
    assert_eq!(heads().len(), 1, "{:?}", heads());
    let stopping = std::time::Instant::now();
    signal(&follower, SIGTERM);
    assert!(wait_with_limit(&mut follower, std::time::Duration::from_secs(10)).success());
    assert!(
        stopping.elapsed() < std::time::Duration::from_secs(4),
        "the last head does not wait for the interval: {:?}",
        stopping.elapsed()
    );
    let kept = heads();
    assert_eq!((kept.len(), kept.last()), (2, Some(&final_seq)), "{kept:?}");
}

/// With the defaults (`--anchor-interval 10s`), an export of many batches
/// keeps the first head and the last one, not one per batch, and `anchor
/// verify` still checks every event against the last.
#[test]
fn by_default_an_export_keeps_a_head_per_interval_not_per_batch() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "many.db", 1000);
    let anchors = dir.path().join("anchors");
    std::fs::create_dir(&anchors).unwrap();
    let (key, verifier) = keygen(dir.path(), "audit/chainship", "head.key");
    let out = default_bin()
        .args([
            "follow",
            "--once",
            "--db",
            path_str(&db),
            "--origin",
            ORIGIN,
            "--from-start",
        ])
        .args(["--batch-size", "20"])
        .args(["--sink", &format!("file:{}", path_str(&dir.path().join("out.jsonl")))])
        .args(["--cursor", path_str(&dir.path().join("cursor"))])
        .args(["--anchor", &format!("file:{}", path_str(&anchors))])
        .args(["--signing-key", path_str(&key)])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let kept = kept_seqs_in(&anchors);
    // 50 batches in well under 10 s: the first head, then the last at stop.
    assert_eq!((kept.len(), kept.last()), (2, Some(&1000)), "{kept:?}");
    let out = bin()
        .args(["anchor", "verify", "--db", path_str(&db), "--origin", ORIGIN])
        .args([
            "--anchor",
            &format!("file:{}", path_str(&anchors)),
            "--trusted-key",
            verifier.as_str(),
        ])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stdout(&out));
}
