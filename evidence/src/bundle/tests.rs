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
    log_padded(0)
}

/// [`log`] with `pad` events of run "c" after each of its events (run "a"
/// across several tiles, and a tree with levels above the first).
fn log_padded(pad: usize) -> Vec<serde_json::Value> {
    let base = [
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
    let events = base
        .iter()
        .flat_map(|e| std::iter::once(*e).chain(std::iter::repeat_n(("c", "", "agent.note", "{}"), pad)));
    let mut prev = String::new();
    let mut out = Vec::new();
    for (i, (run, step, kind, payload)) in events.enumerate() {
        let seq = i as u64 + 1;
        let at = format!("2026-12-02T10:{:02}:{:02}Z", seq / 60, seq % 60);
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

/// How a bundle proves its records.
#[derive(Clone, Copy, PartialEq)]
enum Form {
    /// The tiles the proofs are computed from (what `evidence` writes).
    Tiles,
    /// One tlog-proof a record (bundles written before the tiles).
    Proofs,
}

/// The bundle of run "a", with gaps, proven against the whole log.
fn bundle() -> Vec<(String, Vec<u8>)> {
    bundle_of(&log(), Form::Tiles)
}

fn bundle_of(log: &[serde_json::Value], form: Form) -> Vec<(String, Vec<u8>)> {
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
    // Every tile of the log, as a store holds them.
    let mut builder = chainship_tlog::tiles::TileBuilder::default();
    let mut store = std::collections::HashMap::new();
    let mut out = Vec::new();
    for e in log {
        builder.push(e["hash"].as_str().unwrap().as_bytes(), &mut out);
    }
    for t in out.into_iter().chain(builder.partial_tiles()) {
        store.insert(t.path, t.data);
    }
    let mut read = chainship_tlog::tiles::TileSet::new(size);
    let mut records = String::new();
    let mut gaps = String::new();
    let of_a: Vec<u64> = log
        .iter()
        .filter(|e| e["run_id"] == "a")
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    let first = of_a[0];
    for e in log {
        let seq = e["seq"].as_u64().unwrap();
        if e["run_id"] == "a" || seq == size {
            let hashes = inclusion_proof(seq - 1, size, &mut Leaves(leaves.clone())).unwrap();
            let proof = TlogProof {
                extra: None,
                index: seq - 1,
                hashes,
                checkpoint: note.clone(),
            };
            if form == Form::Proofs {
                files.push((proof_name(seq), proof.to_text().into_bytes()));
            }
            while let Err(need) = inclusion_proof(seq - 1, size, &mut read) {
                read.insert(&need, &store[&need.path]).unwrap();
            }
        }
        if e["run_id"] == "a" {
            records.push_str(&format!("{e}\n"));
        } else if seq > first {
            gaps.push_str(&format!("{seq} {}\n", e["hash"].as_str().unwrap()));
        }
    }
    if form == Form::Tiles {
        // With the gaps: every level-0 tile from the run's first event on, and the other events as ranges.
        let span = ((first - 1) / 256..=(size - 1) / 256).map(|i| (0u8, i));
        for (level, index) in chainship_tlog::tiles::with_proving_tiles(size, read.held().into_iter().chain(span)) {
            let need = read.need(level, index);
            files.push((need.path.clone(), store[&need.path].clone()));
        }
        let others: Vec<u64> = log
            .iter()
            .map(|e| e["seq"].as_u64().unwrap())
            .filter(|s| *s > first && !of_a.contains(s))
            .collect();
        let mut ranges: Vec<(u64, u64)> = Vec::new();
        for s in others {
            match ranges.last_mut() {
                Some((_, b)) if *b + 1 == s => *b = s,
                _ => ranges.push((s, s)),
            }
        }
        gaps = ranges
            .iter()
            .map(|(a, b)| if a == b { format!("{a}\n") } else { format!("{a}-{b}\n") })
            .collect();
    }
    let range = range_proof(first - 1, size, size, &mut Leaves(leaves.clone())).unwrap();
    let mut proof = format!("{RANGE_PROOF_HEADER}\nstart {}\nend {size}\n", first - 1);
    for h in range {
        proof.push_str(&chainship_tlog::hash_b64(&h));
        proof.push('\n');
    }
    files.push((RECORDS.to_owned(), records.into_bytes()));
    files.push((GAPS.to_owned(), gaps.into_bytes()));
    if form == Form::Proofs {
        files.push((GAPS_PROOF.to_owned(), proof.into_bytes()));
    }
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
        reveal_statement: None,
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
    // A bundle written before the tiles (one proof a record) still checks.
    let legacy = || bundle_of(&log(), Form::Proofs);
    assert!(checked(legacy()).all_proven());
    // A proof under another seq's name.
    let mut files = legacy();
    let p3 = files.iter().find(|(n, _)| n == &proof_name(3)).unwrap().1.clone();
    files.iter_mut().find(|(n, _)| n == &proof_name(4)).unwrap().1 = p3;
    let r = checked(files);
    assert_eq!(
        r.not_proven().iter().map(|(s, _)| *s).collect::<Vec<_>>(),
        vec![Some(4)]
    );
    // A stray proof beside the records (issue 47): proves no record of the bundle.
    let mut files = legacy();
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
    // A range of other events left out of gaps.txt: those seqs are unaccounted for.
    let r = checked(with(bundle(), GAPS, |t| {
        t.lines().skip(1).map(|l| format!("{l}\n")).collect()
    }));
    assert!(kinds(&r).contains(&Some(Kind::Gap)), "{:?}", r.not_proven());
    // A record's seq also claimed as another run's.
    let r = checked(with(bundle(), GAPS, |t| t.replacen("2\n", "2-3\n", 1)));
    assert!(kinds(&r).contains(&Some(Kind::Duplicate)), "{:?}", r.not_proven());
    // A gap's hash changed (the form before the tiles): the range proof no longer leads to the root.
    let r = checked(with(legacy(), GAPS, |t| {
        let (first, rest) = t.split_once('\n').unwrap();
        format!("{} {}\n{rest}", first.split(' ').next().unwrap(), "0".repeat(64))
    }));
    assert!(!r.all_proven());
    // The head of another size.
    let r = checked(with(bundle(), HEAD, |t| t.replace("seq 12", "seq 11")));
    assert!(!r.all_proven(), "a head changed after signing: {:?}", r.head);
}

/// A run across three tiles of a tree with a level above the first.
fn spread() -> Vec<(String, Vec<u8>)> {
    bundle_of(&log_padded(60), Form::Tiles)
}

fn tile_names(files: &[(String, Vec<u8>)]) -> Vec<String> {
    files
        .iter()
        .filter(|(n, _)| n.starts_with("tile/"))
        .map(|(n, _)| n.clone())
        .collect()
}

#[test]
fn the_tiles_prove_every_record_and_a_tile_changed_removed_or_misplaced_is_named() {
    let files = spread();
    let names = tile_names(&files);
    // 732 entries: two full level-0 tiles, the edge at levels 0 and 1.
    assert_eq!(
        names,
        ["tile/0/000", "tile/0/001", "tile/0/002.p/220", "tile/1/000.p/2"]
    );
    let r = checked(files.clone());
    assert!(r.all_proven(), "{:?}", r.not_proven());
    assert_eq!(r.records.len(), 8);
    // Without the tiles (and no per-record proof) nothing is proven.
    let bare: Vec<_> = files.iter().filter(|(n, _)| !n.starts_with("tile/")).cloned().collect();
    let r = checked(bare);
    assert!(r.records.iter().all(|s| s.problem.is_some()), "{:?}", r.not_proven());
    for name in &names {
        // One bit of one hash changed: that tile is named, and no record passes on it.
        for at in [0usize, 31, 32 * 7 + 5] {
            let mut changed = files.clone();
            let tile = &mut changed.iter_mut().find(|(n, _)| n == name).unwrap().1;
            if at >= tile.len() {
                continue;
            }
            tile[at] ^= 1;
            let r = checked(changed);
            assert!(!r.all_proven(), "{name} byte {at}");
            assert!(
                kinds(&r).contains(&Some(Kind::TilesDisagree)),
                "{name}: {:?}",
                r.not_proven()
            );
        }
        // Removed: named, as missing, or as what a proof lacks.
        let removed: Vec<_> = files.iter().filter(|(n, _)| n != name).cloned().collect();
        let r = checked(removed);
        assert!(!r.all_proven(), "{name} removed");
        assert!(
            r.not_proven().iter().any(|(_, p)| p.reason.contains(name.as_str())),
            "{name}: {:?}",
            r.not_proven()
        );
    }
    // A tile under another width than the tree's: not of this tree.
    let mut misplaced = files.clone();
    misplaced.iter_mut().find(|(n, _)| n == "tile/1/000.p/2").unwrap().0 = "tile/1/000.p/3".into();
    let r = checked(misplaced);
    assert!(kinds(&r).contains(&Some(Kind::TilesDisagree)), "{:?}", r.not_proven());
    // Another log's tiles (a fork of the same size): refused.
    let other_log: Vec<_> = log_padded(61).into_iter().take(732).collect();
    let fork = bundle_of(&other_log, Form::Tiles);
    let mut forked = files.clone();
    for (name, bytes) in forked.iter_mut().filter(|(n, _)| n.starts_with("tile/")) {
        *bytes = fork.iter().find(|(n, _)| n == name).unwrap().1.clone();
    }
    let r = checked(forked);
    assert!(!r.all_proven());
    // The tiles of a bundle read through BundleFiles from a directory and a tar, as written.
    let dir = tempfile::TempDir::new().unwrap();
    for (name, bytes) in &files {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
    let read = BundleFiles::read(dir.path()).unwrap();
    assert_eq!(
        tile_names(&read.names().map(|n| (n.to_owned(), Vec::new())).collect::<Vec<_>>()),
        names
    );
    let tar = dir.path().with_extension("tar");
    files::write_tar(dir.path(), &tar).unwrap();
    let (_, v) = key();
    let keys = [v];
    let from_tar = check(&BundleFiles::read(&tar).unwrap(), &input(&keys, false)).unwrap();
    std::fs::remove_file(&tar).unwrap();
    assert!(from_tar.all_proven(), "{:?}", from_tar.not_proven());
    // A tile path outside the spec's spelling is no file of a bundle.
    std::fs::write(dir.path().join("tile/0/2"), b"").unwrap();
    assert!(BundleFiles::read(dir.path()).is_err());
}

#[test]
fn under_the_gaps_every_position_is_in_the_tiles_and_a_revealed_entry_is_judged_from_them() {
    // Run "a" 301 events apart: tile/0/001 holds none of its events, only others'.
    let log = log_padded(300);
    let files = bundle_of(&log, Form::Tiles);
    assert!(files.iter().any(|(n, _)| n == "tile/0/001"));
    let r = checked(files.clone());
    assert!(r.all_proven(), "{:?}", r.not_proven());
    let gaps = r.gaps.as_ref().unwrap();
    assert_eq!((gaps.first, gaps.last, gaps.hashes), (1, 3612, 3612 - 8));
    // That tile removed: no record's proof needs it, the gaps do.
    let without: Vec<_> = files.iter().filter(|(n, _)| n != "tile/0/001").cloned().collect();
    let r = checked(without.clone());
    assert_eq!(kinds(&r), vec![Some(Kind::Gap)], "{:?}", r.not_proven());
    assert!(
        r.not_proven()[0].1.reason.contains("tile/0/001"),
        "{:?}",
        r.not_proven()
    );
    // Not asked for, the bundle without gaps.txt needs no such tile.
    let bare: Vec<_> = without.into_iter().filter(|(n, _)| n != GAPS).collect();
    assert!(checked(bare).all_proven());

    // Revealing the event at a seq given as another run's: judged against the tiles' entry.
    let (_, v) = key();
    let keys = [v];
    let reveal = |seq: u64, record: &serde_json::Value| {
        let line = record.to_string();
        let parsed = chainship_chain::record::Record::parse(line.as_bytes())
            .unwrap()
            .into_owned();
        let mut input = input(&keys, true);
        input.reveal = Some(&parsed);
        let r = check(&BundleFiles::from_files(files.clone()), &input).map(|r| r.reveal.unwrap());
        (
            seq,
            r.map(|s| (s.run_id, s.problem.is_some())).map_err(|e| e.to_string()),
        )
    };
    // Another run's event: nothing withheld.
    assert_eq!(reveal(300, &log[299]).1, Ok(("c".to_owned(), false)));
    // A record that is not the entry there: refused.
    let mut forged = log[299].clone();
    forged["seq"] = json!(301);
    assert!(reveal(301, &forged).1.is_err());
    // Run "a"'s event passed off as another's (its record taken out, its seq put in gaps.txt): withheld.
    let at = 1506u64;
    assert_eq!(log[at as usize - 1]["run_id"], "a");
    let mut passed_off = with(files.clone(), RECORDS, |t| {
        t.lines()
            .filter(|l| !l.contains(&format!("\"seq\":{at},")))
            .map(|l| format!("{l}\n"))
            .collect()
    });
    passed_off = with(passed_off, GAPS, |t| {
        t.replacen(&format!("-{}\n{}-", at - 1, at + 1), "-", 1)
    });
    let r = checked(passed_off.clone());
    assert!(r.gaps.as_ref().unwrap().problems.is_empty(), "{:?}", r.not_proven());
    let line = log[at as usize - 1].to_string();
    let record = chainship_chain::record::Record::parse(line.as_bytes())
        .unwrap()
        .into_owned();
    // Its payload withheld since: the tombstone reveals it, bound to its hash by the statement.
    let tomb = record.tombstone(&chainship_anchor::redaction::statement_path(at));
    let redactor = SigningKey::from_bytes(&[9; 32]);
    let redaction_key = VerifierKey::new("test/redactions", redactor.verifying_key());
    let statement = |seq: u64, fields: [u8; 64]| {
        let s = chainship_anchor::redaction::Statement {
            origin: ORIGIN.into(),
            seq,
            hash: tomb.hash.as_bytes().try_into().unwrap(),
            fields,
            redacted: "2026-12-07T06:00:00Z".into(),
            reason: "a token in the payload".into(),
        };
        SignedNote::sign(&s.text(), &[("test/redactions", &redactor)])
            .to_text()
            .into_bytes()
    };
    let good = statement(at, tomb.fields_digest());
    let redaction_keys = [redaction_key];
    let revealed = |bytes: Option<&[u8]>, trusted_for_erasure: &[VerifierKey]| {
        let mut input = input(&keys, true);
        input.reveal = Some(&tomb);
        input.reveal_statement = bytes;
        input.redaction_keys = trusted_for_erasure;
        check(&BundleFiles::from_files(passed_off.clone()), &input)
            .map(|r| r.reveal.unwrap().problem.map(|p| p.kind))
            .map_err(|e| e.to_string())
    };
    assert_eq!(revealed(Some(&good), &redaction_keys), Ok(Some(Some(Kind::Gap))));
    // Without its statement, or with one no trusted key signed, or for other fields: it reveals nothing.
    assert!(revealed(None, &redaction_keys).unwrap_err().contains("--statement"));
    assert!(revealed(Some(&good), &[]).unwrap_err().contains("--redaction-key"));
    let stranger = VerifierKey::new("test/other", SigningKey::from_bytes(&[10; 32]).verifying_key());
    let e = revealed(Some(&good), &[stranger]).unwrap_err();
    assert!(e.contains("--statement"), "{e}");
    let other_fields = statement(at, [b'0'; 64]);
    assert!(revealed(Some(&other_fields), &redaction_keys).is_err());

    let mut input = input(&keys, true);
    input.reveal = Some(&record);
    let r = check(&BundleFiles::from_files(passed_off), &input).unwrap();
    let status = r.reveal.as_ref().unwrap();
    assert_eq!(
        status.problem.as_ref().and_then(|p| p.kind),
        Some(Kind::Gap),
        "{status:?}"
    );
}

/// What an attack round tried: each refused, none a panic.
#[test]
fn hostile_tiles_gaps_and_sizes_are_named_not_a_panic() {
    // A tile at an index whose first entry is past 2^64 (width 0 there, not a wrapped one).
    let mut files = bundle();
    files.push(("tile/0/x072/x057/x594/x037/x927/947.p/184".into(), vec![7; 184 * 32]));
    let r = checked(files);
    assert!(kinds(&r).contains(&Some(Kind::TilesDisagree)), "{:?}", r.not_proven());
    // A partial tile that is not the tree's right edge.
    let mut files = spread();
    let full = files.iter().find(|(n, _)| n == "tile/0/000").unwrap().1.clone();
    files.push(("tile/0/005.p/3".into(), full[..96].to_vec()));
    let r = checked(files);
    assert!(kinds(&r).contains(&Some(Kind::TilesDisagree)), "{:?}", r.not_proven());
    // A checkpoint of size 0 and a newest.json of seq 0 (the signature no longer verifies).
    let files = with(
        with(bundle(), CHECKPOINT, |t| t.replacen("\n12\n", "\n0\n", 1)),
        NEWEST,
        |t| t.replacen("\"seq\":12,", "\"seq\":0,", 1),
    );
    assert!(!checked(files).all_proven());
    // A forged size near u64::MAX with the gaps asked for.
    let huge = u64::MAX.to_string();
    let files = with(
        with(bundle(), CHECKPOINT, |t| {
            t.replacen("\n12\n", &format!("\n{huge}\n"), 1)
        }),
        GAPS,
        |_| String::new(),
    );
    assert!(!checked(files).all_proven());
    // More ranges than the run's records could separate: refused before they are held.
    let many: String = (0..1000u64).map(|i| format!("{}\n", 100 + 2 * i)).collect();
    let r = checked(with(bundle(), GAPS, |_| many.clone()));
    assert!(
        r.not_proven().iter().any(|(_, p)| p.reason.contains("more ranges")),
        "{:?}",
        r.not_proven()
    );
}

#[test]
fn a_million_bad_lines_are_counted_not_each_named_and_the_two_forms_are_not_mixed() {
    let bad: String = "x\n".repeat(5000);
    let r = checked(with(bundle(), RECORDS, |t| format!("{t}{bad}")));
    assert!(!r.all_proven());
    assert!(r.records.len() <= 1001 + 8, "{}", r.records.len());
    let last = r.records.last().and_then(|s| s.problem.as_ref()).unwrap();
    assert!(last.reason.contains("4000 more problem(s)"), "{last:?}");
    // Tiles beside a per-record proof: named, and the pages do not take the older form's wording.
    let mut mixed = bundle();
    let proof = bundle_of(&log(), Form::Proofs)
        .into_iter()
        .find(|(n, _)| n == &proof_name(3))
        .unwrap();
    mixed.push(proof);
    let r = checked(mixed);
    assert!(!r.per_record_proofs);
    assert!(kinds(&r).contains(&Some(Kind::Foreign)), "{:?}", r.not_proven());
}

/// What any tar tool unpacks is what is checked: a directory entry that
/// carries data, an extension header (pax, GNU long name) or a file named
/// like a directory is refused.
#[test]
fn a_tar_that_unpacks_differently_elsewhere_is_refused() {
    let dir = tempfile::TempDir::new().unwrap();
    let write = |name: &str, entries: &[(&str, tar::EntryType, &[u8])], pax: bool| {
        let path = dir.path().join(name);
        let mut tar = tar::Builder::new(std::fs::File::create(&path).unwrap());
        if pax {
            tar.append_pax_extensions([("path", b"records.jsonl".as_slice())])
                .unwrap();
        }
        for (entry, kind, bytes) in entries {
            let mut header = tar::Header::new_ustar();
            // The name's bytes as given (set_path would tidy "a/." away).
            header.as_mut_bytes()[..entry.len()].copy_from_slice(entry.as_bytes());
            header.set_size(bytes.len() as u64);
            header.set_entry_type(*kind);
            header.set_mode(0o644);
            header.set_cksum();
            tar.append(&header, *bytes).unwrap();
        }
        tar.finish().unwrap();
        path
    };
    let files = bundle();
    let plain: Vec<(&str, tar::EntryType, &[u8])> = files
        .iter()
        .map(|(n, b)| (n.as_str(), tar::EntryType::Regular, b.as_slice()))
        .collect();
    let good = write("good.tar", &plain, false);
    assert!(BundleFiles::read(&good).is_ok());
    let mut with_dir = plain.clone();
    with_dir.push(("tile/", tar::EntryType::Directory, b"hidden bytes"));
    let e = BundleFiles::read(&write("dir.tar", &with_dir, false)).unwrap_err();
    assert!(e.to_string().contains("carries data"), "{e}");
    let e = BundleFiles::read(&write("pax.tar", &plain, true)).unwrap_err();
    assert!(e.to_string().contains("pax"), "{e}");
    // A pax size (obeyed by GNU tar and Python, not by every reader): refused.
    let sized = dir.path().join("sized.tar");
    let mut tar = tar::Builder::new(std::fs::File::create(&sized).unwrap());
    tar.append_pax_extensions([("size", b"4096".as_slice())]).unwrap();
    for (name, bytes) in &files {
        let mut header = tar::Header::new_ustar();
        header.set_path(name).unwrap();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        tar.append(&header, bytes.as_slice()).unwrap();
    }
    tar.finish().unwrap();
    drop(tar);
    let e = BundleFiles::read(&sized).unwrap_err();
    assert!(e.to_string().contains("pax"), "{e}");
    // A name split into the ustar prefix field, or ending in "/.": refused.
    let mut prefixed = plain.clone();
    prefixed.push(("tile/0/000/.", tar::EntryType::Regular, b""));
    let e = BundleFiles::read(&write("dot.tar", &prefixed, false)).unwrap_err();
    assert!(e.to_string().contains("named like a directory"), "{e}");
    let split = dir.path().join("split.tar");
    let mut tar = tar::Builder::new(std::fs::File::create(&split).unwrap());
    for (name, bytes) in &files {
        let mut header = tar::Header::new_ustar();
        header.set_path(name).unwrap();
        header.as_ustar_mut().unwrap().prefix[..4].copy_from_slice(b"tile");
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        tar.append(&header, bytes.as_slice()).unwrap();
    }
    tar.finish().unwrap();
    drop(tar);
    let e = BundleFiles::read(&split).unwrap_err();
    assert!(e.to_string().contains("prefix field"), "{e}");
    // A pax header of times only (what a repacking tool adds) is harmless.
    let times = dir.path().join("times.tar");
    let mut tar = tar::Builder::new(std::fs::File::create(&times).unwrap());
    for (name, bytes) in &files {
        tar.append_pax_extensions([("mtime", b"1.5".as_slice())]).unwrap();
        let mut header = tar::Header::new_ustar();
        header.set_path(name).unwrap();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        tar.append(&header, bytes.as_slice()).unwrap();
    }
    tar.finish().unwrap();
    drop(tar);
    assert!(BundleFiles::read(&times).is_ok());
    let mut slash = plain.clone();
    slash.push(("tile/0/000/", tar::EntryType::Regular, b""));
    let e = BundleFiles::read(&write("slash.tar", &slash, false)).unwrap_err();
    assert!(e.to_string().contains("named like a directory"), "{e}");
    let mut empty_dir = plain.clone();
    empty_dir.insert(0, ("tile/", tar::EntryType::Directory, b""));
    assert!(BundleFiles::read(&write("empty-dir.tar", &empty_dir, false)).is_ok());
}

/// The log's newest event is the run's (its last): passed off as another
/// run's in gaps.txt and left out of the records, the bundle names it.
#[test]
fn the_run_s_own_newest_event_left_out_of_its_records_is_named() {
    let mut log = log();
    log.truncate(11); // seq 11, run "a"'s run.finished, is the newest
    let files = bundle_of(&log, Form::Tiles);
    assert!(checked(files.clone()).all_proven());
    let cut = with(
        with(files, RECORDS, |t| {
            t.lines()
                .filter(|l| !l.contains("\"seq\":11,"))
                .map(|l| format!("{l}\n"))
                .collect()
        }),
        GAPS,
        |t| t.replacen("8\n", "8\n11\n", 1),
    );
    let r = checked(cut);
    assert!(
        r.not_proven()
            .iter()
            .any(|(s, p)| *s == Some(11) && p.kind == Some(Kind::Gap)),
        "{:?}",
        r.not_proven()
    );
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

#[test]
fn a_bundle_written_before_the_tiles_renders_as_it_did_and_a_new_one_says_how_to_read_its_tiles() {
    let legacy = checked(bundle_of(&log(), Form::Proofs));
    assert!(legacy.per_record_proofs && legacy.all_proven());
    let text = readme::render(&legacy);
    assert!(
        text.contains("proofs/SEQ.proof") && text.contains("gaps.proof"),
        "{text}"
    );
    assert!(!text.contains("tile/"), "{text}");
    let tiled = checked(bundle());
    assert!(!tiled.per_record_proofs);
    let text = readme::render(&tiled);
    assert!(
        text.contains("tile/L/N") && text.contains("aics-tlog verify-checkpoint --tiles"),
        "{text}"
    );
    assert!(!text.contains("proofs/") && !text.contains("gaps.proof"), "{text}");
    assert!(html::render(&tiled).contains("as entries of the tiles"));
    assert!(html::render(&legacy).contains("by hash, one range proof"));
}
