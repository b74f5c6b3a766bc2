//! The verdict on a database (`anchor verify`): the store pass
//! ([`crate::pass`]) with each kept head judged against the
//! database's walk, the exact invalid ranges past a break or fork
//! ([`crate::ranges`]), and the rules that close a run: a stale log, no
//! head checked, the last trusted head and where trust ends. The CLI walks
//! the database (with its progress bar), calls [`audit_database`] and
//! renders the [`DbVerdict`].

use std::time::{Duration, SystemTime};

use chainship_chain::{EventDb, Head, HeadCheck, WalkReport};

use crate::finding::{self, Finding, Kind};
use crate::pass::{self, Against, Judge, Listing, Since, StreamAudit, StreamInput};
use crate::ranges::{self, Anchors, RangeInput};
use crate::verdict::Verdict;
use chainship_anchor::store::StoreError;

/// What to judge, beyond the store pass's input.
pub struct DbAudit<'a> {
    pub input: &'a StreamInput<'a>,
    /// The database's walk and a connection for lookups; `None`: the store alone.
    pub walked: Option<(&'a WalkReport, &'a EventDb)>,
    /// The newest trusted head must be younger than this.
    pub max_age: Option<Duration>,
    /// Pass with no trusted head to compare with (a warning instead).
    pub allow_no_heads: bool,
    /// Rows after the last trusted head that still pass (said as a warning).
    pub max_unvouched: u64,
}

/// The verdict on a database, or on the store alone.
pub type DbVerdict = Verdict<DbCovered>;

/// What a database check covered.
#[derive(Debug)]
pub struct DbCovered {
    /// The store pass: heads and checkpoints kept, trusted, proven.
    pub audit: StreamAudit,
    /// Heads judged (against the database; without one, heads and checkpoints).
    pub checked: usize,
    /// The first seq not vouched for, when something is wrong with the chain.
    pub invalid_from: Option<u64>,
    /// The database's walk, when there was one.
    pub database: Option<Walked>,
    /// The verify state the run went on from (`--state`), and whether it saved one.
    pub since: Option<Since>,
    pub state_saved: bool,
    /// The redactions the trusted statements cover, as read for this run
    /// (`None` without `--redaction-key`, or with none kept).
    pub redactions: Option<std::sync::Arc<chainship_chain::redaction::Redactions>>,
}

/// What the database's walk read.
#[derive(Debug)]
pub struct Walked {
    /// Events checked.
    pub checked: u64,
    /// The database's head as the walk began: seq and stored hash.
    pub head: Option<(u64, String)>,
}

