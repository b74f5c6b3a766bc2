//! `diff`: what the database says against what the trusted copy says,
//! event by event: fields changed, events deleted or cut, events the copy
//! never had, and where the two chains fork.
//!
//! The copy is fed in its order ([`Comparison::feed`], from
//! [`crate::copy::read_checked`]); the database is read alongside it in
//! pages, by seq, and every row it passes is checked against the chain.
//! Memory holds one page and the first `limit` changed events in detail;
//! everything past that is counted.

use chainship_chain::record::Record;
use chainship_chain::{ChainBreak, ChainCheck, DbError, EventBatch, EventDb, EventRef, Head, InvalidRange, RangeKind};
use chainship_runs::Touched;
use chainship_runs::affected::{Affected, RecordEvent};
use chainship_verify::copy::CopyCovered;
use chainship_verify::{Finding, Kind, Verdict};

use crate::copy::CopyOutcome;

/// A diff's verdict: the copy's findings, and one for each kind of
/// difference the comparison found.
pub type DiffVerdict = Verdict<DiffCovered>;

/// What a diff covered: the copy, and the database compared with it.
pub struct DiffCovered {
    pub copy: CopyCovered,
    pub comparison: Comparison,
    /// How many of the verdict's findings are the copy's own (they come first).
    pub copy_findings: usize,
    /// The copy's own exact ranges (the verdict's add the differences).
    pub copy_ranges: Option<Vec<InvalidRange>>,
    /// The copy's own last trusted head: what vouches for the copy's records
    /// (the verdict's is the database's, below its first difference).
    pub copy_trusted: Option<Head>,
}

impl std::fmt::Debug for DiffCovered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiffCovered")
            .field("copy", &self.copy)
            .finish_non_exhaustive()
    }
}

/// The verdict on the database against the copy: the copy's own findings
/// (a copy that is not trusted proves nothing either way), then each kind
/// of difference as a finding at its first seq, and the runs the differing
/// seqs touch.
pub fn verdict(copy: CopyOutcome, mut c: Comparison) -> DiffVerdict {
    c.finish();
    let touched = affected(&c);
    let trusted = copy.last_trusted.map_or(0, |h| h.seq);
    let mut found = Vec::new();
    let first = |r: &Ranges| r.list.first().map(|&(a, _)| a);
    let altered = minus(&c.changed_ranges.list, &c.rewritten_ranges.list);
    if let Some(&(from, _)) = altered.first() {
        found.push(Finding::new(
            Kind::Altered,
            Some(from),
            format!(
                "{} event(s) of the database differ from the copy's",
                c.changed_count - c.rewritten_ranges.count
            ),
        ));
    }
    if c.rewritten_ranges.count > 0 {
        found.push(Finding::new(
            Kind::Fork,
            first(&c.rewritten_ranges),
            format!(
                "{} event(s) of the database were rewritten: their hashes differ from the copy's, on a chain that still links (another history)",
                c.rewritten_ranges.count
            ),
        ));
    }
    if c.missing.count > 0 {
        let at = first(&c.missing);
        // Missing past the database's end is a cut; records no head vouches for prove none.
        let kind = match at {
            Some(a) if a > c.db.head && a <= trusted => Kind::Cut,
            _ => Kind::Gap,
        };
        found.push(Finding::new(
            kind,
            at,
            format!("{} event(s) of the copy are missing from the database", c.missing.count),
        ));
    }
    if c.database_only.count > 0 {
        found.push(Finding::new(
            Kind::Gap,
            first(&c.database_only),
            format!(
                "{} event(s) of the database are missing from the copy",
                c.database_only.count
            ),
        ));
    }
    if let Some(value) = &c.unreachable {
        found.push(Finding::new(
            Kind::Altered,
            None,
            format!(
                "in the database only: {}",
                chainship_chain::check::unreachable_reason(value)
            ),
        ));
    }
    if let Some(b) = &c.db.broken {
        found.push(Finding::new(
            Kind::Altered,
            Some(b.seq),
            format!("the database's own chain breaks at seq {}: {}", b.seq, b.reason()),
        ));
    }
    if let Some(e) = &c.db.unreadable {
        // A damaged row is named at its seq, as a database walk names it;
        // what lies past it was not compared.
        if let Some(at) = c.db.unreadable_at {
            found.push(Finding::new(
                Kind::Altered,
                Some(at),
                format!("the database's row is damaged: {e}"),
            ));
        }
        found.push(Finding::new(
            Kind::NotWhole,
            c.db.unreadable_at.map(|at| at.saturating_add(1)),
            format!(
                "the database could not be read on: {e} ({} copy record(s) not compared)",
                c.not_compared
            ),
        ));
    }
    let copy_findings = copy.findings.len();
    let copy_ranges = copy.ranges.clone();
    let copy_trusted = copy.last_trusted;
    let mut v = copy.map(|copy| DiffCovered {
        copy,
        comparison: c,
        copy_findings,
        copy_ranges,
        copy_trusted,
    });
    v.findings.extend(found);
    // The database's invalid ranges against the copy: what changed and what it lacks.
    let c = &v.covered.comparison;
    let mut ranges = v.ranges.take().unwrap_or_default();
    for (kind, kept) in [
        (
            RangeKind::Altered,
            minus(&c.changed_ranges.list, &c.rewritten_ranges.list),
        ),
        (RangeKind::Rewritten, c.rewritten_ranges.list.clone()),
        (RangeKind::Missing, c.missing.list.clone()),
    ] {
        for &(from, to) in &kept {
            // A seq the copy's own check named already (a damaged record) is named once.
            if !ranges.iter().any(|r| (r.from, r.to) == (from, to)) {
                ranges.push(InvalidRange {
                    kind,
                    from,
                    to,
                    anchored_by: None,
                    open: false,
                });
            }
        }
    }
    ranges.sort_by_key(|r| (r.from, r.to));
    // The database is trusted up to the highest head the copy matched below
    // its first difference (the copy's own last trusted head may lie past it).
    let first_difference = [&c.changed_ranges, &c.missing, &c.database_only]
        .into_iter()
        .filter_map(first)
        .chain(c.db.broken.as_ref().map(|b| b.seq))
        .chain(c.db.unreadable_at)
        .min();
    if let Some(d) = first_difference.filter(|d| v.last_trusted.is_some_and(|h| h.seq >= *d)) {
        let below = v.covered.copy.vouched.iter().rev().find(|s| **s < d).copied();
        let c = &v.covered.comparison;
        v.last_trusted = below
            .and_then(|s| c.db.db.hash_at(s).ok().flatten().map(|h| (s, h)))
            .and_then(|(s, h)| Head::from_stored(s, &h));
        v.last_trusted_published = None;
    }
    v.ranges = (!ranges.is_empty()).then_some(ranges);
    v.touched = touched;
    v
}

