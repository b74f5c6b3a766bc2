//! One walk over the database that checks the chain and, on the way, every
//! head kept elsewhere. `chainship verify` and `chainship anchor verify`
//! both use it; they differ only in where their heads come from.

use crate::check::{ChainBreak, ChainCheck, Damage};
use crate::db::{DbError, EventDb};
use crate::head::Head;
use crate::read_ahead::{ReadAhead, ReadPlan};

/// What to walk.
#[derive(Clone, Debug, Default)]
pub struct WalkPlan {
    /// First seq to check (1 = from the start). The event before it is
    /// trusted as stored.
    pub from: u64,
    /// Last seq to check; `None` = the head the database had when the walk began.
    pub to: Option<u64>,
    /// Heads to check on the way, any order.
    pub heads: Vec<Head>,
    /// Tree sizes (ascending) whose RFC 6962 root of the stored hashes the
    /// walk reports (checkpoints to compare); only for a walk from seq 1.
    pub roots_at: Vec<u64>,
}

/// How one kept head compares with the database.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeadCheck {
    /// The walk reached the head's seq with no break, and the hash matches.
    Matched,
    /// The event at the head's seq has another hash (a fork or a rewrite).
    Differs { found: String },
    /// The chain broke before the walk reached this head.
    AfterBreak,
    /// The database ends before the head's seq (cut, or restored from an older copy).
    Beyond { db_end: Option<u64> },
    /// The head is below the walked range (`--from`) and was checked by lookup.
    BeforeRange { matched: bool },
}

/// The outcome of a walk.
#[derive(Clone, Debug)]
pub struct WalkReport {
    /// The database's head when the walk began.
    pub db_head: Option<(u64, String)>,
    /// The highest row's seq is not an integer, so there is no head to show.
    pub db_head_unreadable: bool,
    /// How many events were checked.
    pub checked: u64,
    pub first_seq: Option<u64>,
    /// The last event that checked out.
    pub last_good: Option<Head>,
    pub chain_break: Option<ChainBreak>,
    /// A row that cannot be an event (a field not text, a seq not an
    /// integer): the walk stops there, as at a break.
    pub damage: Option<Damage>,
    /// A row whose seq no walk from seq 1 reaches (`NULL`, `0`, `-5`),
    /// described; looked for only when the walk starts at seq 1.
    pub unreachable_seq: Option<String>,
    /// The seq the walk was asked to reach (`--to`), when it did not.
    pub to_not_reached: Option<u64>,
    /// Every head asked about, sorted by seq, with its result.
    pub heads: Vec<(Head, HeadCheck)>,
    /// The root of the first N stored hashes, for each `roots_at` size the
    /// walk reached with the chain intact.
    pub roots: Vec<(u64, chainship_tlog::Hash)>,
}

impl WalkReport {
    /// True when the chain is intact over the range and every head matched.
    pub fn ok(&self) -> bool {
        self.chain_break.is_none()
            && self.damage.is_none()
            && self.unreachable_seq.is_none()
            && self.to_not_reached.is_none()
            && self
                .heads
                .iter()
                .all(|(_, c)| matches!(c, HeadCheck::Matched | HeadCheck::BeforeRange { matched: true }))
    }

    /// The highest kept head that the database still matches.
    pub fn last_trusted_head(&self) -> Option<Head> {
        self.heads
            .iter()
            .filter(|(_, c)| matches!(c, HeadCheck::Matched | HeadCheck::BeforeRange { matched: true }))
            .map(|(h, _)| *h)
            .max_by_key(|h| h.seq)
    }
}