/// Judges the store and the database (see the module doc).
pub async fn audit_database(a: &DbAudit<'_>, listing: Listing) -> Result<DbVerdict, StoreError> {
    let input = a.input;
    let since = input.since;
    let mut judge = a.walked.map(|(report, db)| DbJudge {
        report,
        db,
        past_break: Vec::new(),
        matched: Vec::new(),
        contradicted: Vec::new(),
    });
    let against = match judge.as_mut() {
        Some(j) => Against::Database(j as &mut dyn Judge),
        None => Against::Store,
    };
    let mut audit = pass::audit(input, listing, against).await?;
    let mut findings = audit.findings.clone();
    let mut warnings = Vec::new();
    if let Some(c) = &audit.cosign {
        findings.extend(c.findings.iter().cloned());
    }
    warnings.extend(audit.store_warnings());
    let walked_ranges = match (a.walked, judge.as_ref()) {
        (Some((report, db)), Some(judge)) => exact_ranges(input, &audit, report, db, judge).await?,
        _ => None,
    };
    // A checkpoint's leaves may vouch past the highest head the rows matched.
    let leaf_anchored = walked_ranges.as_ref().and_then(|w| w.anchored_through);
    let ranges = walked_ranges.map(|w| w.ranges);
    if ranges.is_none()
        && let (Some((report, _)), Some(since)) = (a.walked, since)
        && finding::break_position(report).is_some_and(|b| b <= since.head.seq)
    {
        warnings.push(format!(
            "the chain breaks below the state's head (seq {}): verify once without the state file to name the exact invalid ranges",
            since.head.seq
        ));
    }
    if let (Some((report, _)), Some(judge)) = (a.walked, judge.as_mut()) {
        match &ranges {
            Some(ranges) => {
                findings.extend(finding::range_findings(ranges, report.chain_break.as_ref()));
                findings.extend(finding::damage_findings(report, audit.after_break));
            }
            None => findings.extend(finding::break_findings(report, audit.after_break)),
        }
        if let Some(since) = since {
            findings.extend(state_head_finding(since, judge, report)?);
        }
    }
    if let Some(max_age) = a.max_age {
        let stale = match audit.published_in_future.clone() {
            Some(future) => Some(future),
            None => {
                // An incremental run that read no new head still knows the state's.
                let newest = audit
                    .newest_published
                    .or_else(|| since.and_then(|s| s.head_published.map(|p| (p, s.head))));
                finding::stale_finding(newest.as_ref().map(|(p, h)| (*p, h)), max_age, SystemTime::now())
            }
        };
        findings.extend(stale);
    }
    // Without a database a head is checked by its signature and its place in
    // the tree; with one, by the database holding it.
    let checked = match a.walked {
        // A checkpoint the database's tree matches is checked as a head would be.
        Some(_) => audit.heads_checked + audit.checkpoints_matched.len(),
        None => audit.heads_checked + audit.checkpoints_trusted,
    };
    // Allowed to have no head, a run still covers something: the chain itself.
    let events = a.walked.map_or(0, |(r, _)| r.checked);
    match finding::no_trusted_head(input.origin, checked, "") {
        Some(_) if a.allow_no_heads && events == 0 => findings.push(Finding::new(
            Kind::NothingChecked,
            None,
            match a.walked {
                Some(_) => "nothing was checked: the database holds no event, and no head is kept",
                None => "nothing was checked: the store keeps no head or checkpoint of this origin",
            },
        )),
        Some(_) if a.allow_no_heads => warnings.push(format!(
            "{}: no head was checked, only the chain itself (as allowed)",
            finding::no_head_text(input.origin, "")
        )),
        Some(f) => findings.push(f),
        None => {}
    }
    findings.sort_by_key(|f| (f.kind, f.seq));
    // One cut, at the first kept head past the end, as for a copy: its
    // missing range (below) names how far the store vouches past it.
    let first_cut = findings
        .iter()
        .filter(|f| f.kind == Kind::Cut)
        .filter_map(|f| f.seq)
        .min();
    findings.retain(|f| f.kind != Kind::Cut || f.seq.is_none() || f.seq == first_cut);
    // The last trusted head: the highest matched below every finding that
    // ends trust (the rule every verifier applies).
    let limit = findings
        .iter()
        .filter(|f| f.kind.ends_trust())
        .filter_map(|f| f.seq)
        .min();
    let below = |s: &u64| limit.is_none_or(|l| *s < l);
    let (last_trusted, last_trusted_published) = match (a.walked, judge.as_ref()) {
        (Some((_, db)), Some(j)) => {
            let named = |s: u64| findings.iter().any(|f| f.seq == Some(s));
            // A trusted checkpoint the database's tree matches vouches for its size as a head would.
            // A head past the break vouches only where the exact ranges read the rows up to it
            // (a row there may be one no walk can read: its stored hash proves nothing then).
            let past_break: &[u64] = if ranges.is_some() { &j.past_break } else { &[] };
            let seq = j
                .matched
                .iter()
                .chain(past_break)
                .chain(&audit.checkpoints_matched)
                .copied()
                .filter(below)
                .max()
                // Incremental: the state's head, when nothing named it.
                .or_else(|| since.map(|s| s.head.seq).filter(|s| below(s) && !named(*s)));
            let head = match seq {
                Some(seq) => db
                    .hash_at(seq)
                    .map_err(db_error)?
                    .and_then(|h| Head::from_stored(seq, &h)),
                None => None,
            };
            let published = match head {
                Some(h) if audit.last_trusted == Some(h) => audit.last_trusted_published,
                Some(h) => pass::trusted_head_at(input.store, input.origin, input.keys, h.seq)
                    .await?
                    .and_then(|(_, p)| p)
                    .or_else(|| since.filter(|s| s.head == h).and_then(|s| s.head_published)),
                None => None,
            };
            (head, published)
        }
        _ => {
            audit.finish_no_db(input.store, input.origin, input.keys).await?;
            let head = audit.last_trusted.filter(|h| below(&h.seq));
            (head, head.and(audit.last_trusted_published))
        }
    };
    let invalid_from = match (&ranges, a.walked) {
        (Some(ranges), _) => ranges.first().map(|r| r.from),
        (None, Some((report, _))) => walk_invalid_from(report).or_else(|| {
            // A kept head the database contradicts: the fork is after the last trusted one.
            findings
                .iter()
                .any(|f| f.kind == Kind::Fork)
                .then(|| last_trusted.map_or(1, |h| h.seq + 1))
        }),
        (None, None) => None,
    };
    // Rows past the highest anchor the database matched (and past every
    // range): what no signed head covers yet. A damaged row no walk reads
    // past leaves it unknown.
    let mut ranges = ranges;
    let unvouched = match (a.walked, judge.as_ref()) {
        (Some((report, _)), Some(j))
            if report.damage.is_none() && (report.chain_break.is_none() || ranges.is_some()) =>
        {
            let end = report.db_head.as_ref().map(|(end, _)| *end);
            let anchored = match ranges.as_ref().filter(|r| !r.is_empty()) {
                Some(_) => (j.matched.iter().chain(&j.past_break).chain(&audit.checkpoints_matched))
                    .copied()
                    .max(),
                None => last_trusted.map(|h| h.seq),
            }
            .max(leaf_anchored);
            anchored.and_then(|a| ranges::unvouched_tail(a, ranges.as_deref().unwrap_or_default(), end))
        }
        _ => None,
    };
    if let Some(tail) = unvouched {
        ranges::judge_tail(
            tail,
            a.max_unvouched,
            "row(s)",
            &mut findings,
            &mut warnings,
            &mut ranges,
        );
    }
    // A database that ends before a kept head: the seqs it lacks.
    if let (Some((report, _)), Some(cut)) = (
        a.walked,
        ranges::cut_range(
            &findings,
            a.walked
                .and_then(|(r, _)| r.db_head.as_ref().map(|(e, _)| *e))
                .unwrap_or(0),
            audit.highest_trusted_seq(),
        ),
    ) && report.damage.is_none()
    {
        ranges.get_or_insert_with(Vec::new).push(cut);
    }
    let invalid_from = invalid_from.or_else(|| ranges.as_ref().and_then(|r| r.iter().map(|r| r.from).min()));
    Ok(Verdict {
        findings,
        warnings,
        ranges,
        last_trusted,
        last_trusted_published,
        unvouched,
        touched: None,
        redacted: Vec::new(),
        covered: DbCovered {
            audit,
            checked,
            invalid_from,
            database: a.walked.map(|(r, _)| Walked {
                checked: r.checked,
                head: r.db_head.clone(),
            }),
            since: None,
            state_saved: false,
            redactions: None,
        },
    })
}

