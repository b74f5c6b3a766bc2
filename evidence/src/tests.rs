//! The diff and restore engines against real SQLite files, fed the
//! records a copy would hold (built from a generated database), with the
//! copy's check stood in by its outcome.

use std::path::Path;

use chainship_chain::record::Record;
use chainship_chain::{EventDb, Head, OpenOptions};
use chainship_runs::synth::database::{Settings, SynthDb};
use chainship_verify::Kind;

use crate::copy::CopyOutcome;
use crate::diff::Comparison;
use crate::restore::{self, Restore};

const ORIGIN: &str = "test/evidence";

/// A generated database of `events` events (the same stream for any count).
fn database(dir: &Path, name: &str, events: u64) -> std::path::PathBuf {
    let path = dir.join(name);
    let settings = Settings {
        large_every: 0,
        ..Settings::default()
    };
    SynthDb::open(&path, false, &settings).unwrap().append(events).unwrap();
    path
}

/// The records an exported copy of `path` holds, in seq order.
fn records(path: &Path) -> Vec<Record<'static>> {
    let db = EventDb::open(path, &OpenOptions::default()).unwrap();
    let mut out = Vec::new();
    let mut prev = Vec::new();
    db.scan(0, u64::MAX, &mut |e| {
        out.push(Record::from_event(ORIGIN, e, &prev).unwrap().into_owned());
        prev = e.hash.to_vec();
        true
    })
    .unwrap();
    out
}

fn compare(db: &Path, copy: &[Record<'_>]) -> Comparison {
    let opened = EventDb::open(db, &OpenOptions::default()).unwrap();
    let head = opened.head().unwrap().map_or(0, |(s, _)| s);
    let mut c = Comparison::new(opened, head, 10, None).unwrap();
    for r in copy {
        c.feed(r);
    }
    c.finish();
    c
}

#[test]
fn a_copy_of_the_database_is_the_same_event_for_event() {
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path(), "a.db", 40);
    let c = compare(&db, &records(&db));
    assert!(!c.differs());
    assert_eq!((c.same, c.changed_count, c.missing.count), (40, 0, 0));
}

#[test]
fn a_changed_payload_a_deleted_row_and_a_cut_end_are_each_named() {
    let dir = tempfile::tempdir().unwrap();
    let short = database(dir.path(), "short.db", 30);
    let long = database(dir.path(), "long.db", 35);
    let mut copy = records(&long);
    // The copy says something else at seq 7 (its hash kept): a changed field, no fork.
    copy[6].payload_json = r#"{"changed":true}"#.into();
    // The copy lacks seq 12: the database holds it alone.
    copy.remove(11);
    let c = compare(&short, &copy);
    assert!(c.differs());
    assert_eq!(c.changed_count, 1);
    assert_eq!(c.changed[0].seq, 7);
    assert!(c.changed[0].fields.iter().any(|f| f.field == "payload_json"));
    assert!(c.fork.is_none(), "the hashes agree: no fork");
    assert_eq!(c.database_only.list, vec![(12, 12)]);
    // Seqs 31..35 are in the copy, not in the database: cut at its end.
    assert_eq!((c.missing.list.clone(), c.missing.count), (vec![(31, 35)], 5));
}

#[test]
fn a_different_hash_is_the_fork_point() {
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path(), "a.db", 20);
    let mut copy = records(&db);
    copy[9].hash = "0".repeat(64).into();
    let c = compare(&db, &copy);
    assert_eq!(c.fork.as_ref().map(|f| f.0), Some(10));
}

/// A record that came late in the copy is compared where it belongs: the
/// database does not hold it alone.
#[test]
fn a_late_record_is_compared_not_database_only() {
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path(), "a.db", 30);
    let mut copy = records(&db);
    copy.swap(11, 12);
    let c = compare(&db, &copy);
    assert!(!c.differs(), "{:?} {:?}", c.database_only.list, c.changed.len());
    assert_eq!((c.same, c.database_only.count), (30, 0));
    // Late and changed: compared, and named as changed.
    copy[12].payload_json = r#"{"changed":true}"#.into();
    let c = compare(&db, &copy);
    assert_eq!((c.changed_count, c.database_only.count), (1, 0));
    assert_eq!(c.changed[0].seq, 12);
}

