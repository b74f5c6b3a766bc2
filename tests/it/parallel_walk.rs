//! The walk split into seq segments checked at once (`--jobs`) must report
//! exactly what one walk reports: the same first break or damaged row, the
//! same last good event, the same verdict for every kept head and the same
//! tree roots, wherever the fault sits, segment boundaries included.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use chainship_chain::{EventDb, Head, OpenOptions, WalkPlan, WalkReport, walk_chain};
use proptest::prelude::*;
use rusqlite::Connection;
use tempfile::TempDir;

const BASE_EVENTS: u64 = 1300;

/// One generated chain, copied (and cut to size) for each case.
fn base() -> &'static Path {
    static BASE: OnceLock<(TempDir, PathBuf)> = OnceLock::new();
    &BASE
        .get_or_init(|| {
            let dir = TempDir::new().unwrap();
            let db = common::generate(dir.path(), "base.db", BASE_EVENTS);
            (dir, db)
        })
        .1
}

fn chain_of(dir: &TempDir, n: u64) -> PathBuf {
    let db = dir.path().join("c.db");
    std::fs::copy(base(), &db).unwrap();
    common::tamper(&db)
        .execute("DELETE FROM events WHERE seq > ?1", [n as i64])
        .unwrap();
    db
}

#[derive(Clone, Copy, Debug)]
enum Fault {
    None,
    AlterPayload,
    Delete,
    SwapWithNext,
    BlobField,
    RealSeq,
    ZeroSeqRow,
    OtherHash,
}

fn damage(conn: &Connection, fault: Fault, seq: u64, n: u64) {
    let seq = seq as i64;
    let sql = match fault {
        Fault::None => return,
        Fault::AlterPayload => format!("UPDATE events SET payload_json = payload_json || ' ' WHERE seq = {seq}"),
        Fault::Delete => format!("DELETE FROM events WHERE seq = {seq}"),
        Fault::SwapWithNext if (seq as u64) < n => format!(
            "UPDATE events SET seq = -1 WHERE seq = {seq};
             UPDATE events SET seq = {seq} WHERE seq = {next};
             UPDATE events SET seq = {next} WHERE seq = -1;",
            next = seq + 1
        ),
        Fault::SwapWithNext => return,
        Fault::BlobField => format!("UPDATE events SET step_id = x'00ff' WHERE seq = {seq}"),
        // The real schema forbids it: the table is rebuilt without types first.
        Fault::RealSeq => format!(
            "ALTER TABLE events RENAME TO typed;
             CREATE TABLE events (seq, run_id, step_id, at, type, payload_json, hash);
             CREATE INDEX events_seq ON events (seq);
             INSERT INTO events SELECT * FROM typed;
             DROP TABLE typed;
             UPDATE events SET seq = {seq} + 0.5 WHERE seq = {seq};"
        ),
        Fault::ZeroSeqRow => "INSERT INTO events (seq, run_id, step_id, at, type, payload_json, hash) \
             SELECT 0, run_id, step_id, at, type, payload_json, hash FROM events WHERE seq = 1"
            .to_owned(),
        Fault::OtherHash => format!("UPDATE events SET hash = '{}' WHERE seq = {seq}", "ab".repeat(32)),
    };
    conn.execute_batch(&sql).unwrap();
}

fn walk(db: &Path, plan: &WalkPlan) -> WalkReport {
    walk_chain(EventDb::open(db, &OpenOptions::default()).unwrap(), plan, &mut |_| {}).unwrap()
}

/// Everything a report says, for comparison.
fn said(r: &WalkReport) -> String {
    format!(
        "head {:?} unreadable {} checked {} first {:?} last good {:?}\nbreak {:?}\ndamage {:?}\nunreachable {:?} to {:?}\nheads {:?}\nroots {:?}",
        r.db_head,
        r.db_head_unreadable,
        r.checked,
        r.first_seq,
        r.last_good,
        r.chain_break,
        r.damage,
        r.unreachable_seq,
        r.to_not_reached,
        r.heads,
        r.roots
    )
}