/// The seqs of `all` (merged ranges, ascending) that `some` (a subset, the
/// same way) does not hold.
fn minus(all: &[(u64, u64)], some: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for &(a, b) in all {
        let mut from = Some(a);
        for &(x, y) in some.iter().filter(|(x, y)| *y >= a && *x <= b) {
            if let Some(f) = from.filter(|f| x > *f) {
                out.push((f, x - 1));
            }
            from = y.checked_add(1);
        }
        if let Some(f) = from.filter(|f| *f <= b) {
            out.push((f, b));
        }
    }
    out
}

/// One field that differs.
pub struct FieldDiff {
    pub field: &'static str,
    pub copy: Vec<u8>,
    pub database: Vec<u8>,
}

impl FieldDiff {
    /// Each side, shortened around the first difference: (copy, database).
    pub fn windows(&self) -> (String, String) {
        (window(&self.copy, &self.database), window(&self.database, &self.copy))
    }

    /// Each side for a line of text, quoted; a long one shortened, with its
    /// length and where it first differs: (copy, database).
    pub fn shown(&self) -> (String, String) {
        (shown(&self.copy, &self.database), shown(&self.database, &self.copy))
    }
}

/// Values longer than this are shortened for display.
const SHOWN_CHARS: usize = 96;

/// The part of a long value worth showing: from a little before the first
/// byte where it differs from `other`, `SHOWN_CHARS` characters, with "..."
/// where text is left out.
fn window(bytes: &[u8], other: &[u8]) -> String {
    let text = readable(bytes);
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= SHOWN_CHARS {
        return text;
    }
    let first_diff = bytes.iter().zip(other).take_while(|(a, b)| a == b).count();
    // Approximate the character position of the first differing byte.
    let at = readable(&bytes[..first_diff.min(bytes.len())]).chars().count();
    let start = at
        .saturating_sub(SHOWN_CHARS / 4)
        .min(chars.len().saturating_sub(SHOWN_CHARS));
    let end = (start + SHOWN_CHARS).min(chars.len());
    let middle: String = chars[start..end].iter().collect();
    format!(
        "{}{middle}{}",
        if start > 0 { "..." } else { "" },
        if end < chars.len() { "..." } else { "" }
    )
}

