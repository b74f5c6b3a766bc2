//! The verdict on an exported copy (`verify-export`, `restore`, `diff`):
//! the store judged by the same pass as `anchor verify`
//! ([`crate::pass`], so one store gets one set of findings whoever
//! reads it), and the copy's records checked against the heads and
//! checkpoints that pass trusts, handed on in seq order as the copy reaches
//! them ([`ExportCheck`]). Memory follows the copy's window and the pass's
//! chunk, not the number of heads kept.
//!
//! The caller wires the two together: the pass runs on its own thread and
//! sends what it trusts through a [`channel`]; the copy's reader feeds each
//! line to [`CopyCheck::feed_line`], which takes from the channel what
//! lies at or below the line's seq first. [`CopyCheck::finish`] gives the
//! [`CopyOutcome`].

use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::time::SystemTime;

use chainship_anchor::checkpoint::Checkpoint;
use chainship_chain::record::Record;
use chainship_chain::{Head, HexHash, InvalidRange, RangeKind};
use chainship_tlog::merkle::Hash;

use crate::export::ExportCheck;
use crate::finding::{self, Finding, Kind};
use crate::pass::{StreamAudit, TrustedSink};
use crate::ranges::Anchors;
use crate::verdict::Verdict;

/// How far the copy is expected to reach back, and what passes.
#[derive(Clone, Copy, Debug)]
pub struct CopyExpectations {
    /// The copy starts after this trusted head instead of at seq 1.
    pub after: Option<Head>,
    /// Pass with no trusted head to compare with (a warning instead).
    pub allow_no_heads: bool,
    /// Records after the last trusted head a pass allows (a warning); more is a finding.
    pub max_unvouched: u64,
}

/// What `--max-unvouched` allows by default: the records one default
/// `--anchor-interval` (10 s) leaves unanchored at 1,000 events a second.
pub const DEFAULT_MAX_UNVOUCHED: u64 = 10_000;

impl Default for CopyExpectations {
    fn default() -> Self {
        CopyExpectations {
            after: None,
            allow_no_heads: false,
            max_unvouched: DEFAULT_MAX_UNVOUCHED,
        }
    }
}

/// What reading and checking a copy found.
pub type CopyOutcome = Verdict<CopyCovered>;

/// What a copy check covered.
#[derive(Debug, Default)]
pub struct CopyCovered {
    pub origin: Option<String>,
    pub records: u64,
    pub end_seq: Option<u64>,
    pub identical_duplicates: u64,
    /// Head notes kept, and those a trusted key signed for this origin.
    pub kept: usize,
    pub trusted: usize,
    /// Trusted heads the copy was compared with (those above `after`).
    pub checked: usize,
    /// Trusted checkpoints, and how many the copy's tree matched.
    pub checkpoints: usize,
    pub matched_roots: usize,
    /// The seqs whose kept head or checkpoint the copy's records matched,
    /// ascending (where trust ends in what is compared with the copy: `diff`).
    pub vouched: Vec<u64>,
}

impl Verdict<CopyCovered> {
    /// A copy refused before reading it: one finding, nothing else checked.
    pub fn refused(origin: Option<String>, kind: Kind, message: String) -> Self {
        let mut v = Verdict::new(CopyCovered {
            origin,
            ..CopyCovered::default()
        });
        v.findings.push(Finding::new(kind, None, message));
        v
    }

    /// The seqs a consumer of the copy must not take as they are, as ranges
    /// for the affected runs: the exact ranges, with each seq a record's own
    /// finding names outside them (a second, differing copy of a seq, a late
    /// record, one the walk could not read); or, when the ranges are not
    /// known, everything from the first bad seq to the copy's end. A
    /// checkpoint's root or a head the copy contradicts names no record of
    /// its own: the ranges hold what made it so.
    pub fn affected_ranges(&self) -> Vec<(u64, u64)> {
        let Some(ranges) = &self.ranges else {
            return self
                .invalid_from()
                .map(|from| vec![(from, self.covered.end_seq.unwrap_or(from).max(from))])
                .unwrap_or_default();
        };
        let mut out: Vec<(u64, u64)> = ranges.iter().map(|r| (r.from, r.to)).collect();
        out.extend(
            self.findings
                .iter()
                .filter(|f| matches!(f.kind, Kind::Altered | Kind::Gap | Kind::Duplicate | Kind::Reordered))
                .filter_map(|f| f.seq)
                .filter(|s| self.covered.end_seq.is_some_and(|end| *s <= end))
                .map(|s| (s, s)),
        );
        out.sort_unstable();
        crate::verdict::merge(out)
    }

    /// The head a copy may be restored up to: the last trusted one, when
    /// the copy has no finding; else the findings that refuse it (a copy
    /// with none and no trusted head is refused for that).
    pub fn restorable(&self) -> Result<Head, Vec<Finding>> {
        match (self.findings.is_empty(), self.last_trusted) {
            (true, Some(head)) => Ok(head),
            (true, None) => Err(vec![Finding::new(
                Kind::NoTrustedHead,
                None,
                "no trusted head covers the copy",
            )]),
            (false, _) => Err(self.findings.clone()),
        }
    }

    /// The first seq of the copy that cannot be trusted: the lowest seq a
    /// finding names (for a fork at a kept head, the seq after the last
    /// trusted head: the copy forked somewhere after it). `None` when the
    /// copy is whole, or its findings name no seq it holds (a cut, a bad
    /// signature).
    pub fn invalid_from(&self) -> Option<u64> {
        if let Some(ranges) = &self.ranges {
            return ranges.first().map(|r| r.from);
        }
        self.findings
            .iter()
            .filter_map(|f| match f.kind {
                Kind::Fork => Some(self.last_trusted.map_or(1, |h| h.seq.saturating_add(1))),
                Kind::Altered | Kind::Gap | Kind::Duplicate | Kind::Reordered | Kind::Foreign => f.seq,
                _ => None,
            })
            .min()
    }
}