fn stored_hashes(db: &Path) -> Vec<(u64, String)> {
    let conn = Connection::open(db).unwrap();
    let mut stmt = conn
        .prepare("SELECT seq, hash FROM events WHERE typeof(seq) = 'integer' AND seq > 0 ORDER BY seq")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get::<_, i64>(0)? as u64, r.get::<_, String>(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn fault_strategy() -> impl Strategy<Value = Fault> {
    prop_oneof![
        Just(Fault::None),
        Just(Fault::AlterPayload),
        Just(Fault::Delete),
        Just(Fault::SwapWithNext),
        Just(Fault::BlobField),
        Just(Fault::RealSeq),
        Just(Fault::ZeroSeqRow),
        Just(Fault::OtherHash),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, .. ProptestConfig::default() })]

    #[test]
    fn every_number_of_jobs_reports_what_one_walk_reports(
        n in 2u64..BASE_EVENTS,
        jobs in 1usize..=8,
        fault in fault_strategy(),
        // Half the time the fault sits on a segment boundary (or next to one).
        on_boundary in any::<bool>(),
        boundary in any::<prop::sample::Index>(),
        nudge in 0u64..3,
        pick in any::<prop::sample::Index>(),
        from_start in prop::bool::weighted(0.8),
        from_pick in any::<prop::sample::Index>(),
        head_picks in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
        wrong_head in any::<bool>(),
        head_beyond in any::<bool>(),
        root_picks in prop::collection::vec(any::<prop::sample::Index>(), 0..5),
    ) {
        let dir = TempDir::new().unwrap();
        let db = chain_of(&dir, n);
        let conn = common::tamper(&db);
        let from = if from_start { 1 } else { from_pick.index(n as usize) as u64 + 1 };
        let roots_at: Vec<u64> = if from == 1 {
            let mut sizes: Vec<u64> = root_picks.iter().map(|p| p.index(n as usize) as u64 + 1).collect();
            sizes.extend([256, 512, 1024].into_iter().filter(|s| *s <= n));
            sizes.sort_unstable();
            sizes.dedup();
            sizes
        } else {
            Vec::new()
        };
        // Segments here are as small as the jobs allow (8 a thread, the
        // walk's SEGMENTS_PER_JOB, or 256 events when roots are asked for),
        // so boundaries fall inside every database.
        let pieces = if jobs == 1 { 1 } else { jobs as u64 * 8 };
        let len = if roots_at.is_empty() {
            (n - (from - 1)).div_ceil(pieces).max(1)
        } else {
            n.div_ceil(pieces).div_ceil(256) * 256
        };
        let seq = if on_boundary {
            let k = boundary.index(pieces as usize) as u64;
            ((from - 1) + k * len + nudge).clamp(1, n)
        } else {
            pick.index(n as usize) as u64 + 1
        };
        let mut heads: Vec<Head> = head_picks.iter().map(|p| {
            let s = p.index(n as usize) as u64 + 1;
            let hash: String = conn.query_row("SELECT hash FROM events WHERE seq = ?1", [s as i64], |r| r.get(0)).unwrap();
            Head::from_stored(s, hash.as_bytes()).unwrap()
        }).collect();
        if wrong_head {
            heads.push(Head::from_stored(seq, "cd".repeat(32).as_bytes()).unwrap());
        }
        if head_beyond {
            heads.push(Head::from_stored(n + 7, "ef".repeat(32).as_bytes()).unwrap());
        }
        damage(&conn, fault, seq, n);
        drop(conn);

        let plan = |jobs: usize, segment_events: u64| WalkPlan {
            from,
            to: None,
            heads: heads.clone(),
            roots_at: roots_at.clone(),
            jobs,
            segment_events,
            ..WalkPlan::default()
        };
        let one = walk(&db, &plan(1, u64::MAX));
        let many = walk(&db, &plan(jobs, 1));
        prop_assert_eq!(said(&one), said(&many), "fault {:?} at seq {} of {}, from {}, {} jobs", fault, seq, n, from, jobs);

        // The roots themselves, computed apart: RFC 6962 over the stored hashes.
        if let Some(end) = one.last_good.map(|h| h.seq) {
            let stored = stored_hashes(&db);
            for (size, root) in &one.roots {
                prop_assert!(*size <= end);
                let leaves: Vec<_> = stored.iter().take(*size as usize).map(|(_, h)| chainship_tlog::leaf_hash(h.as_bytes())).collect();
                prop_assert_eq!(*root, chainship_tlog::merkle::root_of(&leaves), "root at size {}", size);
            }
            let expected: Vec<u64> = roots_at.iter().copied().filter(|s| *s <= end).collect();
            prop_assert_eq!(one.roots.iter().map(|(s, _)| *s).collect::<Vec<_>>(), expected);
        }
    }
}