/// The first seq a walk (with heads of its own) could not vouch for: the
/// break or damaged row, or, for a kept head the database no longer
/// matches, the seq after the last head it does match.
pub fn walk_invalid_from(report: &WalkReport) -> Option<u64> {
    let mut from: Vec<u64> = Vec::new();
    if let Some(d) = &report.damage {
        from.push(d.seq.unwrap_or(d.after + 1));
    }
    if let Some(b) = &report.chain_break {
        from.push(b.seq);
    }
    let differs = report
        .heads
        .iter()
        .any(|(_, c)| matches!(c, HeadCheck::Differs { .. } | HeadCheck::BeforeRange { matched: false }));
    if differs {
        from.push(report.last_trusted_head().map_or(1, |h| h.seq + 1));
    }
    from.into_iter().min()
}

/// Past a break, or where a kept head contradicts the database: which seqs
/// exactly are invalid, and which are vouched for again.
async fn exact_ranges(
    input: &StreamInput<'_>,
    audit: &StreamAudit,
    report: &WalkReport,
    db: &EventDb,
    judge: &DbJudge<'_>,
) -> Result<Option<ranges::Walked>, StoreError> {
    // A trusted checkpoint whose root the database's tree does not give (the
    // only sign of a consistent rewrite when no head is kept).
    let root = audit.roots_contradicted.iter().copied().min();
    // A database that ends before a trusted anchor: the rows since the last
    // one it matched are walked against the checkpoint's leaves too (a
    // rewrite there shows nowhere else once the anchor's own row is cut).
    let end = report.db_head.as_ref().map_or(0, |(s, _)| *s);
    let cut = audit
        .highest_trusted_seq()
        .is_some_and(|h| h > end)
        .then_some(end.saturating_add(1));
    if report.damage.is_some()
        || (report.chain_break.is_none() && judge.contradicted.is_empty() && root.is_none() && cut.is_none())
    {
        return Ok(None);
    }
    // From the last head (or checkpoint) matched below the first break or contradiction.
    let first_problem = finding::break_position(report)
        .into_iter()
        .chain(judge.contradicted.iter().copied())
        .chain(root)
        .chain(cut)
        .min()
        .unwrap_or(0);
    // Below the state's head the incremental run read no heads: the exact
    // ranges need a full run (said as a warning by the caller).
    if input.since.is_some_and(|s| first_problem <= s.head.seq) {
        return Ok(None);
    }
    let after = judge
        .matched
        .iter()
        .chain(&audit.checkpoints_matched)
        .copied()
        .filter(|s| *s < first_problem)
        .max()
        .or_else(|| input.since.map(|s| s.head.seq).filter(|s| *s < first_problem))
        .unwrap_or(0);
    let mut heads: Vec<u64> = judge.matched.iter().copied().filter(|s| *s > after).collect();
    heads.extend(&judge.past_break);
    // A checkpoint the database's tree matches vouches for the hash at its size, as a head would.
    heads.extend(audit.checkpoints_matched.iter().filter(|s| **s > after));
    heads.sort_unstable();
    heads.dedup();
    // Leaves vouch only where this run saw the level-0 tiles give the signed root.
    let leaves = audit
        .largest
        .as_ref()
        .filter(|_| audit.edge.is_some() && input.since.is_none());
    let through = report.db_head.as_ref().map_or(0, |(s, _)| *s);
    let highest_anchor = heads.last().copied();
    let mut walked = ranges::exact_ranges(RangeInput {
        db,
        store: input.store,
        origin: input.origin,
        after,
        through,
        anchors: Anchors {
            heads,
            contradicted: judge.contradicted.clone(),
        },
        leaves,
    })
    .await?;
    ranges::unvouched_below_contradicted_root(
        &mut walked.ranges,
        root,
        (after, through),
        highest_anchor,
        leaves.is_some(),
    );
    Ok(Some(walked))
}

