//! One walk over the database that checks the chain and, on the way, every
//! head kept elsewhere. `chainship verify` and `chainship anchor verify`
//! both use it; they differ only in where their heads come from.

use crate::db::{DbError, EventDb};
use crate::head::Head;
use crate::read_ahead::{ReadAhead, ReadPlan};
use crate::walk::{ChainBreak, ChainCheck};

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
    /// How many events were checked.
    pub checked: u64,
    pub first_seq: Option<u64>,
    /// The last event that checked out.
    pub last_good: Option<Head>,
    pub chain_break: Option<ChainBreak>,
    /// The seq the walk was asked to reach (`--to`), when it did not.
    pub to_not_reached: Option<u64>,
    /// Every head asked about, sorted by seq, with its result.
    pub heads: Vec<(Head, HeadCheck)>,
}

impl WalkReport {
    /// True when the chain is intact over the range and every head matched.
    pub fn ok(&self) -> bool {
        self.chain_break.is_none()
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
    let db_head = db
        .head()?
        .map(|(seq, hash)| (seq, String::from_utf8_lossy(&hash).into_owned()));
    let through = plan.to.or(db_head.as_ref().map(|(s, _)| *s)).unwrap_or(0);

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
    let through = through.max(pending.last().map_or(0, |h| h.seq));

    let mut check = if from == 1 {
        ChainCheck::from_start()
    } else {
        ChainCheck::resume(from - 1, &db.hash_at(from - 1)?.unwrap_or_default())
    };
    let mut first_seq = None;
    let mut chain_break = None;
    let mut last_seen = None;
    let mut next_head = pending.iter().peekable();

    let reader = ReadAhead::spawn(db, ReadPlan::new(from - 1, Some(through)));
    'pages: while let Some(page) = reader.next_page() {
        let page = page?;
        for event in page.iter() {
            first_seq.get_or_insert(event.seq);
            last_seen = Some(event.seq);
            if let Err(b) = check.check(&event) {
                chain_break = Some(*b);
                break 'pages;
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
        let result = if chain_break.is_some() {
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
        .filter(|to| chain_break.is_none() && last_seen.is_none_or(|s| s < *to));
    Ok(WalkReport {
        db_head,
        checked: check.checked(),
        first_seq,
        last_good: check.last_good(),
        chain_break,
        to_not_reached,
        heads,
    })
}

fn sorted(heads: &[Head]) -> Vec<Head> {
    let mut heads = heads.to_vec();
    heads.sort_by_key(|h| h.seq);
    heads
}
