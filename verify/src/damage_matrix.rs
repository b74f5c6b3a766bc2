//! The damage matrix: each kind of damage applied to one log held three
//! ways — a database, its exported copy and the anchor store — and judged
//! by the database, copy and store adaptors of the one engine. Where two
//! adaptors read the same data they must name the same ranges and kinds;
//! the exact ranges are asserted case by case.

use std::path::Path;

use chainship_anchor::signer::SignerKey;
use chainship_anchor::store::memory::MemoryStore;
use chainship_chain::{InvalidRange, OpenOptions, event_hash};

use crate::copy::tests::store_for;
use crate::db_check::{DbCheck, DbSource, check_database};
use crate::export::tests::chain;
use crate::finding::Kind;
use crate::verdict::Verdict;

/// One event as both the database and the copy hold it; `prev` is the
/// copy's `prev_hash`, as exported (an edit of one record leaves the next
/// record's as it was).
#[derive(Clone)]
struct Row {
    seq: u64,
    payload: String,
    hash: String,
    prev: String,
}

fn rows_of(lines: &[String]) -> Vec<Row> {
    lines
        .iter()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            Row {
                seq: v["seq"].as_u64().unwrap(),
                payload: v["payload_json"].as_str().unwrap().to_owned(),
                hash: v["hash"].as_str().unwrap().to_owned(),
                prev: v["prev_hash"].as_str().unwrap().to_owned(),
            }
        })
        .collect()
}

/// The copy's lines for `rows` (the fields `export::tests::record` gives).
fn lines_of(rows: &[Row]) -> Vec<String> {
    rows.iter()
        .map(|r| serde_json::json!({"origin":"o","seq":r.seq,"run_id":"r","step_id":"","at":"t","type":"k","payload_json":r.payload,"hash":r.hash,"prev_hash":r.prev}).to_string())
        .collect()
}

