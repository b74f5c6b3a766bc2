//! Property tests of the break rules in docs/chain-format.md: damage a
//! generated chain in one way and check that the walk names exactly the seq
//! and kind the rules give.

use crate::common;

use std::path::Path;

use chainship_chain::{BreakKind, EventDb, Head, HeadCheck, OpenOptions, WalkPlan, walk_chain};
use proptest::prelude::*;
use rusqlite::Connection;
use tempfile::TempDir;

const FIELDS: [&str; 6] = ["run_id", "step_id", "at", "type", "payload_json", "hash"];

/// A chain of `n` events written through the real generator.
fn chain(dir: &TempDir, n: u64) -> std::path::PathBuf {
    common::generate(dir.path(), "c.db", n)
}

fn walk(db: &Path, heads: Vec<Head>) -> chainship_chain::WalkReport {
    let db = EventDb::open(db, &OpenOptions::default()).unwrap();
    walk_chain(
        db,
        &WalkPlan {
            from: 1,
            to: None,
            heads,
            roots_at: Vec::new(),
            ..WalkPlan::default()
        },
        &mut |_| {},
    )
    .unwrap()
}

fn head_at(conn: &Connection, seq: u64) -> Head {
    let hash: String = conn
        .query_row("SELECT hash FROM events WHERE seq = ?1", [seq as i64], |r| r.get(0))
        .unwrap();
    Head::from_stored(seq, hash.as_bytes()).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    #[test]
    fn altering_any_field_breaks_exactly_there(n in 2u64..60, pick in any::<prop::sample::Index>(), field in 0usize..6, extra in "[a-zé✓ ]{1,4}") {
        let dir = TempDir::new().unwrap();
        let db = chain(&dir, n);
        let seq = pick.index(n as usize) as u64 + 1;
        let conn = common::tamper(&db);
        let column = FIELDS[field];
        conn.execute(&format!("UPDATE events SET \"{column}\" = \"{column}\" || ?1 WHERE seq = ?2"), (extra, seq as i64)).unwrap();
        let report = walk(&db, vec![]);
        let b = report.chain_break.expect("an altered field must break the chain");
        prop_assert_eq!(b.seq, seq);
        prop_assert_eq!(b.kind, BreakKind::HashMismatch);
        prop_assert_eq!(report.last_good.map(|h| h.seq), seq.checked_sub(1).filter(|s| *s > 0));
    }

    #[test]
    fn deleting_an_event_breaks_at_the_next_seq(n in 2u64..60, pick in any::<prop::sample::Index>()) {
        let dir = TempDir::new().unwrap();
        let db = chain(&dir, n);
        let seq = pick.index(n as usize - 1) as u64 + 1; // not the last one
        common::tamper(&db).execute("DELETE FROM events WHERE seq = ?1", [seq as i64]).unwrap();
        let b = walk(&db, vec![]).chain_break.expect("a deleted event must break the chain");
        prop_assert_eq!(b.seq, seq + 1);
        prop_assert_eq!(b.kind, BreakKind::SeqGap { expected_seq: seq });
    }

    #[test]
    fn swapping_two_events_breaks_at_the_first(n in 2u64..60, pick in any::<prop::sample::Index>()) {
        let dir = TempDir::new().unwrap();
        let db = chain(&dir, n);
        let seq = pick.index(n as usize - 1) as u64 + 1;
        let conn = common::tamper(&db);
        // Swap every column but seq between the two rows.
        conn.execute_batch(&format!(
            "UPDATE events SET seq = -1 WHERE seq = {a};
             UPDATE events SET seq = {a} WHERE seq = {b};
             UPDATE events SET seq = {b} WHERE seq = -1;", a = seq, b = seq + 1)).unwrap();
        let b = walk(&db, vec![]).chain_break.expect("swapped events must break the chain");
        prop_assert_eq!(b.seq, seq);
        prop_assert_eq!(b.kind, BreakKind::HashMismatch);
    }

    #[test]
    fn cutting_the_end_is_intact_with_a_shorter_head(n in 2u64..60, cut in 1u64..10) {
        let cut = cut.min(n - 1);
        let dir = TempDir::new().unwrap();
        let db = chain(&dir, n);
        let conn = common::tamper(&db);
        let kept = head_at(&conn, n);
        let new_end = head_at(&conn, n - cut);
        conn.execute("DELETE FROM events WHERE seq > ?1", [(n - cut) as i64]).unwrap();
        let report = walk(&db, vec![kept]);
        prop_assert!(report.chain_break.is_none());
        prop_assert_eq!(report.last_good, Some(new_end));
        prop_assert_eq!(&report.heads[0].1, &HeadCheck::Beyond { db_end: Some(n - cut) });
        prop_assert!(!report.ok());
        prop_assert_eq!(report.last_trusted_head(), None);
    }
}

#[test]
fn kept_heads_on_an_intact_chain_all_match() {
    let dir = TempDir::new().unwrap();
    let db = chain(&dir, 40);
    let conn = common::tamper(&db);
    let heads: Vec<Head> = [40, 3, 17].iter().map(|s| head_at(&conn, *s)).collect();
    let report = walk(&db, heads);
    assert!(report.ok(), "{report:?}");
    assert_eq!(report.last_trusted_head().unwrap().seq, 40);
}
