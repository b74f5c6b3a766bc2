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

use chainship_chain::{EventDb, Head};

use crate::follow::{FollowError, StartFrom};

/// The agreed starting point: deliver events after `after` (`None`: from seq 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResumePoint {
    pub after: Option<Head>,
    /// How many events the sink held beyond the cursor (not sent again).
    pub skipped: u64,
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
            let hash = db.hash_at(before).map_err(|e| FollowError::Setup(e.to_string()))?;
            match hash.as_deref().and_then(|h| Head::from_stored(before, h)) {
                Some(head) => Ok(Some(head)),
                None => Err(FollowError::Setup(format!(
                    "--from-seq {n}: the database has no event {before} with a well-formed hash to start after"
                ))),
            }
        }
        (None, StartFrom::Cursor) => Err(FollowError::Setup(format!(
            "no cursor at {cursor_path}: for a first run say where to start with --from-start or --from-seq N"
        ))),
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
        Some(held) if Some(held) != start => Err(FollowError::Integrity(format!(
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
    let setup = |e: chainship_chain::DbError| FollowError::Setup(e.to_string());
    match db.hash_at(head.seq).map_err(setup)? {
        Some(hash) if hash == head.hash => Ok(()),
        Some(hash) => Err(FollowError::Integrity(format!(
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
            Err(FollowError::Integrity(format!(
                "the database does not hold seq {} that {whose} holds ({head}); database head is {db_head}: cut, or restored from an older copy",
                head.seq
            )))
        }
    }
}
