//! Where to resume: the cursor, the database and the sink must agree
//! before anything is shipped.
//!
//! 1. The cursor's `seq:hash` must still be in the database (else it was
//!    rewritten, cut, or restored from an older copy under us: stop).
//! 2. What the sink holds past the cursor must be proven: its records read
//!    back, re-hashed and linked from the cursor with no gap (the sink does
//!    this with a `HeldCheck`), and the last of them on the database's
//!    chain (else someone else wrote there, or the database was replaced:
//!    stop).
//! 3. Resume after that, never below the cursor: the sink may hold a batch
//!    whose cursor write a crash cut short.

use chainship_chain::{Error, ErrorKind, EventDb, Head, Setting};

use crate::config::StartFrom;
use crate::delivery::Delivery;
use crate::error::FollowError;
use crate::metrics;
use crate::run_state::RunStateFile;

/// The agreed starting point: deliver events after `after` (`None`: from seq 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResumePoint {
    pub after: Option<Head>,
    /// How many events the sink held beyond the cursor (not sent again).
    pub skipped: u64,
}

/// The resume phase: the cursor checked against the database, the sink
/// read back past it and checked too, and the cursor moved up to what the
/// sink provably holds. Returns where to deliver from. A refusal says so
/// when the cursor looks like another origin's follower's.
pub fn resume(
    db: &EventDb,
    delivery: &mut Delivery,
    start: StartFrom,
    origin: &str,
) -> Result<ResumePoint, FollowError> {
    let runs = RunStateFile::new(delivery.cursor().sibling(".runs"), origin);
    resume_from_cursor(db, delivery, start).map_err(|e| another_followers_cursor(e, &runs, origin))
}

fn resume_from_cursor(db: &EventDb, delivery: &mut Delivery, start: StartFrom) -> Result<ResumePoint, FollowError> {
    delivery.cursor().check_writable()?;
    let cursor_head = delivery.cursor().load()?;
    let cursor_path = delivery.cursor().path().display().to_string();
    let start = database_start(db, cursor_head, start, &cursor_path)?;
    let held = delivery.with_retry("reading back what the sink holds", |sink, rt| {
        rt.block_on(sink.held(start))
    })?;
    let sink_name = delivery.sink_name();
    // The cursor's record was delivered: a sink without it lost data, and the
    // next events would follow a silent gap (records past it do not stand in for it).
    if let Some(cursor) = cursor_head {
        let holds = delivery.with_retry("reading back the cursor's record", |sink, rt| {
            rt.block_on(sink.holds(cursor))
        })?;
        if !holds {
            return Err(FollowError::integrity(format!(
                "the sink {sink_name} no longer holds seq {} that the cursor says was delivered ({cursor}): restored from an older copy, truncated, or deleted (or a new sink, or one written under another --origin, given an old cursor: start a new cursor for it); delivering on would leave a gap",
                cursor.seq
            )));
        }
    }
    let point = with_sink(db, start, held, &sink_name)?;
    if point.skipped > 0 {
        let head = point.after.expect("a sink ahead of the cursor holds a head");
        tracing::info!(sink = %sink_name, held = %head, skipped = point.skipped,
            "the sink already holds events past the cursor; resuming after them");
        metrics::duplicates_avoided(point.skipped);
        delivery.cursor().store(head)?;
    }
    if !delivery.sink_reads_back() && cursor_head.is_some() {
        tracing::info!(
            "this sink cannot read back what it holds: a crash between delivery and cursor write resends one batch"
        );
    }
    Ok(point)
}

/// A cursor the database or the sink does not hold reads as tampering or
/// loss; when the run state beside it was saved for another origin, it is
/// more likely another follower's cursor given to this one: say so.
fn another_followers_cursor(e: FollowError, runs: &RunStateFile, origin: &str) -> FollowError {
    match e {
        FollowError::Stop(mut error) if error.kind == ErrorKind::Integrity => {
            if let Some(other) = runs.other_origin() {
                error.message = format!(
                    "{}; but the run state beside the cursor ({}) was saved for origin \"{other}\", not {origin:?}: is this another follower's cursor? Each origin needs its own --cursor",
                    error.message,
                    runs.path().display()
                );
            }
            FollowError::Stop(error)
        }
        e => e,
    }
}