/// A value for display: shortened around its first difference, with its length when long.
fn shown(bytes: &[u8], other: &[u8]) -> String {
    let w = window(bytes, other);
    if w.len() < readable(bytes).len() {
        let first_diff = bytes.iter().zip(other).take_while(|(a, b)| a == b).count();
        format!("\"{w}\" ({} bytes, first difference at byte {first_diff})", bytes.len())
    } else {
        format!("\"{w}\"")
    }
}

/// An event both hold, with different contents.
pub struct Changed {
    pub seq: u64,
    pub run_id: String,
    pub fields: Vec<FieldDiff>,
}

/// Seq ranges, merged as they come in order; at most `cap` kept, all counted.
pub struct Ranges {
    pub list: Vec<(u64, u64)>,
    pub count: u64,
    pub cap: usize,
    pub more: bool,
}

impl Ranges {
    /// Keeps at most `cap` ranges; counts every seq.
    pub fn new(cap: usize) -> Self {
        Ranges {
            list: Vec::new(),
            count: 0,
            cap,
            more: false,
        }
    }

    /// Takes `seq` out (a late record filled it), splitting its range;
    /// false when it is not listed.
    pub fn remove(&mut self, seq: u64) -> bool {
        let Some(i) = self.list.iter().position(|(a, b)| *a <= seq && seq <= *b) else {
            return false;
        };
        let (a, b) = self.list[i];
        self.list.remove(i);
        let parts = [(a, seq.saturating_sub(1)), (seq.saturating_add(1), b)];
        for (at, part) in parts
            .into_iter()
            .filter(|(x, y)| x <= y && (*x, *y) != (a, b))
            .enumerate()
        {
            self.list.insert(i + at, part);
        }
        self.count -= 1;
        true
    }

    /// Adds `seq` (in increasing order), merging it into the last range when adjacent.
    pub fn add(&mut self, seq: u64) {
        self.count += 1;
        if let Some((_, end)) = self.list.last_mut()
            && end.saturating_add(1) == seq
        {
            *end = seq;
        } else if self.list.len() < self.cap {
            self.list.push((seq, seq));
        } else {
            self.more = true;
        }
    }
}

/// The database, read by seq in pages, up to the head it had at the start.
/// Every row it passes is also checked against the chain, so damage the
/// copy cannot show (past its end) is still named.
pub struct DbCursor {
    pub db: EventDb,
    pub page: EventBatch,
    pub pos: usize,
    pub after: u64,
    pub head: u64,
    pub chain: ChainCheck,
    /// The first chain break among the rows passed.
    pub broken: Option<Box<ChainBreak>>,
    /// A row that could not be read (a field not text): reading stopped there.
    pub unreadable: Option<String>,
    /// The seq of that row, when known.
    pub unreadable_at: Option<u64>,
}

impl DbCursor {
    /// The seq of the database's current row (reading the next page when
    /// needed), up to the head it had at the start.
    pub fn peek_seq(&mut self) -> Option<u64> {
        if self.pos >= self.page.len() && self.after < self.head && self.unreadable.is_none() {
            self.page.clear();
            self.pos = 0;
            if let Err(e) = self.db.read_page(self.after, 4096, 8 << 20, &mut self.page) {
                // Rows read before the bad one are still compared.
                self.unreadable_at = match &e {
                    DbError::BadField { seq, .. } => Some(*seq),
                    DbError::BadSeq { after, .. } => Some(after.saturating_add(1)),
                    _ => None,
                };
                self.unreadable = Some(e.to_string().replace('\n', ";"));
            }
            self.after = self.page.last().map_or(self.head, |e| e.seq);
        }
        self.current().map(|e| e.seq).filter(|&s| s <= self.head)
    }

    /// The current row.
    pub fn current(&self) -> Option<EventRef<'_>> {
        self.page.get(self.pos)
    }

    /// Moves past the current row, checking it against the chain.
    pub fn advance(&mut self) {
        self.check_current();
        self.pos += 1;
    }

    /// Checks the current row against the chain (once: the check follows
    /// the rows in order), before it is compared or passed.
    fn check_current(&mut self) {
        if self.broken.is_none()
            && let Some(e) = self.page.get(self.pos)
            && let Err(b) = self.chain.check(&e)
        {
            self.broken = Some(b);
        }
    }
}