/// What the exact ranges of a damaged copy need read again: its records
/// after `after` (a record the kept heads vouch for, or seq 0), in seq
/// order, through `through`, walked by a [`crate::ranges::RangeWalk`].
#[derive(Clone, Debug)]
pub struct RangePlan {
    pub after: u64,
    /// The stored hash at `after` when the copy does not hold it (it starts
    /// after that head); otherwise the copy's record there gives it.
    pub after_hash: Option<HexHash>,
    pub through: u64,
    pub anchors: Anchors,
    /// The newest trusted checkpoint whose level-0 tiles give its root.
    pub leaves: Option<Checkpoint>,
}

/// A damaged copy's records read again for its [`RangePlan`]: each record
/// of the origin fed in the copy's order (the walk passes over duplicates
/// and late records: their own findings name them), with the level-0 tile
/// of the plan's checkpoint at its seq fetched by `tile` when it has one.
pub struct RecordWalk {
    plan: RangePlan,
    walk: Option<crate::ranges::RangeWalk>,
    tile: Option<(u64, Option<Vec<Hash>>)>,
}

impl RecordWalk {
    pub fn new(plan: &RangePlan) -> Self {
        let mut w = RecordWalk {
            plan: plan.clone(),
            walk: None,
            tile: None,
        };
        if plan.after == 0 || plan.after_hash.is_some() {
            w.start(plan.after_hash.map_or(Vec::new(), |h| h.to_vec()));
        }
        w
    }

    fn start(&mut self, after_hash: Vec<u8>) {
        let anchors = std::mem::take(&mut self.plan.anchors);
        self.walk = Some(crate::ranges::RangeWalk::new(self.plan.after, after_hash, anchors));
    }

    /// One line of the copy: a record of the plan's origin is walked (one
    /// whose searchable fields disagree with the record it carries, as
    /// altered); anything else is passed over (the check named it).
    pub fn feed_line(
        &mut self,
        origin: &str,
        line: &[u8],
        tile: &mut dyn FnMut(&Checkpoint, u64) -> Option<Vec<Hash>>,
    ) {
        match Record::parse(line) {
            Ok(r) if r.origin == origin => self.feed(&r, false, tile),
            Err(e) => {
                if let Some(r) = e.carried().filter(|r| r.origin == origin) {
                    self.feed(r, true, tile);
                }
            }
            Ok(_) => {}
        }
    }

    /// One record of the copy (of the plan's origin), `altered` when it is
    /// known to be; `tile` reads level-0 tile `index` of the plan's checkpoint.
    pub fn feed(&mut self, r: &Record<'_>, altered: bool, tile: &mut dyn FnMut(&Checkpoint, u64) -> Option<Vec<Hash>>) {
        if r.seq == self.plan.after && self.walk.is_none() {
            self.start(r.hash.as_bytes().to_vec());
            return;
        }
        let Some(walk) = self
            .walk
            .as_mut()
            .filter(|_| r.seq > self.plan.after && r.seq <= self.plan.through)
        else {
            return;
        };
        let index = (r.seq - 1) / chainship_tlog::tiles::WIDTH as u64;
        if let Some(cp) = &self.plan.leaves
            && self.tile.as_ref().is_none_or(|(i, _)| *i != index)
        {
            self.tile = Some((index, tile(cp, index)));
        }
        let leaf = self
            .tile
            .as_ref()
            .and_then(|(_, t)| crate::ranges::leaf(t.as_deref(), r.seq));
        walk.row_known(r, leaf, altered, None);
    }

    /// The ranges; an error when the copy no longer holds the record the
    /// walk starts after (it changed since it was read).
    pub fn finish(self) -> Result<crate::ranges::Walked, chainship_chain::Error> {
        match self.walk {
            Some(walk) => Ok(walk.finish(self.plan.through)),
            None => Err(chainship_chain::permanent!(
                "the copy no longer holds seq {}, read a moment before",
                self.plan.after
            )),
        }
    }
}

/// `ranges` with `seqs` taken out of those of `kind` (a range split or gone).
fn without_seqs(ranges: Vec<InvalidRange>, kind: RangeKind, seqs: &[u64]) -> Vec<InvalidRange> {
    if seqs.is_empty() {
        return ranges;
    }
    let mut seqs = seqs.to_vec();
    seqs.sort_unstable();
    let mut out = Vec::with_capacity(ranges.len());
    for r in ranges {
        if r.kind != kind {
            out.push(r);
            continue;
        }
        // The start of what is left of the range, if anything is.
        let mut from = Some(r.from);
        let inside = seqs.partition_point(|s| *s < r.from)..seqs.partition_point(|s| *s <= r.to);
        for &s in &seqs[inside] {
            if let Some(f) = from.filter(|f| s > *f) {
                out.push(InvalidRange {
                    from: f,
                    to: s - 1,
                    ..r.clone()
                });
            }
            from = s.checked_add(1);
        }
        if let Some(f) = from.filter(|f| *f <= r.to) {
            out.push(InvalidRange { from: f, ..r });
        }
    }
    out
}

/// Reads the copy again for a [`RangePlan`]: the ranges, or why not.
pub type Rewalk<'a> = dyn FnMut(&RangePlan) -> Result<crate::ranges::Walked, chainship_chain::Error> + 'a;

/// What the store pass trusts, in seq order.
#[derive(Debug)]
pub enum Voucher {
    Head(Head),
    Checkpoint { size: u64, root: Hash },
}

impl Voucher {
    fn seq(&self) -> u64 {
        match self {
            Voucher::Head(h) => h.seq,
            Voucher::Checkpoint { size, .. } => *size,
        }
    }
}

/// The pass's end of the channel: a [`TrustedSink`] that sends on. A send
/// blocks while the copy is far behind (the channel's bound is the
/// backpressure), and is dropped once the copy's reader is gone.
pub struct VoucherSender(SyncSender<Voucher>);

impl TrustedSink for VoucherSender {
    fn head(&mut self, head: Head) {
        let _ = self.0.send(Voucher::Head(head));
    }
    fn checkpoint(&mut self, size: u64, root: Hash) {
        let _ = self.0.send(Voucher::Checkpoint { size, root });
    }
}

/// A channel from the store pass to the copy's check.
pub fn channel() -> (VoucherSender, Receiver<Voucher>) {
    let (tx, rx) = sync_channel(4096);
    (VoucherSender(tx), rx)
}