/// Step 1 on its own, as `follow` takes it and `check` reports it: every row
/// reachable in seq order, and the cursor (if any) still on the database's
/// chain. Returns the head to deliver after.
pub fn database_start(
    db: &EventDb,
    cursor: Option<Head>,
    start: StartFrom,
    cursor_path: &str,
) -> Result<Option<Head>, FollowError> {
    // Rows with a seq no read by `seq > after` reaches are never read: said
    // at every start, as `verify` says them, never passed over.
    if let Some(seq) = db
        .first_unreachable_seq()
        .map_err(|e| FollowError::setup(e.to_string()))?
    {
        return Err(FollowError::integrity(format!(
            "{}: a row has seq {seq}: no read in seq order reaches it, so the chain cannot be checked whole (`chainship verify` names it)",
            db.path().display()
        )));
    }
    start_from_cursor(db, cursor, start, cursor_path)
}

/// Where the cursor says to start, checked against the database.
pub fn start_from_cursor(
    db: &EventDb,
    cursor: Option<Head>,
    start: StartFrom,
    cursor_path: &str,
) -> Result<Option<Head>, FollowError> {
    match (cursor, start) {
        (Some(c), _) => {
            check_on_chain(db, c, "the cursor")?;
            Ok(Some(c))
        }
        (None, StartFrom::Start) => Ok(None),
        (None, StartFrom::Seq(1)) => Ok(None),
        (None, StartFrom::Seq(n)) => {
            let before = n - 1;
            let hash = db.hash_at(before).map_err(|e| FollowError::setup(e.to_string()))?;
            match hash.as_deref().and_then(|h| Head::from_stored(before, h)) {
                Some(head) => Ok(Some(head)),
                None => Err(FollowError::Stop(
                    Error::permanent(format!(
                        "start at seq {n}: the database has no event {before} with a well-formed hash to start after"
                    ))
                    .with_setting(Setting::StartFrom),
                )),
            }
        }
        (None, StartFrom::Cursor) => Err(FollowError::Stop(
            Error::permanent(format!(
                "no cursor at {cursor_path}: for a first run say where to start"
            ))
            .with_setting(Setting::StartFrom),
        )),
    }
}

/// Combines the cursor's start with what the sink provably holds past it
/// (`Sink::held`, which read back and checked every record past `start`).
pub fn with_sink(
    db: &EventDb,
    start: Option<Head>,
    held: Option<Head>,
    sink: &str,
) -> Result<ResumePoint, FollowError> {
    let start_seq = start.map_or(0, |h| h.seq);
    match held {
        Some(held) if held.seq > start_seq => {
            // The records link from the cursor and re-hash, so this agreeing
            // with the database means every one of them does.
            check_on_chain(db, held, &format!("the sink {sink}"))?;
            Ok(ResumePoint {
                after: Some(held),
                skipped: held.seq - start_seq,
            })
        }
        Some(held) if Some(held) != start => Err(FollowError::integrity(format!(
            "the sink {sink} answered {held} for what it holds past {}, which is not past it",
            start.map_or("the start".to_owned(), |h| h.to_string())
        ))),
        _ => Ok(ResumePoint {
            after: start,
            skipped: 0,
        }),
    }
}