/// Damage in the database alone: the diff's last trusted head is the
/// highest the copy matched below the first difference, as `anchor verify`
/// would say; the copy's own stays in what the diff covered.
#[test]
fn the_database_is_trusted_below_its_first_difference() {
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path(), "a.db", 30);
    let copy = records(&db);
    let c = rusqlite::Connection::open(&db).unwrap();
    c.execute("UPDATE events SET payload_json = '{}' WHERE seq = 17", [])
        .unwrap();
    drop(c);
    let mut outcome = trusted_up_to(Some(head_of(&copy[29])), 30);
    outcome.covered.vouched = vec![10, 20, 30];
    let cmp = compare(&db, &copy);
    let v = crate::diff::verdict(outcome, cmp);
    assert!(!v.passed());
    assert_eq!(v.last_trusted, Some(head_of(&copy[9])));
    assert_eq!(v.covered.copy_trusted, Some(head_of(&copy[29])));
    assert_eq!(
        v.ranges.iter().flatten().map(|r| (r.from, r.to)).collect::<Vec<_>>(),
        [(17, 17)]
    );
}

/// The kinds of `diff`'s differences follow the database's own chain: rows
/// rehashed consistently are `rewritten` (a fork), as `anchor verify` names
/// them; a changed field on a chain that breaks is `altered`; a damaged row
/// is named at its seq, and what lies past it as not compared.
#[test]
fn a_rewrite_an_edit_and_a_damaged_row_get_the_database_walk_s_kinds() {
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path(), "a.db", 30);
    let copy = records(&db);
    let kinds_and_ranges = |db: &Path| {
        let v = crate::diff::verdict(trusted_up_to(Some(head_of(&copy[29])), 30), compare(db, &copy));
        let kinds: Vec<(Kind, Option<u64>)> = v.findings.iter().map(|f| (f.kind, f.seq)).collect();
        let ranges: Vec<(&str, u64, u64)> = v
            .ranges
            .iter()
            .flatten()
            .map(|r| (r.kind.as_str(), r.from, r.to))
            .collect();
        (kinds, ranges)
    };
    // Rehashed from 20 on: another history.
    let rewritten = dir.path().join("rewritten.db");
    std::fs::copy(&db, &rewritten).unwrap();
    let c = rusqlite::Connection::open(&rewritten).unwrap();
    let mut prev = copy[18].hash.to_string();
    for r in &copy[19..] {
        let h = chainship_chain::event_hash(
            prev.as_bytes(),
            r.seq,
            r.run_id.as_bytes(),
            r.step_id.as_bytes(),
            b"2020-01-01T00:00:00Z",
            r.kind.as_bytes(),
            r.payload_json.as_bytes(),
        );
        let h = String::from_utf8(h.to_vec()).unwrap();
        c.execute(
            "UPDATE events SET at = '2020-01-01T00:00:00Z', hash = ?1 WHERE seq = ?2",
            rusqlite::params![h, r.seq as i64],
        )
        .unwrap();
        prev = h;
    }
    drop(c);
    let (kinds, ranges) = kinds_and_ranges(&rewritten);
    assert_eq!(kinds, [(Kind::Fork, Some(20))]);
    assert_eq!(ranges, [("rewritten", 20, 30)]);
    // A payload changed, its hash kept: the chain breaks there.
    let edited = dir.path().join("edited.db");
    std::fs::copy(&db, &edited).unwrap();
    let c = rusqlite::Connection::open(&edited).unwrap();
    c.execute("UPDATE events SET payload_json = '{\"edited\":1}' WHERE seq = 20", [])
        .unwrap();
    drop(c);
    let (kinds, ranges) = kinds_and_ranges(&edited);
    assert_eq!(
        kinds,
        [(Kind::Altered, Some(20)), (Kind::Altered, Some(20))],
        "the difference, and the database's own break"
    );
    assert_eq!(ranges, [("altered", 20, 20)]);
    // A hash cell that is not text.
    let damaged = dir.path().join("damaged.db");
    std::fs::copy(&db, &damaged).unwrap();
    let c = rusqlite::Connection::open(&damaged).unwrap();
    c.execute("UPDATE events SET hash = x'00' WHERE seq = 20", []).unwrap();
    drop(c);
    let v = crate::diff::verdict(trusted_up_to(Some(head_of(&copy[29])), 30), compare(&damaged, &copy));
    let kinds: Vec<(Kind, Option<u64>)> = v.findings.iter().map(|f| (f.kind, f.seq)).collect();
    assert_eq!(kinds, [(Kind::Altered, Some(20)), (Kind::NotWhole, Some(21))]);
    assert_eq!(v.last_trusted, None, "no head below the damaged row was matched");
}