/// The state file's head must still be the database's.
fn state_head_finding(
    since: &Since,
    judge: &mut DbJudge<'_>,
    report: &WalkReport,
) -> Result<Option<Finding>, StoreError> {
    let check = judge.judge(&since.head)?;
    let (kind, now) = match &check {
        HeadCheck::Matched => return Ok(None),
        HeadCheck::Differs { found } => (Kind::Fork, format!("holds hash {found} at that seq")),
        HeadCheck::Beyond { db_end } => (Kind::Cut, format!("ends at seq {}", db_end.unwrap_or(0))),
        HeadCheck::AfterBreak | HeadCheck::BeforeRange { .. } => (
            Kind::Altered,
            format!(
                "breaks at seq {} before it",
                finding::break_position(report).unwrap_or(since.head.seq)
            ),
        ),
    };
    Ok(Some(Finding {
        kind,
        seq: Some(since.head.seq),
        message: format!(
            "the state file {} records head {} as verified by a previous run; the database now {now}",
            since.source, since.head
        ),
        expected: Some(since.head.hash_str().to_owned()),
        found: None,
        source: Some(since.source.clone()),
        remedy: None,
    }))
}

/// The database as the stream audit sees it: the walk's verdict (where the
/// chain breaks, how far it is intact) and a lookup of each head's seq.
struct DbJudge<'a> {
    report: &'a WalkReport,
    db: &'a EventDb,
    /// Seqs of the kept heads the database matches past its break: they
    /// vouch again for what links up to them ([`ranges`](crate::ranges)).
    past_break: Vec<u64>,
    /// Seqs of the kept heads matched below the break, and of those that
    /// hold another hash than the database (anywhere).
    matched: Vec<u64>,
    contradicted: Vec<u64>,
}