/// The side-by-side walk.
pub struct Comparison {
    pub db: DbCursor,
    pub last_copy: u64,
    pub same: u64,
    pub changed: Vec<Changed>,
    pub changed_count: u64,
    /// Every changed seq as ranges (the detail of `changed` stops at `limit`).
    pub changed_ranges: Ranges,
    /// The changed seqs whose stored hash differs on a database chain that
    /// still links there: rewritten (a consistent rewrite, another history).
    pub rewritten_ranges: Ranges,
    pub limit: usize,
    pub missing: Ranges,
    pub database_only: Ranges,
    pub beyond: Ranges,
    pub fork: Option<(u64, String, String)>,
    /// Runs and side effects of the differing events (the copy's version
    /// where it has one: what really happened).
    pub touched: Option<chainship_runs::Touched>,
    /// A row no seq order reaches (seq NULL, 0 or negative), described.
    pub unreachable: Option<String>,
    /// Copy records not compared because the database could not be read.
    pub not_compared: u64,
    /// Seqs trusted statements redact: their payloads are never compared
    /// nor shown (the one hash stands for them on both sides).
    redactions: Option<std::sync::Arc<chainship_chain::redaction::Redactions>>,
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

impl Comparison {
    /// Takes the copy's next record: database rows before it are the
    /// database's alone; the row at its seq is compared; none is missing.
    pub fn feed(&mut self, r: &Record<'_>) {
        if r.seq <= self.last_copy {
            // A duplicate (the copy check names it), or a late record: the
            // database's row there is compared with it after all.
            if self.database_only.remove(r.seq) {
                let mut row = EventBatch::new();
                if self.db.db.read_page(r.seq - 1, 1, 8 << 20, &mut row).is_ok()
                    && let Some(e) = row.get(0).filter(|e| e.seq == r.seq)
                {
                    self.compare_row(r, &e);
                }
            }
            return;
        }
        self.last_copy = r.seq;
        loop {
            match self.db.peek_seq() {
                Some(s) if s < r.seq => {
                    self.database_only.add(s);
                    if let (Some(t), Some(e)) = (self.touched.as_mut(), self.db.current()) {
                        t.feed(&chainship_runs::RunEvent::from(&e));
                    }
                    self.db.advance();
                }
                Some(s) if s == r.seq => {
                    // Checked first: a changed hash on a chain that still
                    // links is a rewrite, on one that breaks an alteration.
                    self.db.check_current();
                    self.compare(r);
                    self.db.pos += 1;
                    return;
                }
                _ if self.db.unreadable.is_some() => {
                    self.not_compared += 1;
                    return;
                }
                _ => {
                    self.missing.add(r.seq);
                    self.touch(r);
                    return;
                }
            }
        }
    }

    /// Counts `r`'s run and side effects, when runs are collected.
    pub fn touch(&mut self, r: &Record<'_>) {
        if let (Some(t), Some(e)) = (self.touched.as_mut(), RecordEvent::of(r)) {
            t.feed(&e.event(r.seq));
        }
    }

    /// Compares the database's current row with `r`, field by field.
    pub fn compare(&mut self, r: &Record<'_>) {
        // The page is lent out while the row it holds is compared.
        let page = std::mem::take(&mut self.db.page);
        if let Some(e) = page.get(self.db.pos) {
            self.compare_row(r, &e);
        }
        self.db.page = page;
    }