/// The outcome of a copy check that trusts everything up to `head`.
fn trusted_up_to(head: Option<Head>, end: u64) -> CopyOutcome {
    let mut o = CopyOutcome::refused(Some(ORIGIN.into()), Kind::NoTrustedHead, String::new());
    o.findings.clear();
    o.last_trusted = head;
    o.covered.end_seq = Some(end);
    o
}

fn head_of(r: &Record<'_>) -> Head {
    format!("{}:{}", r.seq, r.hash).parse().unwrap()
}

#[test]
fn a_trusted_copy_is_restored_to_its_last_trusted_head_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path(), "a.db", 50);
    let copy = records(&db);
    let out = dir.path().join("restored.db");
    let mut restore = Restore::create(&out, None).unwrap();
    // Duplicates and out-of-order records are not written twice.
    for r in copy.iter().chain(&copy[..5]) {
        restore.take(r);
    }
    let trusted = head_of(&copy[39]);
    let restored = restore
        .finish(trusted_up_to(Some(trusted), 50), false)
        .unwrap()
        .covered
        .restored
        .unwrap();
    assert_eq!((restored.end, restored.unanchored_left), (40, 10));
    assert_eq!(records(&out), copy[..40].to_vec());
}

#[test]
fn an_untrusted_copy_leaves_nothing_and_a_gap_stops_the_writing() {
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path(), "a.db", 20);
    let copy = records(&db);
    let out = dir.path().join("restored.db");
    let mut restore = Restore::create(&out, None).unwrap();
    for r in &copy {
        restore.take(r);
    }
    let mut refused = trusted_up_to(Some(head_of(&copy[19])), 20);
    refused.findings = CopyOutcome::refused(None, Kind::Gap, "seq 3 is missing".into()).findings;
    let verdict = restore.finish(refused, false).unwrap();
    assert!(!verdict.passed() && verdict.covered.restored.is_none(), "{verdict:?}");
    assert!(!out.exists());
    // Records after a gap are never written: the restore ends before it.
    let mut restore = Restore::create(&out, None).unwrap();
    let written: Vec<bool> = copy.iter().filter(|r| r.seq != 8).map(|r| restore.take(r)).collect();
    assert_eq!(written.iter().filter(|w| **w).count(), 7);
}

#[test]
fn a_restore_is_never_written_into_the_anchor_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("anchors");
    std::fs::create_dir(&store).unwrap();
    assert!(restore::refuse_inside_store(&store.join("x.db"), &store).is_err());
    assert!(restore::refuse_inside_store(&dir.path().join("x.db"), &store).is_ok());
}

#[test]
fn a_copys_origin_is_the_one_given_or_its_first_records() {
    use crate::copy::{CopyOrigin, origin_of};
    use chainship_sinks::SinkConfig;
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path(), "a.db", 3);
    let file = dir.path().join("copy.jsonl");
    let mut text = String::from("\n");
    for r in records(&db) {
        let mut line = Vec::new();
        r.write_json(&mut line);
        text += &(String::from_utf8(line).unwrap() + "\n");
    }
    std::fs::write(&file, text).unwrap();
    let source = SinkConfig::File(file.clone());
    assert!(matches!(origin_of(&source, None), CopyOrigin::Known(o) if o == ORIGIN));
    assert!(matches!(origin_of(&source, Some(ORIGIN)), CopyOrigin::Known(o) if o == ORIGIN));
    match origin_of(&source, Some("other/origin")) {
        CopyOrigin::Refused(o) => assert_eq!(o.findings[0].kind, Kind::Foreign),
        _ => panic!("another origin's copy must be refused"),
    }
    let missing = SinkConfig::File(dir.path().join("none.jsonl"));
    assert!(matches!(origin_of(&missing, None), CopyOrigin::Needed(Some(_))));
    let bucket: SinkConfig = "s3://bucket/prefix".parse().unwrap();
    assert!(matches!(origin_of(&bucket, None), CopyOrigin::Needed(None)));
}