fn db_error(e: chainship_chain::DbError) -> StoreError {
    StoreError::permanent(e.to_string())
}

impl Judge for DbJudge<'_> {
    fn judge(&mut self, head: &Head) -> Result<HeadCheck, StoreError> {
        if finding::break_position(self.report).is_some_and(|b| head.seq >= b) {
            match self.db.hash_at(head.seq).map_err(db_error)? {
                Some(h) if h == head.hash => self.past_break.push(head.seq),
                Some(_) => self.contradicted.push(head.seq),
                None => {
                    // Past the database's end a break does not explain the head:
                    // the tail was cut too, and that is named whatever else is wrong.
                    let db_end = self.report.db_head.as_ref().map(|(s, _)| *s);
                    if db_end.is_none_or(|e| head.seq > e) {
                        return Ok(HeadCheck::Beyond { db_end });
                    }
                }
            }
            return Ok(HeadCheck::AfterBreak);
        }
        let end = self.report.last_good.map(|h| h.seq);
        if end.is_none_or(|e| head.seq > e) {
            // Past where the walk stopped but not past the database's last row:
            // the row at the head is missing or damaged (the break names it),
            // not the tail cut.
            let db_end = self.report.db_head.as_ref().map(|(s, _)| *s);
            if finding::break_position(self.report).is_some() && db_end.is_some_and(|d| d > head.seq) {
                return Ok(HeadCheck::AfterBreak);
            }
            return Ok(HeadCheck::Beyond { db_end: end });
        }
        Ok(match self.db.hash_at(head.seq).map_err(db_error)? {
            Some(hash) if hash == head.hash => {
                self.matched.push(head.seq);
                HeadCheck::Matched
            }
            Some(hash) => {
                self.contradicted.push(head.seq);
                HeadCheck::Differs {
                    found: String::from_utf8_lossy(&hash).into_owned(),
                }
            }
            None => HeadCheck::Beyond { db_end: end },
        })
    }

    fn tree_end(&self) -> u64 {
        self.report.tree.as_ref().map_or(0, |t| t.end())
    }

    fn ends_before(&self, seq: u64) -> Option<Option<u64>> {
        if finding::break_position(self.report).is_some_and(|b| seq >= b) {
            return None;
        }
        let end = self.report.last_good.map(|h| h.seq);
        end.is_none_or(|e| seq > e).then_some(end)
    }

    fn root_at(&mut self, size: u64) -> Result<Option<chainship_tlog::Hash>, StoreError> {
        match &self.report.tree {
            Some(tree) => tree.root_at(self.db, size).map_err(db_error),
            None => Ok(None),
        }
    }
}