/// The copy's side: each line checked against what the pass trusts at or
/// below its seq.
pub struct CopyCheck {
    origin: String,
    check: ExportCheck,
    /// The redaction statements read for the origin, judged at the end.
    redactions: crate::redactions::Loaded,
    vouchers: Option<Receiver<Voucher>>,
    next: Option<Voucher>,
    /// The pass finished (or is gone): nothing more will come.
    drained: bool,
}

impl CopyCheck {
    pub fn new(origin: &str, expect: &CopyExpectations, vouchers: Receiver<Voucher>) -> Self {
        CopyCheck {
            origin: origin.to_owned(),
            check: ExportCheck::new(origin, expect.after),
            redactions: Default::default(),
            vouchers: Some(vouchers),
            next: None,
            drained: false,
        }
    }

    /// The same check, accepting the tombstones the trusted statements in
    /// `loaded` cover, and holding those statements to the copy at the end.
    pub fn with_redactions(mut self, loaded: crate::redactions::Loaded) -> Self {
        self.check = self.check.with_redactions(loaded.shared());
        self.redactions = loaded;
        self
    }

    /// Takes in what the pass trusts up to `seq` (waiting for the pass to
    /// get there).
    fn take_vouchers(&mut self, seq: u64) {
        loop {
            if self.next.is_none() && !self.drained {
                match self.vouchers.as_ref().map(Receiver::recv) {
                    Some(Ok(v)) => self.next = Some(v),
                    _ => self.drained = true,
                }
            }
            match self.next.take() {
                Some(v) if v.seq() <= seq => match v {
                    Voucher::Head(h) => self.check.add_head(h),
                    Voucher::Checkpoint { size, root } => self.check.add_checkpoint(size, root),
                },
                other => {
                    self.next = other;
                    return;
                }
            }
        }
    }