/// The database of `rows`, as agentrt's table holds them.
fn database_of(dir: &Path, rows: &[Row]) -> std::path::PathBuf {
    let path = dir.join(format!("audit-{}.db", rand_suffix()));
    let db = rusqlite::Connection::open(&path).unwrap();
    db.execute_batch(chainship_chain::AGENTRT_EVENTS_TABLE).unwrap();
    for r in rows {
        db.execute(
            "INSERT INTO events (seq, run_id, step_id, at, type, payload_json, hash) VALUES (?1, 'r', '', 't', 'k', ?2, ?3)",
            rusqlite::params![r.seq as i64, r.payload, r.hash],
        )
        .unwrap();
    }
    path
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// Recomputes every hash from `from` on, as a consistent rewrite would.
fn rehash_from(rows: &mut [Row], from: u64) {
    let mut prev = String::new();
    for r in rows.iter_mut() {
        if r.seq >= from {
            let h = event_hash(prev.as_bytes(), r.seq, b"r", b"", b"t", b"k", r.payload.as_bytes());
            r.hash = String::from_utf8(h.to_vec()).unwrap();
            r.prev = prev.clone();
        }
        prev = r.hash.clone();
    }
}

type Ranges = Vec<(&'static str, u64, u64)>;
type Tail = Option<(u64, u64)>;
type Kinds = Vec<(Kind, Option<u64>)>;

fn ranges<C>(v: &Verdict<C>) -> Ranges {
    v.ranges
        .iter()
        .flatten()
        .map(|r: &InvalidRange| (r.kind.as_str(), r.from, r.to))
        .collect()
}

fn kinds<C>(v: &Verdict<C>) -> Kinds {
    let mut k: Kinds = v.findings.iter().map(|f| (f.kind, f.seq)).collect();
    k.sort();
    k.dedup();
    k
}

/// The three verdicts on one log: (database, copy, store alone), and the
/// unvouched tail the database and the copy name.
struct Judged {
    db: (Ranges, Kinds, Option<u64>),
    copy: (Ranges, Kinds, Option<u64>),
    store: Kinds,
    tails: (Tail, Tail),
}

/// `anchor verify` of the database at `path` (`None`: the store alone),
/// trusting `trusted`, naming the touched runs with `touched`.
fn anchor_verify(
    store: &MemoryStore,
    trusted: &SignerKey,
    path: Option<&Path>,
    max_unvouched: u64,
    touched: Option<chainship_runs::Touched>,
) -> crate::database::DbVerdict {
    let keys = [trusted.verifier()];
    let open = OpenOptions::default();
    check_database(
        DbCheck {
            store,
            origin: "o",
            keys: &keys,
            witness: None,
            db: path.map(|path| DbSource {
                path,
                open: &open,
                jobs: 1,
            }),
            state: None,
            max_age: None,
            allow_no_heads: false,
            max_unvouched,
            touched,
            redaction_keys: &[],
        },
        &mut |_, _| {},
    )
    .unwrap()
}

fn judge(rows: &[Row], store: &MemoryStore, trusted: &SignerKey) -> Judged {
    judge_with(rows, store, trusted, u64::MAX)
}

/// [`judge`] with at most `max_unvouched` records allowed past the last anchor.
fn judge_with(rows: &[Row], store: &MemoryStore, trusted: &SignerKey, max_unvouched: u64) -> Judged {
    let dir = tempfile::tempdir().unwrap();
    let path = database_of(dir.path(), rows);
    let db = anchor_verify(store, trusted, Some(&path), max_unvouched, None);
    let alone = anchor_verify(store, trusted, None, max_unvouched, None);
    let expect = crate::copy::CopyExpectations {
        max_unvouched,
        ..Default::default()
    };
    let copy = crate::copy::tests::verdict_trusting(store, trusted, &lines_of(rows), expect);
    Judged {
        db: (ranges(&db), kinds(&db), db.last_trusted.map(|h| h.seq)),
        copy: (ranges(&copy), kinds(&copy), copy.last_trusted.map(|h| h.seq)),
        store: kinds(&alone),
        tails: (db.unvouched, copy.unvouched),
    }
}

/// A log of 700 events, anchored every 100 up to 600 (heads, checkpoints, tiles).
fn log() -> (Vec<Row>, MemoryStore, SignerKey) {
    let key = SignerKey::generate("o").unwrap();
    let lines = chain(700);
    let store = store_for(&lines, &[100, 200, 300, 400, 500, 600], &key);
    (rows_of(&lines), store, key)
}

/// A change to the rows both the database and the copy hold.
type Damage = Box<dyn Fn(&mut Vec<Row>)>;

fn alter(seq: u64) -> Damage {
    Box::new(move |r| r[seq as usize - 1].payload = "{\"x\":1}".into())
}

use Kind::{
    Altered, CheckpointMissing, Cut, Fork, Gap, HeadMissing, NoTrustedHead, TilesDisagree, UntrustedKey, Unvouched,
};

#[test]
fn the_database_and_the_copy_name_the_same_exact_ranges_for_the_same_damage() {
    // (case, damage, ranges, kinds, last trusted head): the same for the
    // database and the copy, and nothing for the store alone (it is intact).
    let mut cases: Vec<(&str, Damage, Ranges, Kinds, Option<u64>)> = vec![
        ("intact", Box::new(|_| {}), vec![], vec![], Some(600)),
        (
            "one event altered",
            alter(250),
            vec![("altered", 250, 250)],
            vec![(Altered, Some(250))],
            Some(200),
        ),
        (
            "the stored hash alone changed",
            Box::new(|r| r[249].hash = "ab".repeat(32)),
            vec![("altered", 250, 250)],
            vec![(Altered, Some(250))],
            Some(200),
        ),
        (
            "a consistent rewrite from 350",
            Box::new(|r| {
                for x in r.iter_mut().filter(|x| x.seq >= 350) {
                    x.payload = format!("{{\"m\":{}}}", x.seq);
                }
                rehash_from(r, 350);
            }),
            vec![("rewritten", 350, 700)],
            vec![
                (Fork, Some(350)),
                (Fork, Some(400)),
                (Fork, Some(500)),
                (Fork, Some(600)),
            ],
            Some(300),
        ),
        (
            "cut after 550",
            Box::new(|r| r.truncate(550)),
            vec![("missing", 551, 600)],
            vec![(Cut, Some(600))],
            Some(500),
        ),
        (
            "two breaks",
            Box::new(|r| {
                alter(150)(r);
                alter(450)(r);
            }),
            vec![("altered", 150, 150), ("altered", 450, 450)],
            vec![(Altered, Some(150)), (Altered, Some(450))],
            Some(100),
        ),
        (
            "a break at a kept head",
            alter(300),
            vec![("altered", 300, 300)],
            vec![(Altered, Some(300))],
            Some(200),
        ),
        (
            "a break inside the unvouched tail",
            alter(650),
            vec![("unvouched", 601, 649), ("altered", 650, 650), ("unvouched", 651, 700)],
            vec![(Altered, Some(650)), (Unvouched, Some(601)), (Unvouched, Some(651))],
            Some(600),
        ),
        (
            "three breaks, one at a kept head, one in the tail",
            Box::new(|r| {
                alter(150)(r);
                alter(300)(r);
                alter(650)(r);
            }),
            vec![
                ("altered", 150, 150),
                ("altered", 300, 300),
                ("unvouched", 601, 649),
                ("altered", 650, 650),
                ("unvouched", 651, 700),
            ],
            vec![
                (Altered, Some(150)),
                (Altered, Some(300)),
                (Altered, Some(650)),
                (Unvouched, Some(601)),
                (Unvouched, Some(651)),
            ],
            Some(100),
        ),
    ];
    cases.push((
        "cut after 250, below four heads",
        Box::new(|r| r.truncate(250)),
        vec![("missing", 251, 600)],
        vec![(Cut, Some(300))],
        Some(200),
    ));
    cases.push((
        "a row written past skipped seqs, over the last one",
        Box::new(|r| {
            let prev = r[699].hash.clone();
            let h = event_hash(prev.as_bytes(), 705, b"r", b"", b"t", b"k", b"{}");
            r.push(Row {
                seq: 705,
                payload: "{}".into(),
                hash: String::from_utf8(h.to_vec()).unwrap(),
                prev,
            });
        }),
        vec![("unvouched", 601, 700), ("missing", 701, 704), ("unvouched", 705, 705)],
        vec![(Gap, Some(701)), (Unvouched, Some(601)), (Unvouched, Some(705))],
        Some(600),
    ));
    // At the newest anchor, with rows past it: a changed stored hash is that
    // row, as a changed payload is (the rows after it link to what its
    // fields give, not to a rewrite), and a row deleted past it is missing.
    for (name, damage) in [
        ("the newest head's row altered", alter(600)),
        (
            "the newest head's stored hash alone changed",
            Box::new(|r: &mut Vec<Row>| r[599].hash = "ab".repeat(32)) as Damage,
        ),
    ] {
        cases.push((
            name,
            damage,
            vec![("altered", 600, 600), ("unvouched", 601, 700)],
            vec![(Altered, Some(600)), (Unvouched, Some(601))],
            Some(500),
        ));
    }
    cases.push((
        "the newest head's row cut, the rows below it rewritten",
        Box::new(|r| {
            for x in r.iter_mut().filter(|x| (550..600).contains(&x.seq)) {
                x.payload = format!("{{\"m\":{}}}", x.seq);
            }
            rehash_from(r, 550);
            r.truncate(599);
        }),
        vec![("rewritten", 550, 599), ("missing", 600, 600)],
        vec![(Cut, Some(600)), (Fork, Some(550))],
        Some(500),
    ));
    cases.push((
        "a row deleted past the newest anchor",
        Box::new(|r| r.retain(|x| x.seq != 650)),
        vec![("unvouched", 601, 649), ("missing", 650, 650), ("unvouched", 651, 700)],
        vec![(Gap, Some(650)), (Unvouched, Some(601)), (Unvouched, Some(651))],
        Some(600),
    ));
    for (name, damage, want_ranges, want_kinds, want_trusted) in cases {
        let (mut rows, store, key) = log();
        damage(&mut rows);
        let j = judge(&rows, &store, &key);
        let want = (want_ranges, want_kinds, want_trusted);
        assert_eq!(j.db, want, "{name}: the database");
        assert_eq!(j.copy, want, "{name}: the copy");
        assert_eq!(j.store, vec![], "{name}: the store alone");
    }
}

/// Where a copy says more than a database: each record names its
/// predecessor's hash, a row does not. Past deleted or moved rows the
/// database's row is checked against the log's own entry at the seq before
/// it (the checkpoint's entry bundle, each entry checked against its leaf),
/// so the database names what the copy names. Without the entry bundles the
/// row cannot be checked (a level-0 tile holds only its leaf hash): it is
/// named not vouched for, alone (the rows after it link to its stored hash,
/// which the leaf vouches for).
#[test]
fn a_row_after_deleted_or_moved_rows_is_checked_by_the_log_s_entry_as_a_record_by_its_named_predecessor() {
    // (case, damage, the ranges, the database's without entry bundles, the last trusted head)
    let cases: Vec<(&str, Damage, Ranges, Ranges, u64)> = vec![
        (
            "one event deleted",
            Box::new(|r| {
                r.remove(249);
            }),
            vec![("missing", 250, 250)],
            vec![("missing", 250, 250), ("unvouched", 251, 251)],
            200,
        ),
        (
            "a mid-chain deletion",
            Box::new(|r| r.retain(|x| !(430..=440).contains(&x.seq))),
            vec![("missing", 430, 440)],
            vec![("missing", 430, 440), ("unvouched", 441, 441)],
            400,
        ),
        (
            "the first event deleted",
            Box::new(|r| {
                r.remove(0);
            }),
            vec![("missing", 1, 1)],
            vec![("missing", 1, 1), ("unvouched", 2, 2)],
            0,
        ),
        (
            "a head's own event deleted",
            Box::new(|r| {
                r.remove(299);
            }),
            vec![("missing", 300, 300)],
            vec![("missing", 300, 300), ("unvouched", 301, 301)],
            200,
        ),
        (
            "two events swapped",
            Box::new(|r| {
                let (a, b) = (r[249].clone(), r[250].clone());
                r[249] = Row { seq: 250, ..b };
                r[250] = Row { seq: 251, ..a };
            }),
            vec![("altered", 250, 251)],
            vec![("altered", 250, 251), ("unvouched", 252, 252)],
            200,
        ),
        (
            "an event moved over the next",
            Box::new(|r| {
                let a = r[249].clone();
                r[250] = Row { seq: 251, ..a };
                r.remove(249);
            }),
            vec![("missing", 250, 250), ("altered", 251, 251)],
            vec![("missing", 250, 250), ("altered", 251, 251), ("unvouched", 252, 252)],
            200,
        ),
    ];
    for (name, damage, want, without_entries, trusted) in cases {
        let (mut rows, store, key) = log();
        damage(&mut rows);
        let j = judge(&rows, &store, &key);
        assert_eq!(j.db.0, want, "{name}: the database");
        assert_eq!(j.copy.0, want, "{name}: the copy");
        assert_eq!(j.db.1, j.copy.1, "{name}: the findings");
        let trusted = (trusted > 0).then_some(trusted);
        assert_eq!((j.db.2, j.copy.2), (trusted, trusted), "{name}: the last trusted head");
        // The entry before a deleted row shows an edit of the row after it.
        if let Some(gap) = (1..rows.len())
            .find(|&i| rows[i].seq != rows[i - 1].seq + 1)
            .filter(|_| name.contains("deleted"))
        {
            let mut edited = rows.clone();
            edited[gap].payload = "{\"edited\":1}".into();
            let j = judge(&edited, &store, &key);
            let seq = edited[gap].seq;
            assert!(
                j.db.0.contains(&("altered", seq, seq)),
                "{name}: an edit behind the deletion: {:?}",
                j.db.0
            );
            assert!(
                j.copy.0.contains(&("altered", seq, seq)),
                "{name}: the copy: {:?}",
                j.copy.0
            );
        }
        store.delete_objects("o", "tile/entries/");
        let j = judge(&rows, &store, &key);
        assert_eq!(j.db.0, without_entries, "{name}: the database without entry bundles");
    }
}

/// Past the newest anchor there are no entries to check a database row by:
/// two swapped rows are the first altered and the second unvouched (its
/// fields cannot be checked), and the intact row after them is not named;
/// the copy's second record names its predecessor, so it is altered there.
#[test]
fn rows_swapped_past_the_newest_anchor_name_no_intact_row() {
    let (mut rows, store, key) = log();
    let (a, b) = (rows[649].clone(), rows[650].clone());
    rows[649] = Row { seq: 650, ..b };
    rows[650] = Row { seq: 651, ..a };
    let j = judge(&rows, &store, &key);
    assert_eq!(
        j.db.0,
        vec![("unvouched", 601, 649), ("altered", 650, 650), ("unvouched", 651, 700)]
    );
    assert_eq!(
        j.copy.0,
        vec![("unvouched", 601, 649), ("altered", 650, 651), ("unvouched", 652, 700)]
    );
    assert_eq!((j.db.2, j.copy.2), (Some(600), Some(600)));
}

#[test]
fn the_store_s_damage_is_named_alike_by_every_adaptor() {
    let head = |seq: u64| chainship_anchor::store::head_name(seq);
    let flip = |s: &MemoryStore| {
        let get = chainship_anchor::store::AnchorStore::get_object(s, "o", "tile/0/001");
        let mut t = crate::test_run(get).unwrap().unwrap();
        t[5] ^= 1;
        s.plant_object("o", "tile/0/001", &t);
    };
    type StoreDamage = Box<dyn Fn(&MemoryStore)>;
    let cases: Vec<(&str, StoreDamage, Kinds)> = vec![
        (
            "every head deleted",
            Box::new(move |s| {
                for seq in (100..=600).step_by(100) {
                    s.delete_objects("o", &head(seq));
                }
            }),
            (100..=500).step_by(100).map(|s| (HeadMissing, Some(s))).collect(),
        ),
        (
            "one head deleted",
            Box::new(move |s| s.delete_objects("o", &head(300))),
            vec![(HeadMissing, Some(300))],
        ),
        (
            "one checkpoint deleted",
            Box::new(|s| s.delete_objects("o", &format!("checkpoints/{:020}", 300))),
            vec![(CheckpointMissing, Some(300))],
        ),
        (
            "every checkpoint deleted",
            Box::new(|s| s.delete_objects("o", "checkpoints/")),
            vec![(CheckpointMissing, Some(600))],
        ),
        (
            "a tile damaged",
            Box::new(flip),
            vec![(TilesDisagree, Some(300)), (TilesDisagree, Some(600))],
        ),
        (
            "a tile deleted",
            Box::new(|s| s.delete_objects("o", "tile/0/001")),
            (300..=600).step_by(100).map(|s| (TilesDisagree, Some(s))).collect(),
        ),
        (
            "every checkpoint and the pointer deleted, the tiles kept",
            Box::new(|s| {
                s.delete_objects("o", "checkpoints/");
                s.delete_objects("o", "checkpoint");
            }),
            vec![(CheckpointMissing, None)],
        ),
        (
            "a garbage pointer",
            Box::new(|s| s.plant_object("o", "checkpoint", b"garbage\n")),
            vec![(CheckpointMissing, Some(600))],
        ),
    ];
    for (name, damage, want) in cases {
        let (rows, store, key) = log();
        damage(&store);
        let j = judge(&rows, &store, &key);
        assert_eq!(j.store, want, "{name}: the store alone");
        assert_eq!(j.db, (vec![], want.clone(), Some(600)), "{name}: the database");
        assert_eq!(j.copy, (vec![], want, Some(600)), "{name}: the copy");
    }
    // A key nobody trusts: every head untrusted, and none to compare with.
    let (rows, store, _) = log();
    let stranger = SignerKey::generate("o").unwrap();
    let j = judge(&rows, &store, &stranger);
    let mut want: Kinds = (100..=600).step_by(100).map(|s| (UntrustedKey, Some(s))).collect();
    want.push((NoTrustedHead, None));
    want.sort();
    assert_eq!(j.store, want);
    assert_eq!(j.db, (vec![], want.clone(), None));
    assert_eq!(j.copy, (vec![], want, None));
}

#[test]
fn the_tail_past_the_last_anchor_is_unvouched_whatever_the_damage_below_it() {
    let deleted: Damage = Box::new(|r| r.retain(|x| !(430..=440).contains(&x.seq)));
    for (name, damage) in [
        ("intact", Box::new(|_: &mut Vec<Row>| {}) as Damage),
        ("one event altered", alter(250)),
        ("a mid-chain deletion", deleted),
    ] {
        let (mut rows, store, key) = log();
        damage(&mut rows);
        // Within the allowance: said, no finding of its own.
        let j = judge_with(&rows, &store, &key, u64::MAX);
        assert_eq!(j.tails, (Some((601, 700)), Some((601, 700))), "{name}");
        assert!(!j.db.1.contains(&(Unvouched, Some(601))), "{name}: {:?}", j.db.1);
        // Past it: a finding and its open range, alike.
        let j = judge_with(&rows, &store, &key, 50);
        for (what, (ranges, kinds, _)) in [("database", &j.db), ("copy", &j.copy)] {
            assert!(ranges.contains(&("unvouched", 601, 700)), "{name}, {what}: {ranges:?}");
            assert!(kinds.contains(&(Unvouched, Some(601))), "{name}, {what}: {kinds:?}");
        }
    }
    // A cut before the last head: the rows it holds past the last head are
    // vouched for by the newest checkpoint's leaves, no tail; without the
    // tiles, the tail is what follows the last head it holds.
    let (mut rows, store, key) = log();
    rows.truncate(550);
    let j = judge(&rows, &store, &key);
    assert_eq!(j.tails, (None, None));
    assert_eq!(
        (j.db.0.clone(), j.copy.0.clone()),
        (vec![("missing", 551, 600)], vec![("missing", 551, 600)])
    );
    store.delete_objects("o", "tile/");
    let j = judge(&rows, &store, &key);
    assert_eq!(j.tails, (Some((501, 550)), Some((501, 550))));
}

/// A row whose hash cell is not text stops the database's walk: the row is
/// named, and so is every seq past it, as not checked (the verdict never
/// reads as if rows past it were judged); with the run rules, the runs past
/// it are read with the damaged row passed over.
#[test]
fn a_damaged_cell_names_the_rows_past_it_as_not_checked() {
    let (rows, store, key) = log();
    let dir = tempfile::tempdir().unwrap();
    let path = database_of(dir.path(), &rows);
    let db = rusqlite::Connection::open(&path).unwrap();
    db.execute("UPDATE events SET hash = x'00' WHERE seq = 250", [])
        .unwrap();
    drop(db);
    let touched = chainship_runs::Touched::new(&chainship_chain::profile::AGENTRT, &[]);
    let v = anchor_verify(&store, &key, Some(&path), u64::MAX, Some(touched));
    assert!(!v.passed());
    let found = kinds(&v);
    assert!(found.contains(&(Kind::Altered, Some(250))), "{found:?}");
    let not_checked = v
        .findings
        .iter()
        .find(|f| f.kind == Kind::NotWhole)
        .expect("not checked named");
    assert_eq!(not_checked.seq, Some(251));
    assert!(not_checked.message.contains("seqs 251..700"), "{}", not_checked.message);
    let touched = v.touched.as_ref().expect("affected runs");
    assert_eq!((touched.from, touched.to), (250, 700));
    assert!(
        touched.note.as_deref().is_some_and(|n| n.contains("seq 250")),
        "{:?}",
        touched.note
    );
}

/// A table without its primary key, holding a second row for one seq (a
/// forged payload with the true hash, after the true row): the database
/// names that seq, wherever the forged row stands, and never passes.
#[test]
fn a_second_row_for_one_seq_is_named_in_a_database() {
    let (rows, store, key) = log();
    for forged_first in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("no-key.db");
        let db = rusqlite::Connection::open(&path).unwrap();
        db.execute_batch("CREATE TABLE events (seq INTEGER, run_id TEXT, step_id TEXT, at TEXT, type TEXT, payload_json TEXT, hash TEXT)")
            .unwrap();
        let insert = |r: &Row, payload: &str| {
            db.execute(
                "INSERT INTO events VALUES (?1, 'r', '', 't', 'k', ?2, ?3)",
                rusqlite::params![r.seq as i64, payload, r.hash],
            )
            .unwrap();
        };
        for r in &rows {
            if r.seq == 250 && forged_first {
                insert(r, "{\"forged\":1}");
            }
            insert(r, &r.payload);
            if r.seq == 250 && !forged_first {
                insert(r, "{\"forged\":1}");
            }
        }
        drop(db);
        let v = anchor_verify(&store, &key, Some(&path), u64::MAX, None);
        assert!(!v.passed(), "forged first: {forged_first}");
        assert_eq!(ranges(&v), vec![("altered", 250, 250)], "forged first: {forged_first}");
    }
}