    /// Compares the database's row `e` with `r`, field by field.
    fn compare_row(&mut self, r: &Record<'_>, e: &EventRef<'_>) {
        let db_fields: [(&'static str, &[u8]); 6] = [
            ("run_id", e.run_id),
            ("step_id", e.step_id),
            ("at", e.at),
            ("type", e.kind),
            ("payload_json", e.payload_json),
            ("hash", e.hash),
        ];
        let mut fields = Vec::new();
        for (name, stored) in db_fields {
            // A tombstone withholds its payload: the copy's check judged it
            // (redacted where a trusted statement covers it, else altered).
            let redacted = self
                .redactions
                .as_ref()
                .and_then(|red| red.get(e.seq))
                .is_some_and(|c| c.hash[..] == *e.hash && c.hash[..] == *r.hash.as_bytes());
            if name == "payload_json" && (r.is_clean_tombstone() || redacted) {
                continue;
            }
            let copy = if name == "hash" {
                Some(std::borrow::Cow::Borrowed(r.hash.as_bytes()))
            } else {
                r.field_bytes(name)
            };
            let copy = copy.as_deref().unwrap_or(b"");
            if copy != stored {
                fields.push(FieldDiff {
                    field: name,
                    copy: copy.to_vec(),
                    database: stored.to_vec(),
                });
            }
        }
        if fields.is_empty() {
            self.same += 1;
            return;
        }
        let (seq, hash_differs, db_hash) = (e.seq, e.hash != r.hash.as_bytes(), lossy(e.hash));
        if self.fork.is_none() && hash_differs {
            self.fork = Some((seq, r.hash.to_string(), db_hash));
        }
        self.touch(r);
        self.changed_count += 1;
        self.changed_ranges.add(seq);
        if hash_differs && self.db.broken.is_none() {
            self.rewritten_ranges.add(seq);
        }
        if self.changed.len() < self.limit {
            self.changed.push(Changed {
                seq,
                run_id: readable(&r.field_bytes("run_id").unwrap_or_default()),
                fields,
            });
        }
    }

    /// The database's rows after the copy's last record.
    pub fn finish(&mut self) {
        while let Some(s) = self.db.peek_seq() {
            self.beyond.add(s);
            self.db.advance();
        }
    }

    /// Whether the database differs from the copy (or could not be read whole).
    pub fn differs(&self) -> bool {
        self.changed_count > 0
            || self.missing.count > 0
            || self.database_only.count > 0
            || self.unreachable.is_some()
            || self.db.broken.is_some()
            || self.db.unreadable.is_some()
    }
}

impl Comparison {
    /// The same comparison, the database's own chain accepting the rows
    /// whose payload a trusted statement says was blanked.
    pub fn set_redactions(&mut self, redactions: Option<std::sync::Arc<chainship_chain::redaction::Redactions>>) {
        self.db.chain = self.db.chain.clone().with_redactions(redactions.clone());
        self.redactions = redactions;
    }

    /// A comparison of the copy with `db`, up to the head it has now
    /// (`head`), keeping at most `limit` changed events in detail, and
    /// collecting the runs of differing events when `touched` is given.
    pub fn new(db: EventDb, head: u64, limit: usize, touched: Option<Touched>) -> Result<Comparison, DbError> {
        let unreachable = db.first_unreachable_seq()?;
        Ok(Comparison {
            db: DbCursor {
                db,
                page: EventBatch::new(),
                pos: 0,
                after: 0,
                head,
                chain: ChainCheck::from_start(),
                broken: None,
                unreadable: None,
                unreadable_at: None,
            },
            last_copy: 0,
            same: 0,
            changed: Vec::new(),
            changed_count: 0,
            changed_ranges: Ranges::new(1000),
            rewritten_ranges: Ranges::new(1000),
            limit,
            missing: Ranges::new(1000),
            database_only: Ranges::new(1000),
            beyond: Ranges::new(1),
            fork: None,
            touched,
            unreachable,
            not_compared: 0,
            redactions: None,
        })
    }
}

/// The runs and side effects of the differing events, when any differ:
/// every changed, missing and database-only seq, however many the report
/// shows in detail.
pub fn affected(c: &Comparison) -> Option<Affected> {
    let t = c.touched.as_ref().filter(|t| t.events > 0)?;
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    for kept in [&c.changed_ranges, &c.missing, &c.database_only] {
        ranges.extend(&kept.list);
        // Past its 1,000 kept ranges, the rest of a list is one range to the last seq compared.
        if kept.more
            && let Some(&(from, _)) = kept.list.last()
        {
            ranges.push((from, c.last_copy.max(c.db.head).max(from)));
        }
    }
    ranges.sort_unstable();
    let merged = chainship_verify::verdict::merge(ranges);
    Some(Affected {
        from: merged.first()?.0,
        to: merged.last()?.1,
        ranges: merged,
        touched: t.clone(),
        note: None,
    })
}

/// A value's readable form: text escaped as Rust escapes it, or, when the
/// bytes are not UTF-8, each byte that is not printable ASCII as `\xNN`
/// (two different invalid byte strings never look alike).
pub fn readable(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => text.escape_debug().collect(),
        Err(_) => bytes.escape_ascii().to_string(),
    }
}