    /// Checks one line of the copy; `each` gets every record of this origin
    /// that parses (duplicates and all: the caller keeps what it needs).
    pub fn feed_line(&mut self, line: &[u8], place: &dyn Fn() -> String, each: &mut dyn FnMut(&Record<'_>)) {
        match Record::parse(line) {
            Ok(record) => {
                if record.origin == self.origin {
                    self.take_vouchers(record.seq);
                }
                self.check.feed(&record, place);
                // Another origin's records are named by the check, never used.
                if record.origin == self.origin {
                    each(&record);
                }
            }
            Err(_) => self.check.feed_line(line, place),
        }
    }

    /// Reading the copy failed: the pass's sends fail from now on, so it
    /// ends instead of waiting for a reader that is gone.
    pub fn abandon(&mut self) {
        self.vouchers = None;
        self.drained = true;
    }

    /// The copy is read: the rest of what the pass trusts lies past its end.
    pub fn end_of_copy(&mut self) {
        self.check.read_to_end();
        self.take_vouchers(u64::MAX);
    }

    /// The verdict, once the copy is read ([`CopyCheck::end_of_copy`]) and
    /// the pass is done: `audit` is the pass's, `strays` the records of this
    /// origin found where a consumer would read them but they do not belong
    /// (`(records, place)`), `narrowed` what the reader could not cover.
    /// `lookup` reads a trusted head again by seq, with its publication time.
    pub fn finish(
        mut self,
        audit: StreamAudit,
        expect: &CopyExpectations,
        strays: &[(u64, String)],
        narrowed: &[String],
        lookup: &mut dyn FnMut(u64) -> Option<(Head, Option<SystemTime>)>,
        rewalk: &mut Rewalk<'_>,
    ) -> CopyOutcome {
        self.end_of_copy();
        let origin = self.origin.clone();
        let check = &mut self.check;
        check.close();
        let plan = range_plan(check, &audit, expect);
        let mut warnings = Vec::new();
        // The copy's own: what its records vouch for, and so its unvouched tail.
        let own = check.last_trusted(None, &mut |seq| lookup(seq).map(|(h, _)| h));
        // Trust also ends at the store's findings that end it, as for `anchor verify`.
        let limit = audit
            .findings
            .iter()
            .filter(|f| f.kind.ends_trust())
            .filter_map(|f| f.seq)
            .min();
        let last_trusted = match (own, limit) {
            (Some(h), Some(l)) if h.seq >= l => check.last_trusted(limit, &mut |seq| lookup(seq).map(|(h, _)| h)),
            _ => own,
        };
        let mut findings: Vec<Finding> = audit.findings.clone();
        if let Some(c) = &audit.cosign {
            findings.extend(c.findings.iter().cloned());
        }
        // What a consumer reads where this origin's records do not belong.
        for (records, place) in strays {
            findings.push(
                Finding::new(
                    Kind::ForeignPartition,
                    None,
                    format!(
                        "{records} record(s) of origin {origin:?} on {place}: a SIEM reading the topic ingests them"
                    ),
                )
                .at(Some(place.clone())),
            );
        }
        // The check's chain findings, or the exact ranges that say the same
        // with their extent (as for a database).
        let mut leaf_anchored = None;
        let ranges = match plan.as_ref().map(&mut *rewalk) {
            // The walk goes in the copy's order: what came late is held, not missing.
            Some(Ok(walked)) => {
                leaf_anchored = walked.anchored_through;
                let mut ranges = without_seqs(walked.ranges, RangeKind::Missing, &check.filled_late);
                // Only checkpoint roots say the copy changed: the same rule as for a database.
                if let Some(p) = &plan {
                    crate::ranges::unvouched_below_contradicted_root(
                        &mut ranges,
                        check.roots_contradicted.first().copied(),
                        (p.after, p.through),
                        p.anchors.heads.iter().copied().max(),
                        p.leaves.is_some(),
                    );
                }
                Some(ranges)
            }
            Some(Err(e)) => {
                warnings.push(format!("the exact invalid ranges could not be read again: {e}"));
                None
            }
            None => None,
        };
        match &ranges {
            Some(ranges) => {
                // A record's own finding gives way to the range that holds
                // it, unless the range is that one seq (the record's finding
                // says more: the line, the field). One the walk could not
                // place (a second, differing copy of a seq; a late record)
                // stays, as does a head the copy contradicts (as for a database).
                let kind_of = |k: Kind| match k {
                    Kind::Altered => Some(RangeKind::Altered),
                    Kind::Gap => Some(RangeKind::Missing),
                    _ => None,
                };
                let names = |r: &InvalidRange| {
                    r.from == r.to
                        && check
                            .findings
                            .iter()
                            .any(|f| f.seq == Some(r.from) && kind_of(f.kind) == Some(r.kind))
                };
                let holding = |f: &Finding| {
                    let want = kind_of(f.kind)?;
                    let s = f.seq?;
                    ranges.iter().find(|r| r.kind == want && r.from <= s && s <= r.to)
                };
                // A link the walk found whole (the record links after its
                // predecessor's fields, or its own fields give its hash
                // after the predecessor it names) is no finding.
                let breaks: std::collections::HashSet<usize> = check.link_breaks.iter().copied().collect();
                let walked = plan.as_ref().map_or(0..=0, |p| p.after.saturating_add(1)..=p.through);
                // (Not vouched for is no break: a record linked into the unvouched tail.)
                let broken_at = |s: u64| {
                    ranges
                        .iter()
                        .any(|r| r.from <= s && s <= r.to && r.kind != RangeKind::Unvouched)
                };
                let walked_whole = |i: usize, f: &Finding| {
                    breaks.contains(&i) && f.seq.is_some_and(|s| walked.contains(&s) && !broken_at(s))
                };
                // A head that holds another hash at a record named altered is
                // that record's finding (as a database's head at its break is).
                let head_at_altered = |f: &Finding| {
                    f.kind == Kind::Fork
                        && f.seq.is_some_and(|s| {
                            ranges
                                .iter()
                                .any(|r| r.kind == RangeKind::Altered && r.from <= s && s <= r.to)
                        })
                };
                findings.extend(
                    (check.findings.iter().enumerate())
                        .filter(|(i, f)| !walked_whole(*i, f) && !head_at_altered(f) && holding(f).is_none_or(names))
                        .map(|(_, f)| f.clone()),
                );
                let wider: Vec<InvalidRange> = ranges.iter().filter(|r| !names(r)).cloned().collect();
                findings.extend(finding::range_findings(&wider, None));
            }
            None => findings.extend(check.findings.iter().cloned()),
        }
        // A record the walk passed over is still what a consumer reads: a
        // second, differing record of a seq (the chain gives one of the
        // two at most), a late one, and one named altered where the walk
        // did not stand (it came before the walk's start): each its own range.
        let passed_over: Vec<InvalidRange> = findings
            .iter()
            .filter_map(|f| match f.kind {
                Kind::Duplicate | Kind::Altered => Some((RangeKind::Altered, f.seq?)),
                Kind::Reordered => Some((RangeKind::Reordered, f.seq?)),
                _ => None,
            })
            .map(|(kind, seq)| InvalidRange {
                kind,
                from: seq,
                to: seq,
                anchored_by: None,
                open: false,
            })
            .collect();
        let mut ranges = match ranges {
            // Damaged, and its ranges could not be read again: unknown still.
            None if plan.is_some() => None,
            ranges if passed_over.is_empty() => ranges,
            ranges => {
                let mut all = ranges.unwrap_or_default();
                for r in passed_over {
                    if !all.iter().any(|a| a.from <= r.from && r.to <= a.to) {
                        all.push(r);
                    }
                }
                all.sort_by_key(|r| (r.from, r.to));
                Some(all)
            }
        };
        if check.identical_duplicates > 0 {
            warnings.push(format!(
                "duplicate: {} identical record(s) delivered more than once (drop them by seq)",
                check.identical_duplicates
            ));
        }
        warnings.extend(audit.store_warnings());
        warnings.extend(narrowed.iter().cloned());
        // A copy compared with no trusted head proved nothing against one.
        let what = expect
            .after
            .map_or(String::new(), |a| format!("above the starting head at seq {}", a.seq));
        // A checkpoint the copy's tree matches is checked as a head would be (as for a database).
        let checked = check.heads_covered() + check.matched_roots;
        match finding::no_trusted_head(&origin, checked, &what) {
            Some(_) if expect.allow_no_heads => warnings.push(format!(
                "{}: no head was checked, only the copy's own chain (as allowed)",
                finding::no_head_text(&origin, &what)
            )),
            Some(f) => findings.push(f),
            None => {}
        }
        // An empty copy vouches for nothing, whatever else was (not) compared.
        if check.records == 0 && !findings.iter().any(|f| f.kind == Kind::Cut) {
            findings.push(Finding::new(
                Kind::Cut,
                None,
                format!("the copy holds no record of origin {origin:?}: nothing was checked"),
            ));
        }
        // Records past the highest anchor the copy matched (and past every
        // range): a chain no signed head covers yet, as for a database.
        let end = check.end();
        let anchored = match ranges.as_ref() {
            // Walked (whole or not): the highest anchor the records matched,
            // or a checkpoint's leaf past it.
            Some(_) => check.anchors().heads.iter().copied().max().max(leaf_anchored),
            None if plan.is_none() => own.map(|h| h.seq),
            // Damaged, and its ranges could not be read again: unknown.
            None => None,
        };
        let unvouched =
            anchored.and_then(|a| crate::ranges::unvouched_tail(a, ranges.as_deref().unwrap_or_default(), end));
        if let Some(tail) = unvouched {
            crate::ranges::judge_tail(
                tail,
                expect.max_unvouched,
                "record(s)",
                &mut findings,
                &mut warnings,
                &mut ranges,
            );
        }
        // A copy that ends before a kept head: the seqs it lacks.
        let data_end = end.unwrap_or(expect.after.map_or(0, |h| h.seq));
        if let Some(cut) = crate::ranges::cut_range(&findings, data_end, audit.highest_trusted_seq()) {
            ranges.get_or_insert_with(Vec::new).push(cut);
        }
        // The redaction statements, held to what the copy holds at their seqs.
        let loaded = std::mem::take(&mut self.redactions);
        findings.extend(loaded.findings);
        warnings.extend(loaded.warnings);
        let (red_findings, red_warnings, redacted) = crate::redactions::judge(
            &loaded.redactions,
            &mut |seq| check.statement_hashes.get(&seq).copied(),
            audit.highest_trusted_seq(),
            (&check.redacted, &check.payload_held),
            "the copy",
        );
        findings.extend(red_findings);
        warnings.extend(red_warnings);
        findings.sort_by_key(|f| (f.seq, f.kind));
        let last_trusted_published = last_trusted.and_then(|h| lookup(h.seq)).and_then(|(_, p)| p);
        Verdict {
            findings,
            warnings,
            ranges,
            last_trusted,
            last_trusted_published,
            unvouched,
            touched: None,
            redacted,
            covered: CopyCovered {
                origin: Some(origin),
                records: check.records,
                end_seq: check.end(),
                identical_duplicates: check.identical_duplicates,
                kept: audit.heads_kept,
                trusted: audit.heads_trusted,
                checked: check.heads_covered(),
                checkpoints: check.checkpoints_trusted,
                matched_roots: check.matched_roots,
                vouched: {
                    let mut v = check.anchors().heads;
                    v.sort_unstable();
                    v.dedup();
                    v
                },
            },
        }
    }
}

/// The re-read a damaged copy needs for its exact ranges (`None`: the
/// chain is whole, or the copy holds nothing).
fn range_plan(check: &ExportCheck, audit: &StreamAudit, expect: &CopyExpectations) -> Option<RangePlan> {
    let through = check.end()?;
    // A copy that ends before a trusted anchor is walked from the last one
    // it matched, against the checkpoint's leaves (as a database is).
    let cut = audit
        .highest_trusted_seq()
        .is_some_and(|h| h > through)
        .then_some(through.saturating_add(1));
    let first = check.first_problem().into_iter().chain(cut).min()?;
    let anchors = check.anchors();
    let start = expect.after.map_or(0, |h| h.seq);
    let after = anchors
        .heads
        .iter()
        .copied()
        .filter(|s| *s < first && *s > start)
        .max()
        .unwrap_or(start);
    Some(RangePlan {
        after,
        after_hash: expect.after.filter(|h| h.seq == after).map(|h| h.hash),
        through,
        anchors: Anchors {
            heads: anchors.heads.into_iter().filter(|s| *s > after).collect(),
            contradicted: anchors.contradicted,
        },
        leaves: audit.largest.clone().filter(|_| audit.edge.is_some()),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    //! The copy's verdict end to end against the in-memory store: the same
    //! pass `anchor verify` runs, handing on what it trusts.

    use super::*;
    use crate::export::tests::{chain, record};
    use crate::pass::{self, Against, StreamInput};
    use crate::test_run as run;
    use chainship_anchor::checkpoint::Checkpoint;
    use chainship_anchor::log_publish::{advance_pointer, publish_checkpoint, put_tiles};
    use chainship_anchor::publish::publish_head;
    use chainship_anchor::signer::SignerKey;
    use chainship_anchor::store::memory::MemoryStore;
    use chainship_tlog::tiles::TileBuilder;

    fn hash_of(line: &str) -> String {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        v["hash"].as_str().unwrap().to_owned()
    }

    /// A store as the follower leaves it: at each of `at`, the tiles, a
    /// checkpoint and a head (and the pointer at the newest).
    pub(crate) fn store_for(lines: &[String], at: &[u64], key: &SignerKey) -> MemoryStore {
        let store = MemoryStore::default();
        let keys = &[key.shared()];
        let mut builder = TileBuilder::default();
        let mut done = 0;
        for &size in at {
            let mut tiles = Vec::new();
            for line in &lines[done as usize..size as usize] {
                builder.push(hash_of(line).as_bytes(), &mut tiles);
            }
            done = size;
            tiles.extend(builder.partial_tiles());
            let cp = Checkpoint {
                origin: "o".into(),
                size,
                root: builder.root(),
            };
            let head: Head = format!("{size}:{}", hash_of(&lines[size as usize - 1]))
                .parse()
                .unwrap();
            run(async {
                put_tiles(&store, "o", &tiles, 0).await.unwrap();
                publish_checkpoint(&store, keys, &cp).await.unwrap();
                advance_pointer(&store, "o", &[key.verifier()], size, &cp.sign(keys).unwrap())
                    .await
                    .unwrap();
                publish_head(&store, keys, "o", head, false, None).await.unwrap();
            });
        }
        store
    }

    /// The verdict on `lines` against `store` (the pass first, its vouchers
    /// queued, then the copy: what the threads do, one after the other).
    pub(crate) fn verdict(store: &MemoryStore, key: &SignerKey, lines: &[String]) -> CopyOutcome {
        verdict_trusting(store, key, lines, CopyExpectations::default())
    }

    /// The verdict on `lines` trusting only `trusted`'s key.
    pub(crate) fn verdict_trusting(
        store: &MemoryStore,
        trusted: &SignerKey,
        lines: &[String],
        expect: CopyExpectations,
    ) -> CopyOutcome {
        let keys = [trusted.verifier()];
        let input = StreamInput {
            store,
            origin: "o",
            keys: &keys,
            witness: None,
            since: None,
            every_tile: true,
        };
        let mut queued = Vec::new();
        struct Queue<'a>(&'a mut Vec<Voucher>);
        impl TrustedSink for Queue<'_> {
            fn head(&mut self, head: Head) {
                self.0.push(Voucher::Head(head));
            }
            fn checkpoint(&mut self, size: u64, root: Hash) {
                self.0.push(Voucher::Checkpoint { size, root });
            }
        }
        let audit = run(async {
            let listing = pass::list(&input).await.unwrap();
            pass::audit(&input, listing, Against::Copy(&mut Queue(&mut queued)))
                .await
                .unwrap()
        });
        let (tx, rx) = std::sync::mpsc::channel();
        for v in queued {
            tx.send(v).unwrap();
        }
        drop(tx);
        let mut check = CopyCheck::new("o", &expect, rx);
        for line in lines {
            check.feed_line(line.as_bytes(), &|| "copy".into(), &mut |_| {});
        }
        let mut lookup = |seq: u64| run(pass::trusted_head_at(store, "o", &keys, seq)).unwrap();
        let mut rewalk = |plan: &RangePlan| {
            let mut walk = RecordWalk::new(plan);
            for line in lines {
                walk.feed_line("o", line.as_bytes(), &mut |cp, index| {
                    run(crate::ranges::level0_tile(store, "o", cp, index)).unwrap()
                });
            }
            walk.finish()
        };
        check.finish(audit, &expect, &[], &[], &mut lookup, &mut rewalk)
    }

    fn kinds(o: &CopyOutcome) -> Vec<(Kind, Option<u64>)> {
        o.findings.iter().map(|f| (f.kind, f.seq)).collect()
    }

    #[test]
    fn an_intact_copy_matches_every_head_and_checkpoint() {
        let key = SignerKey::generate("o").unwrap();
        let lines = chain(700);
        let store = store_for(&lines, &[100, 300, 600], &key);
        let o = verdict(&store, &key, &lines);
        assert_eq!(kinds(&o), vec![]);
        assert_eq!(o.last_trusted.map(|h| h.seq), Some(600));
        assert_eq!(
            (o.covered.checked, o.covered.checkpoints, o.covered.matched_roots),
            (3, 3, 3)
        );
        assert_eq!(o.unvouched, Some((601, 700)));
        assert!(o.last_trusted_published.is_some());
    }

    /// The store's damage is the store pass's finding, whichever truth the
    /// heads are held to: a flipped byte in a full level-0 tile is
    /// `tiles-disagree` for a copy too (it once passed here).
    #[test]
    fn a_damaged_tile_is_named_for_an_intact_copy() {
        let key = SignerKey::generate("o").unwrap();
        let lines = chain(600);
        let store = store_for(&lines, &[300, 600], &key);
        let mut tile = run(store.get_object("o", "tile/0/001")).unwrap().unwrap();
        tile[5] ^= 1;
        store.plant_object("o", "tile/0/001", &tile);
        let o = verdict(&store, &key, &lines);
        assert!(
            kinds(&o).iter().all(|(k, _)| *k == Kind::TilesDisagree),
            "{:?}",
            o.findings
        );
        assert!(!o.findings.is_empty());
    }

    /// A copy cut short of many kept heads: one `cut`, naming how many more.
    #[test]
    fn heads_past_the_copys_end_are_one_finding() {
        let key = SignerKey::generate("o").unwrap();
        let lines = chain(400);
        let at: Vec<u64> = (1..=40).map(|i| i * 10).collect();
        let store = store_for(&lines, &at, &key);
        let o = verdict(&store, &key, &lines[..95]);
        assert_eq!(kinds(&o), vec![(Kind::Cut, Some(100))]);
        assert!(
            o.findings[0].message.contains("nor those of 30 later kept head(s)"),
            "{}",
            o.findings[0].message
        );
        assert_eq!(o.last_trusted.map(|h| h.seq), Some(90));
    }

    /// A changed record and a record left out: named at their seqs, the
    /// copy's root differs from the checkpoints after them, and the last
    /// trusted head is the one below the first.
    #[test]
    fn a_changed_and_a_missing_record_are_named() {
        let key = SignerKey::generate("o").unwrap();
        let lines = chain(300);
        let store = store_for(&lines, &[100, 200, 300], &key);
        let mut copy = lines.clone();
        copy[149] = copy[149].replace(r#"\"n\":150}"#, r#"\"n\":151}"#);
        copy.remove(249);
        let o = verdict(&store, &key, &copy);
        // The record after the missing one names its predecessor's hash, so
        // its own fields show it intact: nothing else is invalid.
        assert_eq!(kinds(&o), vec![(Kind::Altered, Some(150)), (Kind::Gap, Some(250))]);
        let ranges: Vec<(u64, u64)> = o.ranges.iter().flatten().map(|r| (r.from, r.to)).collect();
        assert_eq!(ranges, [(150, 150), (250, 250)]);
        assert_eq!(o.invalid_from(), Some(150));
        assert_eq!(o.last_trusted.map(|h| h.seq), Some(100));
        assert_eq!(o.unvouched, None, "past damage the ranges say what is not vouched for");
    }

    /// Walked again in the copy's order, a swapped pair looks like a gap;
    /// the check saw the late record fill it, so only its lateness is named,
    /// as a `reordered` range of its own seq (never `missing`).
    #[test]
    fn a_late_record_is_reordered_not_missing() {
        let key = SignerKey::generate("o").unwrap();
        let lines = chain(300);
        let store = store_for(&lines, &[100, 200, 300], &key);
        let mut copy = lines.clone();
        copy.swap(149, 150);
        let o = verdict(&store, &key, &copy);
        assert_eq!(kinds(&o), vec![(Kind::Reordered, Some(150))]);
        let ranges = |o: &CopyOutcome| -> Vec<(RangeKind, u64, u64)> {
            o.ranges.iter().flatten().map(|r| (r.kind, r.from, r.to)).collect()
        };
        assert_eq!(ranges(&o), [(RangeKind::Reordered, 150, 150)]);
        assert_eq!(o.unvouched, None, "the records are all vouched for");
        // A late record and a record that never came, side by side: only the latter is missing.
        copy.remove(249);
        let o = verdict(&store, &key, &copy);
        assert_eq!(kinds(&o), vec![(Kind::Reordered, Some(150)), (Kind::Gap, Some(250))]);
        assert_eq!(
            ranges(&o),
            [(RangeKind::Reordered, 150, 150), (RangeKind::Missing, 250, 250)]
        );
    }

    #[test]
    fn seqs_are_taken_out_of_ranges_of_their_kind_only() {
        let r = |kind, from, to| InvalidRange {
            kind,
            from,
            to,
            anchored_by: None,
            open: false,
        };
        let ranges = vec![
            r(RangeKind::Missing, 10, 20),
            r(RangeKind::Altered, 30, 30),
            r(RangeKind::Missing, 40, 40),
        ];
        let left = without_seqs(ranges, RangeKind::Missing, &[40, 30, 15, 10, 20]);
        let spans: Vec<(RangeKind, u64, u64)> = left.iter().map(|r| (r.kind, r.from, r.to)).collect();
        assert_eq!(
            spans,
            [
                (RangeKind::Missing, 11, 14),
                (RangeKind::Missing, 16, 19),
                (RangeKind::Altered, 30, 30)
            ]
        );
        let top = without_seqs(
            vec![r(RangeKind::Missing, u64::MAX, u64::MAX)],
            RangeKind::Missing,
            &[u64::MAX],
        );
        assert!(top.is_empty());
    }

    /// The issue-47 case: one record edited, heads every 100. Only that
    /// record is invalid; the heads after it still vouch for the rest, so
    /// nothing is "unvouched".
    #[test]
    fn one_edited_record_is_that_record_and_the_heads_after_it_still_vouch() {
        let key = SignerKey::generate("o").unwrap();
        let lines = chain(1000);
        let at: Vec<u64> = (1..=10).map(|n| n * 100).collect();
        for with_leaves in [true, false] {
            let store = store_for(&lines, &at, &key);
            if !with_leaves {
                store.delete_objects("o", "tile/");
            }
            let mut copy = lines.clone();
            copy[499] = copy[499].replace(r#"\"n\":500}"#, r#"\"n\":9}"#);
            let o = verdict(&store, &key, &copy);
            let ranges: Vec<(u64, u64)> = o.ranges.iter().flatten().map(|r| (r.from, r.to)).collect();
            let expected: &[(u64, u64)] = if with_leaves {
                &[(500, 500)]
            } else {
                &[(401, 499), (500, 500)]
            };
            assert_eq!(ranges, expected, "leaves {with_leaves}: {:?}", o.findings);
            // The checkpoint's leaf at 501 vouches again at once; without tiles, the head at 600.
            let again = if with_leaves { 501 } else { 600 };
            assert_eq!(o.ranges.as_ref().unwrap().last().unwrap().anchored_by, Some(again));
            assert_eq!(o.unvouched, None);
            assert_eq!(o.last_trusted.map(|h| h.seq), Some(400));
        }
    }

    /// Only the stored hash of one record changed: that record, not the
    /// next one too (whose hash commits to the unchanged fields).
    #[test]
    fn a_changed_hash_field_alone_is_that_record() {
        let key = SignerKey::generate("o").unwrap();
        let lines = chain(1000);
        let store = store_for(&lines, &[400, 600, 1000], &key);
        let mut copy = lines.clone();
        let hash = hash_of(&copy[499]);
        copy[499] = copy[499].replace(&hash, &"0".repeat(64));
        let o = verdict(&store, &key, &copy);
        let ranges: Vec<(u64, u64)> = o.ranges.iter().flatten().map(|r| (r.from, r.to)).collect();
        assert_eq!(ranges, [(500, 500)], "{:?}", o.findings);
        // The next record's prev_hash names the hash the fields give: no
        // finding of its own, and the affected runs are that one record's.
        assert!(!o.findings.iter().any(|f| f.seq == Some(501)), "{:?}", o.findings);
        assert_eq!(o.affected_ranges(), [(500, 500)]);
    }

    /// One record's fields changed and its hash recomputed, the next one
    /// left as it was: the rewritten record is named, and the next (whose
    /// own fields give its hash after the predecessor it names, which the
    /// tree vouches for) is not.
    #[test]
    fn a_record_rewritten_alone_is_that_record() {
        let key = SignerKey::generate("o").unwrap();
        let lines = chain(1000);
        let store = store_for(&lines, &[400, 600, 1000], &key);
        let mut copy = lines.clone();
        copy[499] = record(500, &hash_of(&copy[498]), "{\"n\":0}").0;
        let o = verdict(&store, &key, &copy);
        let ranges: Vec<(RangeKind, u64, u64)> = o.ranges.iter().flatten().map(|r| (r.kind, r.from, r.to)).collect();
        assert_eq!(ranges, [(RangeKind::Rewritten, 500, 500)], "{:?}", o.findings);
        assert!(!o.findings.iter().any(|f| f.seq == Some(501)), "{:?}", o.findings);
        assert_eq!(o.affected_ranges(), [(500, 500)]);
        assert_eq!(o.last_trusted.map(|h| h.seq), Some(400));
    }

    /// A consistent rewrite from 500 on, seen with the checkpoints alone
    /// (no head, no tile): the copy's tree gives the roots up to 400 and
    /// none after, and nothing says which record changed, so everything
    /// after 400 is not vouched for (it was no range at all).
    #[test]
    fn a_rewrite_only_checkpoint_roots_contradict_is_unvouched_past_the_last_match() {
        let key = SignerKey::generate("o").unwrap();
        let lines = chain(1000);
        let at: Vec<u64> = (1..=10).map(|n| n * 100).collect();
        let store = store_for(&lines, &at, &key);
        store.delete_objects("o", "tile/");
        store.delete_objects("o", "0");
        let mut copy = lines[..499].to_vec();
        let mut prev = hash_of(&copy[498]);
        for seq in 500..=1000u64 {
            let (line, hash) = record(seq, &prev, &format!("{{\"n\":{seq},\"rewritten\":true}}"));
            copy.push(line);
            prev = hash;
        }
        let o = verdict(&store, &key, &copy);
        let ranges: Vec<(RangeKind, u64, u64)> = o.ranges.iter().flatten().map(|r| (r.kind, r.from, r.to)).collect();
        assert_eq!(ranges, [(RangeKind::Unvouched, 401, 1000)], "{:?}", o.findings);
        assert_eq!(o.affected_ranges(), [(401, 1000)]);
        assert_eq!(o.last_trusted.map(|h| h.seq), Some(400));
    }

    /// Records past the last head whose first names a predecessor hash the
    /// head's record does not have: that record is the break (the head
    /// vouches for its predecessor), and those after it link to nothing a
    /// head vouches for. It passed as whole before.
    #[test]
    fn a_forged_tail_after_the_last_head_is_the_break_and_unvouched() {
        let key = SignerKey::generate("o").unwrap();
        let lines = chain(1000);
        let store = store_for(&lines, &[500, 1000], &key);
        let mut copy = lines.clone();
        let mut prev = "2".repeat(64);
        for seq in 1001..=1005u64 {
            let (line, hash) = record(seq, &prev, &format!("{{\"forged\":{seq}}}"));
            copy.push(line);
            prev = hash;
        }
        let o = verdict(&store, &key, &copy);
        let ranges: Vec<(RangeKind, u64, u64)> = o.ranges.iter().flatten().map(|r| (r.kind, r.from, r.to)).collect();
        assert_eq!(
            ranges,
            [(RangeKind::Altered, 1001, 1001), (RangeKind::Unvouched, 1002, 1005)],
            "{:?}",
            o.findings
        );
        assert!(o.findings.iter().any(|f| f.kind.ends_trust()), "{:?}", o.findings);
        assert_eq!(o.last_trusted.map(|h| h.seq), Some(1000));
    }

    /// A record placed early (seq 250 before seq 150) is the one out of
    /// place: one `reordered` range at its seq, not one per record it
    /// jumped over, and trust ends there, not where it stood.
    #[test]
    fn an_early_record_is_the_one_reordered() {
        let key = SignerKey::generate("o").unwrap();
        let lines = chain(300);
        let store = store_for(&lines, &[100, 200, 300], &key);
        let mut copy = lines.clone();
        let early = copy.remove(249);
        copy.insert(149, early);
        let o = verdict(&store, &key, &copy);
        assert_eq!(kinds(&o), vec![(Kind::Reordered, Some(250))]);
        let ranges: Vec<(RangeKind, u64, u64)> = o.ranges.iter().flatten().map(|r| (r.kind, r.from, r.to)).collect();
        assert_eq!(ranges, [(RangeKind::Reordered, 250, 250)]);
        assert_eq!(o.last_trusted.map(|h| h.seq), Some(200));
        // One of those it jumped over never came: it is missing, and the
        // early record is still the one out of place.
        copy.remove(160);
        let o = verdict(&store, &key, &copy);
        assert_eq!(kinds(&o), vec![(Kind::Gap, Some(160)), (Kind::Reordered, Some(250))]);
        let ranges: Vec<(RangeKind, u64, u64)> = o.ranges.iter().flatten().map(|r| (r.kind, r.from, r.to)).collect();
        assert_eq!(
            ranges,
            [(RangeKind::Missing, 160, 160), (RangeKind::Reordered, 250, 250)]
        );
    }

    /// Two records placed early (seq 250 and 280 before seq 150): those two
    /// are reordered, not every record they jumped over.
    #[test]
    fn two_early_records_are_the_two_reordered() {
        let key = SignerKey::generate("o").unwrap();
        let lines = chain(300);
        let store = store_for(&lines, &[100, 200, 300], &key);
        let mut copy = lines.clone();
        let second = copy.remove(279);
        let first = copy.remove(249);
        copy.insert(149, second);
        copy.insert(149, first);
        let o = verdict(&store, &key, &copy);
        assert_eq!(
            kinds(&o),
            vec![(Kind::Reordered, Some(250)), (Kind::Reordered, Some(280))]
        );
        let ranges: Vec<(RangeKind, u64, u64)> = o.ranges.iter().flatten().map(|r| (r.kind, r.from, r.to)).collect();
        assert_eq!(
            ranges,
            [(RangeKind::Reordered, 250, 250), (RangeKind::Reordered, 280, 280)]
        );
        assert_eq!(o.last_trusted.map(|h| h.seq), Some(200));
    }

    /// A record moved early and forged on the way (its payload changed, its
    /// hash recomputed after the predecessor it names) is not merely early:
    /// the record after it names another hash, so it is judged where it
    /// stood, and its seq is never left without a range other than
    /// `reordered`. Edited without a new hash, it is an `altered` range.
    #[test]
    fn an_early_record_that_was_forged_is_not_merely_reordered() {
        let key = SignerKey::generate("o").unwrap();
        let lines = chain(300);
        let store = store_for(&lines, &[100, 200, 300], &key);
        let prev: serde_json::Value = serde_json::from_str(&lines[248]).unwrap();
        let (forged, _) = crate::export::tests::record(250, prev["hash"].as_str().unwrap(), "{\"forged\":1}");
        let edited = lines[249].replace(r#"\"n\":250}"#, r#"\"n\":7}"#);
        for (what, moved) in [("rehashed", forged), ("edited", edited)] {
            let mut copy = lines.clone();
            copy.remove(249);
            copy.insert(149, moved);
            let o = verdict(&store, &key, &copy);
            let at_250: Vec<RangeKind> = o
                .ranges
                .iter()
                .flatten()
                .filter(|r| r.from <= 250 && 250 <= r.to)
                .map(|r| r.kind)
                .collect();
            assert!(
                at_250.iter().any(|k| *k != RangeKind::Reordered),
                "{what}: {at_250:?} {:?}",
                o.findings
            );
            assert!(o.last_trusted.is_none_or(|h| h.seq < 250), "{what}");
        }
    }

    /// A second, differing record at a seq is named, and a consumer may
    /// have taken either: the chain gives one of them at most, so its seq is
    /// an `altered` range, whichever came first.
    #[test]
    fn a_differing_duplicate_is_an_altered_range() {
        let key = SignerKey::generate("o").unwrap();
        let lines = chain(300);
        let store = store_for(&lines, &[100, 200, 300], &key);
        let mut copy = lines.clone();
        copy.insert(150, copy[149].replace(r#"\"n\":150}"#, r#"\"n\":7}"#));
        let o = verdict(&store, &key, &copy);
        assert!(
            o.findings
                .iter()
                .any(|f| f.kind == Kind::Duplicate && f.seq == Some(150)),
            "{:?}",
            o.findings
        );
        assert_eq!(o.affected_ranges(), [(150, 150)]);
        let ranges: Vec<(RangeKind, u64, u64)> = o.ranges.iter().flatten().map(|r| (r.kind, r.from, r.to)).collect();
        assert_eq!(ranges, [(RangeKind::Altered, 150, 150)]);
        // The forgery first, the true record second: the same range.
        copy.swap(149, 150);
        let o = verdict(&store, &key, &copy);
        let ranges: Vec<(RangeKind, u64, u64)> = o.ranges.iter().flatten().map(|r| (r.kind, r.from, r.to)).collect();
        assert_eq!(ranges, [(RangeKind::Altered, 150, 150)], "{:?}", o.findings);
    }
}