/// `--to` inside the range and a head past it, split across segments.
#[test]
fn to_and_heads_past_it_match_across_jobs() {
    let dir = TempDir::new().unwrap();
    let db = chain_of(&dir, 1000);
    let conn = common::tamper(&db);
    let hash: String = conn
        .query_row("SELECT hash FROM events WHERE seq = 900", [], |r| r.get(0))
        .unwrap();
    drop(conn);
    for to in [10, 499, 500, 501, 1000, 1200] {
        let plan = |jobs, segment_events| WalkPlan {
            from: 1,
            to: Some(to),
            heads: vec![Head::from_stored(900, hash.as_bytes()).unwrap()],
            roots_at: vec![256, 900],
            jobs,
            segment_events,
            ..WalkPlan::default()
        };
        let one = walk(&db, &plan(1, u64::MAX));
        for jobs in 2..=8 {
            assert_eq!(said(&one), said(&walk(&db, &plan(jobs, 1))), "--to {to}, {jobs} jobs");
        }
    }
}

/// `chainship verify --jobs N` prints the same report for any N, broken or not.
#[test]
fn verify_jobs_flag_gives_the_same_report() {
    let dir = TempDir::new().unwrap();
    let db = common::generate(dir.path(), "big.db", 140_000);
    let run = |jobs: &str| {
        let out = common::bin()
            .args(["verify", "--db", common::path_str(&db), "--jobs", jobs, "--json"])
            .output()
            .unwrap();
        (common::code(&out), String::from_utf8(out.stdout).unwrap())
    };
    let (code, one) = run("1");
    assert_eq!(code, 0, "{one}");
    assert_eq!(run("2"), (0, one.clone()));
    common::tamper(&db)
        .execute("UPDATE events SET at = at || 'x' WHERE seq = 70001", [])
        .unwrap();
    let (code, one) = run("1");
    assert_eq!(code, 1, "{one}");
    assert!(one.contains("\"seq\":70001"), "{one}");
    for jobs in ["2", "3", "8"] {
        assert_eq!(run(jobs), (1, one.clone()), "--jobs {jobs}");
    }
    let out = common::bin()
        .args(["verify", "--db", common::path_str(&db), "--jobs", "0"])
        .output()
        .unwrap();
    assert_eq!(common::code(&out), 2, "--jobs 0 is a usage error");
}

/// A seq column that is not the table's INTEGER PRIMARY KEY can hold a
/// value twice. A second row of a seq that ends a page (8192 rows) or a
/// segment must still be read: a break, the same with any `--jobs`.
#[test]
fn a_second_row_of_a_seq_at_a_page_boundary_is_a_break_for_any_jobs() {
    let dir = TempDir::new().unwrap();
    let db = common::generate(dir.path(), "loose.db", 140_000);
    common::tamper(&db)
        .execute_batch(
            "CREATE TABLE ev (seq INTEGER, run_id TEXT, step_id TEXT, at TEXT, type TEXT, payload_json TEXT, hash TEXT);
             INSERT INTO ev SELECT * FROM events ORDER BY seq;
             CREATE INDEX ev_seq ON ev (seq);",
        )
        .unwrap();
    let run = |jobs: &str| {
        let out = common::bin()
            .args([
                "verify",
                "--db",
                common::path_str(&db),
                "--table",
                "ev",
                "--jobs",
                jobs,
                "--json",
            ])
            .output()
            .unwrap();
        (common::code(&out), String::from_utf8(out.stdout).unwrap())
    };
    assert_eq!(run("1").0, 0, "intact before the duplicate");
    // 8192 ends the first page; 65536 ends a page and the first segment.
    for at in [8192, 65536, 73728] {
        let conn = common::tamper(&db);
        conn.execute("DELETE FROM ev WHERE rowid > 140000", []).unwrap();
        conn.execute(
            "INSERT INTO ev SELECT seq, run_id, step_id, at, type, '{\"evil\":1}', hash FROM events WHERE seq = ?1",
            [at],
        )
        .unwrap();
        drop(conn);
        let (code, one) = run("1");
        assert_eq!(code, 1, "a duplicate at {at} is a break: {one}");
        assert!(one.contains(&format!("\"seq\":{at}")), "{one}");
        for jobs in ["2", "3", "8"] {
            assert_eq!(run(jobs), (1, one.clone()), "duplicate at {at}, --jobs {jobs}");
        }
    }
}
