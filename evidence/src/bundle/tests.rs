//! The bundle check on bundles made in memory: a small log of two runs,
//! its tree, a signed checkpoint and head, proofs from the tree itself.
//! Each change an attacker could make is named; the untouched bundle passes.

use ed25519_dalek::SigningKey;
use serde_json::json;

use chainship_anchor::checkpoint::Checkpoint;
use chainship_anchor::note::{SignedNote, VerifierKey};
use chainship_anchor::signed_head::SignedHead;
use chainship_chain::{Head, event_hash};
use chainship_runs::{AGENTRT, RunCheckConfig};
use chainship_tlog::merkle::{Hash, RangeHashes, inclusion_proof, leaf_hash, root_of};
use chainship_tlog::proof::TlogProof;
use chainship_tlog::range::range_proof;
use chainship_verify::Kind;

use super::check::{CheckInput, EvidenceReport, check};
use super::*;

const ORIGIN: &str = "test/agentrt";

struct Leaves(Vec<Hash>);

impl RangeHashes for Leaves {
    type Error = std::convert::Infallible;
    fn range_hash(&mut self, start: u64, end: u64) -> Result<Hash, Self::Error> {
        Ok(root_of(&self.0[start as usize..end as usize]))
    }
}

/// A log: run "a" (a tool call, allowed and finished) interleaved with run "b".
fn log() -> Vec<serde_json::Value> {
    let events = [
        ("a", "", "run.created", "{}"),
        ("b", "", "run.created", "{}"),
        ("a", "", "run.started", "{}"),
        ("a", "s1", "step.started", "{}"),
        ("b", "", "run.started", "{}"),
        (
            "a",
            "s1",
            "step.decided",
            r#"{"kind":"tool_call","tool":"t","args":{}}"#,
        ),
        ("a", "s1", "step.policy", r#"{"outcome":"allow"}"#),
        ("b", "", "run.finished", r#"{"status":"completed"}"#),
        ("a", "s1", "step.tool_started", r#"{"tool":"t","args":{}}"#),
        ("a", "s1", "step.tool_finished", r#"{"tool":"t"}"#),
        ("a", "", "run.finished", r#"{"status":"completed"}"#),
        ("c", "", "run.created", "{}"),
    ];
    let mut prev = String::new();
    let mut out = Vec::new();
    for (i, (run, step, kind, payload)) in events.iter().enumerate() {
        let seq = i as u64 + 1;
        let at = format!("2026-12-02T10:00:{seq:02}Z");
        let hash = event_hash(
            prev.as_bytes(),
            seq,
            run.as_bytes(),
            step.as_bytes(),
            at.as_bytes(),
            kind.as_bytes(),
            payload.as_bytes(),
        );
        let hash = String::from_utf8(hash.to_vec()).unwrap();
        out.push(
            json!({"origin": ORIGIN, "seq": seq, "run_id": run, "step_id": step, "at": at,
            "type": kind, "payload_json": payload, "hash": hash, "prev_hash": prev}),
        );
        prev = hash;
    }
    out
}

fn key() -> (SigningKey, VerifierKey) {
    let k = SigningKey::from_bytes(&[7; 32]);
    let v = VerifierKey::new(ORIGIN, k.verifying_key());
    (k, v)
}

/// The bundle of run "a", with gaps, proven against the whole log.
fn bundle() -> Vec<(String, Vec<u8>)> {
    let log = log();
    let (k, _) = key();
    let leaves: Vec<Hash> = log
        .iter()
        .map(|e| leaf_hash(e["hash"].as_str().unwrap().as_bytes()))
        .collect();
    let size = log.len() as u64;
    let cp = Checkpoint {
        origin: ORIGIN.into(),
        size,
        root: root_of(&leaves),
    };
    let note = SignedNote::sign(&cp.text(), &[(ORIGIN, &k)]).to_text();
    let newest = &log[size as usize - 1];
    let head_hash: [u8; 64] = newest["hash"].as_str().unwrap().as_bytes().try_into().unwrap();
    let head = SignedHead::new(ORIGIN, Head::new(size, head_hash), std::time::SystemTime::now()).with_checkpoint();
    let mut files = vec![
        (CHECKPOINT.to_owned(), note.clone().into_bytes()),
        (
            HEAD.to_owned(),
            SignedNote::sign(&head.text(), &[(ORIGIN, &k)]).to_text().into_bytes(),
        ),
        (NEWEST.to_owned(), format!("{newest}\n").into_bytes()),
    ];
    let mut records = String::new();
    let mut gaps = String::new();
    let of_a: Vec<u64> = log
        .iter()
        .filter(|e| e["run_id"] == "a")
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    let first = of_a[0];
    for e in &log {
        let seq = e["seq"].as_u64().unwrap();
        if e["run_id"] == "a" || seq == size {
            let hashes = inclusion_proof(seq - 1, size, &mut Leaves(leaves.clone())).unwrap();
            let proof = TlogProof {
                extra: None,
                index: seq - 1,
                hashes,
                checkpoint: note.clone(),
            };
            files.push((proof_name(seq), proof.to_text().into_bytes()));
        }
        if e["run_id"] == "a" {
            records.push_str(&format!("{e}\n"));
        } else if seq > first {
            gaps.push_str(&format!("{seq} {}\n", e["hash"].as_str().unwrap()));
        }
    }
    let range = range_proof(first - 1, size, size, &mut Leaves(leaves.clone())).unwrap();
    let mut proof = format!("{RANGE_PROOF_HEADER}\nstart {}\nend {size}\n", first - 1);
    for h in range {
        proof.push_str(&chainship_tlog::hash_b64(&h));
        proof.push('\n');
    }
    files.push((RECORDS.to_owned(), records.into_bytes()));
    files.push((GAPS.to_owned(), gaps.into_bytes()));
    files.push((GAPS_PROOF.to_owned(), proof.into_bytes()));
    files
}

fn input(keys: &[VerifierKey], require_gaps: bool) -> CheckInput<'_> {
    CheckInput {
        keys,
        witnesses: None,
        run_id: None,
        origin: None,
        profile: &AGENTRT,
        rules: RunCheckConfig::default(),
        reveal: None,
        require_gaps,
        redaction_keys: &[],
    }
}

fn checked(files: Vec<(String, Vec<u8>)>) -> EvidenceReport {
    let (_, v) = key();
    let keys = [v];
    let input = input(&keys, false);
    check(&BundleFiles::from_files(files), &input).expect("a bundle")
}

/// `files` with `name` changed by `change`.
fn with(mut files: Vec<(String, Vec<u8>)>, name: &str, change: impl Fn(&str) -> String) -> Vec<(String, Vec<u8>)> {
    let entry = files.iter_mut().find(|(n, _)| n == name).expect(name);
    entry.1 = change(std::str::from_utf8(&entry.1).unwrap()).into_bytes();
    files
}

fn kinds(r: &EvidenceReport) -> Vec<Option<Kind>> {
    r.not_proven().iter().map(|(_, p)| p.kind).collect()
}

#[test]
fn an_untouched_bundle_is_proven_and_the_run_checked() {
    let r = checked(bundle());
    assert!(
        r.not_proven().is_empty() && r.findings.is_empty(),
        "{:?} {:?}",
        r.not_proven(),
        r.findings
    );
    assert_eq!(r.run_id, "a");
    assert_eq!(r.records.len(), 8);
    assert_eq!(r.gaps.as_ref().map(|g| g.hashes), Some(4));
    assert_eq!(r.summary.as_ref().map(|s| s.tool_calls), Some(1));
}

#[test]
fn each_change_is_named() {
    // A payload changed.
    let r = checked(with(bundle(), RECORDS, |t| {
        t.replacen(r#"{\"tool\":\"t\"}"#, r#"{\"tool\":\"u\"}"#, 1)
    }));
    assert_eq!(kinds(&r), vec![Some(Kind::Altered)]);
    assert_eq!(r.not_proven()[0].0, Some(10));
    // A record left out: under the gaps its seq is unaccounted for.
    let r = checked(with(bundle(), RECORDS, |t| {
        t.lines()
            .filter(|l| !l.contains("\"seq\":4,"))
            .map(|l| format!("{l}\n"))
            .collect()
    }));
    assert!(kinds(&r).contains(&Some(Kind::Gap)), "{:?}", r.not_proven());
    // Another run's record added: not of the run.
    let other = log()[1].to_string();
    let r = checked(with(bundle(), RECORDS, |t| format!("{}{other}\n", t)));
    assert!(kinds(&r).contains(&Some(Kind::Foreign)), "{:?}", r.not_proven());
    // Records out of order.
    let r = checked(with(bundle(), RECORDS, |t| {
        let mut l: Vec<&str> = t.lines().collect();
        l.swap(1, 2);
        l.iter().map(|l| format!("{l}\n")).collect()
    }));
    assert!(kinds(&r).contains(&Some(Kind::Reordered)), "{:?}", r.not_proven());
    // A checkpoint signed by another key.
    let other = SigningKey::from_bytes(&[8; 32]);
    let r = checked(with(bundle(), CHECKPOINT, |t| {
        let note = SignedNote::parse(t.as_bytes()).unwrap();
        SignedNote::sign(&note.text, &[(ORIGIN, &other)]).to_text()
    }));
    assert!(kinds(&r).contains(&Some(Kind::UntrustedKey)), "{:?}", r.not_proven());
    assert!(!r.all_proven());
    // A proof under another seq's name.
    let mut files = bundle();
    let p3 = files.iter().find(|(n, _)| n == &proof_name(3)).unwrap().1.clone();
    files.iter_mut().find(|(n, _)| n == &proof_name(4)).unwrap().1 = p3;
    let r = checked(files);
    assert_eq!(
        r.not_proven().iter().map(|(s, _)| *s).collect::<Vec<_>>(),
        vec![Some(4)]
    );
    // A stray proof beside the records (issue 47): proves no record of the bundle.
    let mut files = bundle();
    let p3 = files.iter().find(|(n, _)| n == &proof_name(3)).unwrap().1.clone();
    files.push((proof_name(999), p3));
    let r = checked(files);
    assert!(!r.all_proven());
    assert_eq!(kinds(&r), vec![Some(Kind::Foreign)], "{:?}", r.not_proven());
    assert!(
        r.not_proven()[0].1.reason.contains("proofs/999.proof"),
        "{:?}",
        r.not_proven()
    );
    // A gap's hash changed: the range proof no longer leads to the root.
    let r = checked(with(bundle(), GAPS, |t| {
        let (first, rest) = t.split_once('\n').unwrap();
        format!("{} {}\n{rest}", first.split(' ').next().unwrap(), "0".repeat(64))
    }));
    assert!(!r.all_proven());
    // The head of another size.
    let r = checked(with(bundle(), HEAD, |t| t.replace("seq 12", "seq 11")));
    assert!(!r.all_proven(), "a head changed after signing: {:?}", r.head);
}

#[test]
fn a_bundle_with_nothing_in_it_never_passes_and_a_missing_file_is_malformed() {
    let r = checked(with(bundle(), RECORDS, |_| String::new()));
    assert!(!r.all_proven());
    let verdict = r.verdict(true);
    assert!(!verdict.passed(), "{:?}", verdict.findings);
    let (_, v) = key();
    let keys = [v];
    let input = input(&keys, false);
    for missing in [RECORDS, CHECKPOINT, HEAD, NEWEST] {
        let files = bundle().into_iter().filter(|(n, _)| n != missing);
        assert!(check(&BundleFiles::from_files(files), &input).is_err(), "{missing}");
    }
}

#[test]
fn a_bundle_cut_at_either_end_is_named() {
    // The run's creation left out (with its proof): its start is not accounted for.
    let mut files = with(bundle(), RECORDS, |t| {
        t.lines().skip(1).map(|l| format!("{l}\n")).collect()
    });
    files.retain(|(n, _)| n != &proof_name(1));
    let r = checked(files);
    assert!(kinds(&r).contains(&Some(Kind::Gap)), "{:?}", r.not_proven());
    // The run's last events left out: the positions after them up to the checkpoint are unaccounted for.
    let r = checked(with(bundle(), RECORDS, |t| {
        t.lines()
            .filter(|l| !l.contains("\"seq\":11,"))
            .map(|l| format!("{l}\n"))
            .collect()
    }));
    assert!(
        r.not_proven().iter().any(|(_, p)| p.reason.contains("seq 11..=11")),
        "{:?}",
        r.not_proven()
    );
    // The gap files removed: passes only when they are not asked for.
    let files: Vec<_> = bundle()
        .into_iter()
        .filter(|(n, _)| n != GAPS && n != GAPS_PROOF)
        .collect();
    assert!(checked(files.clone()).all_proven());
    let (_, v) = key();
    let keys = [v];
    let input = input(&keys, true);
    let r = check(&BundleFiles::from_files(files), &input).unwrap();
    assert!(!r.all_proven());
}