/// Checks that the database still holds `head` (same seq, same hash).
fn check_on_chain(db: &EventDb, head: Head, whose: &str) -> Result<(), FollowError> {
    let setup = |e: chainship_chain::DbError| FollowError::setup(e.to_string());
    // Where seq is not the rowid, a second row of the seq at the cursor is
    // never read by `seq > cursor`: a break the first pass named, or a row
    // planted after it, must stop every restart too.
    let rows = db.rows_at(head.seq).map_err(setup)?;
    if rows > 1 {
        return Err(FollowError::integrity(format!(
            "{rows} rows of the database have seq {} that {whose} holds ({head}): a seq held twice breaks the chain (`chainship verify` names it)",
            head.seq
        )));
    }
    match db.hash_at(head.seq).map_err(setup)? {
        Some(hash) if hash == head.hash => Ok(()),
        Some(hash) => Err(FollowError::integrity(format!(
            "the database was rewritten under {whose}: event seq {} has hash {}, but {whose} holds {}{}",
            head.seq,
            String::from_utf8_lossy(&hash),
            head,
            if whose.starts_with("the sink") {
                " (or the sink holds another chain: another database's under this origin, or planted records)"
            } else {
                ""
            }
        ))),
        None => {
            let db_head = db.head().map_err(setup)?;
            let db_head = db_head.map_or("none (empty)".to_owned(), |(s, h)| {
                format!("{s}:{}", String::from_utf8_lossy(&h))
            });
            Err(FollowError::integrity(format!(
                "the database does not hold seq {} that {whose} holds ({head}); database head is {db_head}: cut, or restored from an older copy",
                head.seq
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;

    use chainship_chain::{ErrorKind, HasKind};
    use chainship_sinks::Sink;

    use super::*;
    use crate::cursor::FileCursor;
    use crate::health::Health;
    use crate::retry::RetryPolicy;
    use crate::testing::{MemorySink, chain_db, head_at, records};

    const ORIGIN: &str = "test/origin";

    struct Fixture {
        _dir: tempfile::TempDir,
        db_path: std::path::PathBuf,
        cursor: FileCursor,
        sink: MemorySink,
        rt: tokio::runtime::Runtime,
    }

    impl Fixture {
        fn new(events: u64) -> Fixture {
            let dir = tempfile::tempdir().unwrap();
            let db_path = dir.path().join("audit.db");
            chain_db(&db_path, events, "ours");
            let cursor = FileCursor::new(dir.path().join("cursor"));
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            Fixture {
                _dir: dir,
                db_path,
                cursor,
                sink: MemorySink::new(ORIGIN),
                rt,
            }
        }

        /// The sink receives events `first..=last` of `db`.
        fn sink_holds(&mut self, db: &Path, first: u64, last: u64) {
            let batch = records(db, ORIGIN, first, last);
            self.rt.block_on(self.sink.deliver(&batch)).unwrap();
        }

        fn resume(&self, start: StartFrom) -> Result<ResumePoint, FollowError> {
            let db = EventDb::open(&self.db_path, &Default::default()).unwrap();
            let retry = RetryPolicy {
                give_up_after: Some(Duration::from_millis(50)),
                ..RetryPolicy::default()
            };
            let mut delivery = Delivery::new(
                Box::new(self.sink.clone()),
                self.cursor.clone(),
                self.rt.handle().clone(),
                Arc::new(AtomicBool::new(false)),
                Arc::new(Health::new(Duration::from_secs(60))),
                retry,
            );
            resume(&db, &mut delivery, start, ORIGIN)
        }
    }

    #[test]
    fn a_sink_ahead_of_the_cursor_moves_the_cursor_up() {
        let mut f = Fixture::new(20);
        let db = f.db_path.clone();
        f.sink_holds(&db, 1, 12);
        f.cursor.store(head_at(&db, 5)).unwrap();
        let point = f.resume(StartFrom::Cursor).unwrap();
        assert_eq!(point.after, Some(head_at(&db, 12)));
        assert_eq!(point.skipped, 7);
        assert_eq!(
            f.cursor.load().unwrap(),
            Some(head_at(&db, 12)),
            "the cursor follows the sink"
        );
    }

    #[test]
    fn a_sink_that_lost_the_cursors_record_stops_with_integrity() {
        let mut f = Fixture::new(20);
        let db = f.db_path.clone();
        f.sink_holds(&db, 1, 3);
        f.cursor.store(head_at(&db, 5)).unwrap();
        let e = f.resume(StartFrom::Cursor).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Integrity, "{e}");
        assert!(e.to_string().contains("no longer holds seq 5"), "{e}");
    }

    #[test]
    fn another_origins_cursor_is_named_as_a_mix_up_not_only_a_rewrite() {
        let f = Fixture::new(20);
        let theirs = f._dir.path().join("theirs.db");
        chain_db(&theirs, 20, "theirs");
        f.cursor.store(head_at(&theirs, 5)).unwrap();
        let e = f.resume(StartFrom::Cursor).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Integrity, "{e}");
        assert!(
            !e.to_string().contains("another follower's cursor"),
            "no run state, no hint: {e}"
        );
        crate::run_state::RunStateFile::new(f.cursor.sibling(".runs"), "team/other")
            .store(head_at(&theirs, 5), b"")
            .unwrap();
        let e = f.resume(StartFrom::Cursor).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Integrity, "{e}");
        let message = e.to_string();
        assert!(
            message.contains("the database was rewritten under the cursor"),
            "{message}"
        );
        assert!(
            message.contains("saved for origin \"team/other\", not \"test/origin\"")
                && message.contains("another follower's cursor"),
            "{message}"
        );
        crate::run_state::RunStateFile::new(f.cursor.sibling(".runs"), ORIGIN)
            .store(head_at(&theirs, 5), b"")
            .unwrap();
        let e = f.resume(StartFrom::Cursor).unwrap_err();
        assert!(
            !e.to_string().contains("another follower's cursor"),
            "its own origin's state: {e}"
        );
        // An origin too long to show, or whose escapes make it so, is cut at 200 characters and said to be.
        let long = "\u{202e}".repeat(300);
        crate::run_state::RunStateFile::new(f.cursor.sibling(".runs"), &long)
            .store(head_at(&theirs, 5), b"")
            .unwrap();
        let message = f.resume(StartFrom::Cursor).unwrap_err().to_string();
        let shown = message
            .split("saved for origin \"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        assert!(
            shown.chars().count() <= 203 && shown.ends_with("...") && !shown.contains('\u{202e}'),
            "{shown}"
        );
        // A cursor the database holds (identical chains) but the sink does not.
        f.cursor.store(head_at(&f.db_path, 5)).unwrap();
        crate::run_state::RunStateFile::new(f.cursor.sibling(".runs"), "team/other")
            .store(head_at(&f.db_path, 5), b"")
            .unwrap();
        let message = f.resume(StartFrom::Cursor).unwrap_err().to_string();
        assert!(
            message.contains("no longer holds seq 5") && message.contains("another follower's cursor"),
            "{message}"
        );
    }

    #[test]
    fn a_sink_at_the_cursor_resumes_at_the_cursor() {
        let mut f = Fixture::new(20);
        let db = f.db_path.clone();
        f.sink_holds(&db, 1, 5);
        f.cursor.store(head_at(&db, 5)).unwrap();
        let point = f.resume(StartFrom::Cursor).unwrap();
        assert_eq!((point.after, point.skipped), (Some(head_at(&db, 5)), 0));
    }

    #[test]
    fn an_empty_sink_and_no_cursor_start_at_seq_1_only_when_told() {
        let f = Fixture::new(5);
        assert_eq!(f.resume(StartFrom::Start).unwrap().after, None);
        let e = f.resume(StartFrom::Cursor).unwrap_err();
        assert!(
            e.kind() == ErrorKind::Permanent && e.setting() == Some(Setting::StartFrom),
            "{e}"
        );
        let db = f.db_path.clone();
        assert_eq!(f.resume(StartFrom::Seq(3)).unwrap().after, Some(head_at(&db, 2)));
    }

    #[test]
    fn a_sink_holding_another_databases_chain_stops_with_integrity() {
        let mut f = Fixture::new(20);
        let other = f._dir.path().join("other.db");
        chain_db(&other, 20, "theirs");
        f.sink_holds(&other, 1, 10);
        let e = f.resume(StartFrom::Start).unwrap_err();
        assert!(
            e.kind() == ErrorKind::Integrity && e.to_string().contains("rewritten under the sink memory:"),
            "{e}"
        );
    }

    #[test]
    fn a_planted_record_past_the_cursor_stops_with_integrity_and_never_skips() {
        let mut f = Fixture::new(20);
        let db = f.db_path.clone();
        f.sink_holds(&db, 1, 5);
        f.cursor.store(head_at(&db, 5)).unwrap();
        // A record for seq 9 whose prev_hash claims to follow nothing there: a gap.
        let forged = records(&db, ORIGIN, 9, 9);
        f.sink.plant(forged.record_json(0));
        let e = f.resume(StartFrom::Cursor).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Integrity, "{e}");
        assert_eq!(
            f.cursor.load().unwrap(),
            Some(head_at(&db, 5)),
            "the cursor did not move"
        );
    }

    #[test]
    fn a_record_of_another_origin_past_the_cursor_stops_with_integrity() {
        let f = Fixture::new(20);
        let db = f.db_path.clone();
        f.cursor.store(head_at(&db, 5)).unwrap();
        let foreign = records(&db, "someone/else", 6, 6);
        f.sink.plant(foreign.record_json(0));
        assert_eq!(f.resume(StartFrom::Cursor).unwrap_err().kind(), ErrorKind::Integrity);
    }

    #[test]
    fn a_cursor_not_on_the_databases_chain_stops_with_integrity() {
        let f = Fixture::new(20);
        let other = f._dir.path().join("other.db");
        chain_db(&other, 20, "theirs");
        f.cursor.store(head_at(&other, 5)).unwrap();
        let e = f.resume(StartFrom::Cursor).unwrap_err();
        assert!(
            e.kind() == ErrorKind::Integrity && e.to_string().contains("rewritten under the cursor"),
            "{e}"
        );
        // And one past the database's head: cut, or an older copy.
        f.cursor.store(Head::from_stored(25, &[b'a'; 64]).unwrap()).unwrap();
        let e = f.resume(StartFrom::Cursor).unwrap_err();
        assert!(
            e.kind() == ErrorKind::Integrity && e.to_string().contains("does not hold seq 25"),
            "{e}"
        );
    }
}