/// Walks `db` as `plan` says. `progress` is called after each page with
/// the number of events checked so far.
pub fn walk_chain(db: EventDb, plan: &WalkPlan, progress: &mut dyn FnMut(u64)) -> Result<WalkReport, DbError> {
    let from = plan.from.max(1);
    // A walk by `seq > after` never sees rows with seq NULL, 0 or below.
    let unreachable_seq = if from == 1 { db.first_unreachable_seq()? } else { None };
    let (db_head, head_readable) = match db.head() {
        Ok(head) => (
            head.filter(|(seq, _)| *seq > 0)
                .map(|(seq, hash)| (seq, String::from_utf8_lossy(&hash).into_owned())),
            true,
        ),
        // The highest row's seq is not an integer (text and blobs sort above
        // every number): walk to the end, where the reader names the row.
        Err(DbError::Read {
            source: rusqlite::Error::InvalidColumnType(..) | rusqlite::Error::FromSqlConversionFailure(..),
            ..
        }) => (None, false),
        Err(e) => return Err(e),
    };
    let through = plan.to.or(db_head.as_ref().map(|(s, _)| *s));
    let through = if head_readable {
        Some(through.unwrap_or(0))
    } else {
        through
    };

    let mut heads: Vec<(Head, HeadCheck)> = Vec::with_capacity(plan.heads.len());
    let mut pending: Vec<Head> = Vec::new();
    for head in sorted(&plan.heads) {
        if head.seq < from {
            let matched = db.hash_at(head.seq)?.is_some_and(|h| h == head.hash);
            heads.push((head, HeadCheck::BeforeRange { matched }));
        } else {
            pending.push(head);
        }
    }
    // The walk must reach the highest head even past `through`.
    let through = through.map(|t| t.max(pending.last().map_or(0, |h| h.seq)));

    let mut check = if from == 1 {
        ChainCheck::from_start()
    } else {
        ChainCheck::resume(from - 1, &db.hash_at(from - 1)?.unwrap_or_default())
    };
    let mut first_seq = None;
    let mut chain_break = None;
    let mut damage = None;
    let mut last_seen = None;
    let mut next_head = pending.iter().peekable();
    let mut roots = Vec::new();
    let mut root_sizes = plan.roots_at.iter().copied().filter(|_| from == 1).peekable();
    let mut tree = chainship_tlog::CompactRange::default();

    let reader = ReadAhead::spawn(db, ReadPlan::new(from - 1, through));
    'pages: while let Some(page) = reader.next_page() {
        let page = match page {
            Ok(page) => page,
            Err(e) => {
                // Rows read before the damaged one were in the pages already checked.
                damage = damage_in_range(e, through, check.last_good())?;
                break 'pages;
            }
        };
        for event in page.iter() {
            first_seq.get_or_insert(event.seq);
            last_seen = Some(event.seq);
            if let Err(b) = check.check(&event) {
                chain_break = Some(*b);
                break 'pages;
            }
            if root_sizes.peek().is_some() {
                tree.push_leaf(chainship_tlog::leaf_hash(event.hash));
                while let Some(size) = root_sizes.next_if(|s| *s <= event.seq) {
                    if size == event.seq {
                        roots.push((size, tree.root()));
                    }
                }
            }
            while let Some(head) = next_head.next_if(|h| h.seq == event.seq) {
                let result = if head.hash[..] == *event.hash {
                    HeadCheck::Matched
                } else {
                    HeadCheck::Differs {
                        found: String::from_utf8_lossy(event.hash).into_owned(),
                    }
                };
                heads.push((*head, result));
            }
        }
        progress(check.checked());
        reader.give_back(page);
    }
    for head in next_head {
        let result = if chain_break.is_some() || damage.is_some() {
            HeadCheck::AfterBreak
        } else {
            HeadCheck::Beyond {
                db_end: last_seen.or(from.checked_sub(1).filter(|s| *s > 0)),
            }
        };
        heads.push((*head, result));
    }
    heads.sort_by_key(|(h, _)| h.seq);
    let to_not_reached = plan
        .to
        .filter(|to| chain_break.is_none() && damage.is_none() && last_seen.is_none_or(|s| s < *to));
    Ok(WalkReport {
        db_head,
        db_head_unreadable: !head_readable,
        checked: check.checked(),
        first_seq,
        last_good: check.last_good(),
        chain_break,
        damage,
        unreachable_seq,
        to_not_reached,
        heads,
        roots,
    })
}

/// A damaged row as a finding, when it lies in the walked range; any other
/// error stays an error. A damaged row past `through` (read in the same page
/// as the range's last events) is outside the walk and ends it quietly.
fn damage_in_range(e: DbError, through: Option<u64>, last_good: Option<Head>) -> Result<Option<Damage>, DbError> {
    let damage = match e {
        DbError::BadField { seq, column, found, .. } => Damage {
            seq: Some(seq),
            column,
            found: found.to_owned(),
            after: seq.saturating_sub(1),
            last_good,
        },
        DbError::BadSeq {
            column, found, after, ..
        } => Damage {
            seq: None,
            column,
            found,
            after,
            last_good,
        },
        e => return Err(e),
    };
    Ok(through.is_none_or(|t| damage.position() <= t).then_some(damage))
}

fn sorted(heads: &[Head]) -> Vec<Head> {
    let mut heads = heads.to_vec();
    heads.sort_by_key(|h| h.seq);
    heads
}
