//! Checking an exported copy (records read back from a sink) against the
//! chain rules and the kept heads, without the database.
//!
//! Records are fed one at a time, in the order the copy holds them, and the
//! trusted heads and checkpoints as the copy reaches their seq (the store
//! audit hands them on in seq order, see [`crate::pass::TrustedSink`]).
//! Memory is bounded: the check remembers a window of recent records (to
//! tell an identical duplicate from a differing one, and to check a late
//! record's links), the missing seqs not yet seen, the heads and
//! checkpoints not yet reached, and one number per head matched.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use chainship_chain::record::Record;
use chainship_chain::redaction::Redactions;
use chainship_chain::{Head, HexHash, PrevHash};

use crate::finding::{Finding, Kind};

const WINDOW: usize = 65_536;

/// What the check keeps of a recent record.
#[derive(Clone, Copy)]
struct Seen {
    hash: HexHash,
    prev: PrevHash,
    /// The hash its fields give: with `hash`, what tells two copies of a
    /// seq apart even when an altered one kept the original's hash field.
    content: HexHash,
}

/// A record that jumped ahead: `jumper` arrived when `from` was next; `came`
/// are the seqs of `from..=to` it jumped over that came since, ascending.
#[derive(Clone)]
struct Jump {
    jumper: u64,
    /// The jumper's hash, the predecessor it names, and whether its fields give its hash.
    hash: HexHash,
    prev: PrevHash,
    whole: bool,
    from: u64,
    to: u64,
    came: Vec<u64>,
}

/// Records that jumped ahead one after the other, judged together.
const MAX_JUMPS: usize = 64;

pub struct ExportCheck {
    origin: String,
    /// Trusted heads handed on but not yet met in the copy, by seq (two
    /// trusted heads of one seq with different hashes are both kept: the
    /// copy can match at most one).
    heads: BTreeMap<(u64, HexHash), Head>,
    covered: usize,
    /// The seqs of the heads the copy matched, and the hashes of the most
    /// recent ones (the rest are read again from the store if needed).
    matched: Vec<u64>,
    matched_recent: VecDeque<Head>,
    /// The seqs of the heads that hold another hash than the copy's record.
    contradicted: Vec<u64>,
    /// The copy is read: heads handed on now lie past its end.
    read_to_end: bool,
    /// The lowest position of a line that is no record (it names no seq).
    unplaced: Option<u64>,
    /// Findings beyond [`MAX_FINDINGS`], counted, not kept.
    more_findings: u64,
    /// Kept heads past the copy's end beyond the first (one `cut` names them all).
    more_past_end: u64,
    /// Highest seq seen, and its hash (the in-order position).
    last: Option<(u64, HexHash)>,
    start: Option<Head>,
    /// The window: slot `seq % WINDOW` holds the latest seq of that slot
    /// seen (allocated once: a map with this churn grows to four times it).
    recent: Recent,
    /// Missing ranges `start -> end` (inclusive) not yet filled by a late record.
    missing: BTreeMap<u64, u64>,
    /// The records that jumped ahead, one after the other, while the
    /// records they jumped over come next, ascending (from `fill_next` on):
    /// then the jumpers alone were out of place (one `reordered` each, not
    /// one per record they jumped over).
    jumps: Vec<Jump>,
    fill_next: u64,
    /// The seqs a late record filled, as they came (at most [`MAX_FINDINGS`]:
    /// each is also a finding), so a re-walk in the copy's order that saw
    /// them missing can take them back.
    pub filled_late: Vec<u64>,
    /// The findings (by index) that say a record's prev_hash is not its
    /// predecessor's hash field: the exact ranges judge the link again (a
    /// record after one whose hash field alone changed links after its fields).
    pub link_breaks: Vec<usize>,
    /// The sizes of trusted checkpoints whose root the copy's tree does not give.
    pub roots_contradicted: Vec<u64>,
    pub records: u64,
    pub identical_duplicates: u64,
    pub findings: Vec<Finding>,
    /// The RFC 6962 tree of the copy's hashes while it is whole and in
    /// order from seq 1 (`None` once it is not: its findings say why).
    tree: Option<chainship_tlog::CompactRange>,
    /// Trusted checkpoints still to reach, ascending by size.
    checkpoints: VecDeque<(u64, chainship_tlog::Hash)>,
    /// Trusted checkpoints handed on, and how many the copy's tree matched.
    pub checkpoints_trusted: usize,
    pub matched_roots: usize,
    /// The redactions trusted statements cover ([`crate::redactions`]).
    redactions: Option<Arc<Redactions>>,
    /// The seqs whose tombstone (or blanked payload) was accepted, ascending
    /// and each once; and the hash the copy held first at each seq a
    /// statement names (what the statement is held to).
    pub redacted: Vec<u64>,
    pub statement_hashes: BTreeMap<u64, HexHash>,
    /// The seqs a statement names where the copy held the event whole, ascending.
    pub payload_held: Vec<u64>,
}

/// The window of recent records, by seq modulo its size.
#[derive(Default)]
struct Recent {
    slots: Vec<Option<(u64, Seen)>>,
}

impl Recent {
    fn get(&self, seq: &u64) -> Option<&Seen> {
        match self.slots.get(*seq as usize % WINDOW) {
            Some(Some((s, seen))) if s == seq => Some(seen),
            _ => None,
        }
    }

    /// Keeps the first copy of a seq; a seq a window later takes its slot.
    fn insert(&mut self, seq: u64, seen: Seen) {
        if self.slots.is_empty() {
            self.slots = vec![None; WINDOW];
        }
        let slot = &mut self.slots[seq as usize % WINDOW];
        if slot.as_ref().is_none_or(|(s, _)| *s != seq) {
            *slot = Some((seq, seen));
        }
    }
}

/// Findings kept at most; the rest are counted.
pub const MAX_FINDINGS: usize = 10_000;

/// Matched heads whose hash is kept at hand.
const RECENT_HEADS: usize = 1024;

fn to_hash(text: &str) -> Option<HexHash> {
    Head::from_stored(1, text.as_bytes()).map(|h| h.hash)
}

impl ExportCheck {
    /// A check of `origin`'s copy from seq 1, or from after a trusted head.
    /// A copy that starts after `after` cannot show the heads at or below
    /// it: they are left out, except that one at `after`'s seq must be it.
    pub fn new(origin: &str, after: Option<Head>) -> Self {
        ExportCheck {
            origin: origin.to_owned(),
            covered: 0,
            heads: BTreeMap::new(),
            matched: Vec::new(),
            matched_recent: VecDeque::new(),
            contradicted: Vec::new(),
            read_to_end: false,
            more_past_end: 0,
            unplaced: None,
            more_findings: 0,
            last: after.map(|h| (h.seq, h.hash)),
            start: after,
            recent: Recent::default(),
            missing: BTreeMap::new(),
            jumps: Vec::new(),
            fill_next: 0,
            filled_late: Vec::new(),
            link_breaks: Vec::new(),
            roots_contradicted: Vec::new(),
            records: 0,
            identical_duplicates: 0,
            findings: Vec::new(),
            // The tree of a copy read from seq 1; one starting later has no root to show.
            tree: after.is_none().then(chainship_tlog::CompactRange::default),
            checkpoints: VecDeque::new(),
            checkpoints_trusted: 0,
            matched_roots: 0,
            redactions: None,
            redacted: Vec::new(),
            statement_hashes: BTreeMap::new(),
            payload_held: Vec::new(),
        }
    }

    /// The same check, accepting the redactions trusted statements cover.
    pub fn with_redactions(mut self, redactions: Option<Arc<Redactions>>) -> Self {
        self.redactions = redactions.filter(|r| !r.is_empty());
        self
    }

    /// A trusted head, handed on before the copy's record at its seq.
    pub fn add_head(&mut self, head: Head) {
        let floor = self.start.map_or(0, |a| a.seq);
        if head.seq < floor {
            return;
        }
        if head.seq == floor {
            if let Some(start) = self.start.filter(|a| a.hash != head.hash) {
                let mut f = Finding::new(
                    Kind::Fork,
                    Some(floor),
                    format!(
                        "the head the copy starts after ({start}) is not the kept head {head}: the copy starts from another chain"
                    ),
                );
                f.expected = Some(head.hash_str().to_owned());
                f.found = Some(start.hash_str().to_owned());
                self.note(f);
            }
            return;
        }
        if self.heads.contains_key(&(head.seq, head.hash)) {
            return;
        }
        self.covered += 1;
        if self.read_to_end && self.last.is_none_or(|(end, _)| head.seq > end) {
            self.judge_unheld(head, self.last.map_or(0, |(end, _)| end));
            return;
        }
        self.heads.insert((head.seq, head.hash), head);
        // Handed on late, after its record: matched at once.
        if let Some(seen) = self.recent.get(&head.seq).copied() {
            self.match_head(head.seq, seen.hash);
        }
    }

    /// A trusted checkpoint, handed on before the copy's record at its size.
    pub fn add_checkpoint(&mut self, size: u64, root: chainship_tlog::Hash) {
        self.checkpoints_trusted += 1;
        if self.tree.as_ref().is_some_and(|t| t.size() < size) && self.checkpoints.back().is_none_or(|(s, _)| *s < size)
        {
            self.checkpoints.push_back((size, root));
        }
    }

    /// Extends the tree with the next record in order, or stops it.
    fn grow_tree(&mut self, seq: u64, in_order: bool, hash: &HexHash) {
        let Some(tree) = self.tree.as_mut() else {
            return;
        };
        if !in_order || tree.size() + 1 != seq {
            self.tree = None;
            self.checkpoints.clear();
            return;
        }
        tree.push_leaf(chainship_tlog::leaf_hash(hash));
        // The root only where a checkpoint is due (hashing it per record would cost).
        if self.checkpoints.front().is_none_or(|(s, _)| *s > seq) {
            return;
        }
        let ours = tree.root();
        while let Some((size, root)) = self.checkpoints.front().copied().filter(|(s, _)| *s <= seq) {
            self.checkpoints.pop_front();
            if size != seq {
                continue;
            }
            if ours == root {
                self.matched_roots += 1;
                // The copy's record at the checkpoint's size is vouched for as by a head.
                if let Some(head) = Head::from_stored(seq, hash) {
                    self.matched.push(seq);
                    self.matched_recent.push_back(head);
                    if self.matched_recent.len() > RECENT_HEADS {
                        self.matched_recent.pop_front();
                    }
                }
            } else {
                let (ours, theirs) = (chainship_tlog::hash_b64(&ours), chainship_tlog::hash_b64(&root));
                let mut f = Finding::new(
                    Kind::Fork,
                    Some(size),
                    format!(
                        "checkpoint {size}: the copy's first {size} hashes have root {ours}, the checkpoint {theirs}"
                    ),
                );
                f.expected = Some(theirs);
                f.found = Some(ours);
                self.note(f);
                self.roots_contradicted.push(size);
            }
        }
    }

    /// How many trusted heads this check compares the copy with (those
    /// above the start); 0 means it can prove nothing against a kept head.
    pub fn heads_covered(&self) -> usize {
        self.covered
    }

    fn remember(&mut self, seq: u64, seen: Seen) {
        self.recent.insert(seq, seen);
    }

    fn hash_before(&self, seq: u64) -> Option<Vec<u8>> {
        if seq == 0 {
            return Some(Vec::new());
        }
        if let Some(s) = self.start.filter(|s| s.seq == seq) {
            return Some(s.hash.to_vec());
        }
        self.recent.get(&seq).map(|s| s.hash.to_vec())
    }

    /// Feeds one line of the copy (`where_` names it in messages).
    pub fn feed_line(&mut self, line: &[u8], where_: &dyn Fn() -> String) {
        match Record::parse(line) {
            Ok(record) => self.feed(&record, where_),
            // A SIEM-format record whose searchable fields were changed: named
            // with its seq, and the record it carries still holds its place.
            Err(e) if e.carried().is_some() => {
                let record = e.carried().expect("checked");
                self.findings.push(Finding::new(
                    Kind::Altered,
                    Some(record.seq),
                    format!("{}: {e}", where_()),
                ));
                self.feed_checked(record, where_, false);
            }
            Err(e) => {
                // Not a record: trust ends where the copy stood when it came.
                let at = self.last.map_or(1, |(s, _)| s.saturating_add(1));
                self.unplaced = Some(self.unplaced.map_or(at, |u| u.min(at)));
                self.note(Finding::new(
                    Kind::Altered,
                    None,
                    format!("{}: not a record: {e}", where_()),
                ));
            }
        }
    }

    pub fn feed(&mut self, r: &Record<'_>, where_: &dyn Fn() -> String) {
        self.feed_checked(r, where_, true);
    }

    /// [`ExportCheck::feed`] of a record whose line may have been found
    /// altered already (`as_delivered` false): such a copy of a seq is never
    /// an identical duplicate.
    fn feed_checked(&mut self, r: &Record<'_>, where_: &dyn Fn() -> String, as_delivered: bool) {
        self.records += 1;
        // The records jumped over stopped coming, ascending: judge the jumps
        // (with this record, when it is the one after a jumper). Another
        // jump before any of them came is judged with them.
        if !self.jumps.is_empty() {
            let position = self.last.map_or(0, |(s, _)| s);
            let continuing = r.seq >= self.fill_next
                && r.seq < position
                && self.jumps.iter().any(|j| j.from <= r.seq && r.seq <= j.to);
            let another = r.seq > position.saturating_add(1)
                && self.jumps.len() < MAX_JUMPS
                && self.jumps.iter().all(|j| j.came.is_empty());
            if !continuing && !another {
                self.flush_jumps(Some((r.seq, r.prev_hash.as_bytes())));
            }
        }
        if r.origin != self.origin {
            let msg = format!("{}: a record of origin {:?} (seq {})", where_(), r.origin, r.seq);
            self.note(Finding::new(Kind::Foreign, Some(r.seq), msg));
            return;
        }
        let (Some(hash), Some(prev)) = (to_hash(&r.hash), PrevHash::parse(r.prev_hash.as_bytes())) else {
            let msg = format!("{}: seq {} has a malformed hash or prev_hash", where_(), r.seq);
            self.note(Finding::new(Kind::Altered, Some(r.seq), msg));
            return;
        };
        let mut content = r.expected_hash();
        let mut accepted = false;
        if let Some(red) = self.redactions.as_ref().filter(|red| red.get(r.seq).is_some()) {
            self.statement_hashes.entry(r.seq).or_insert(hash);
            if content != hash && red.accepts_record(r) {
                // A tombstone a trusted statement covers: its hash stands for its content.
                content = hash;
                accepted = true;
            } else if content == hash
                && let Err(at) = self.payload_held.binary_search(&r.seq)
            {
                self.payload_held.insert(at, r.seq);
            }
        }
        let next_seq = self.last.map_or(Some(1), |(s, _)| s.checked_add(1));
        if accepted && r.is_tombstone() && next_seq.is_some_and(|n| r.seq < n) && !self.in_missing(r.seq) {
            // Appended after the record it stands for (Kafka keeps the
            // original until retention): the record's place is taken.
            self.note_redacted(r.seq);
            return;
        }
        if accepted {
            self.note_redacted(r.seq);
        }
        if content != hash {
            let msg = match &r.redacted {
                Some(statement) => format!(
                    "{}: seq {} is a tombstone (naming {statement:?}) no trusted redaction statement covers",
                    where_(),
                    r.seq
                ),
                None => format!("{}: seq {} does not hash to its own hash field", where_(), r.seq),
            };
            let mut f = Finding::new(Kind::Altered, Some(r.seq), msg);
            // A record whose fields cannot be hashed at all gives no hash to expect.
            if content != [0; 64] {
                f.expected = Some(String::from_utf8_lossy(&content).into_owned());
            }
            f.found = Some(r.hash.to_string());
            self.note(f);
            // It still holds its place in the copy: go on checking the order and links.
        }
        let seen = Seen { hash, prev, content };
        // Nothing can follow the largest seq: such a record is out of place.
        let Some(next) = self.last.map_or(Some(1), |(s, _)| s.checked_add(1)) else {
            self.note(Finding::new(
                Kind::Reordered,
                Some(r.seq),
                format!(
                    "{}: seq {} comes after seq {}, which nothing can follow",
                    where_(),
                    r.seq,
                    u64::MAX
                ),
            ));
            return;
        };

        if r.seq < next {
            // Either a duplicate, or a late record filling a gap.
            if let Some(earlier) = self.recent.get(&r.seq).copied() {
                // Identical only if both the hash field and what the fields
                // hash to agree: an altered copy may keep the hash field.
                // A copy that cannot be hashed at all (all zero) proves nothing.
                if as_delivered && earlier.hash == hash && earlier.content == content && content != [0; 64] {
                    self.identical_duplicates += 1;
                } else {
                    let mut f = Finding::new(
                        Kind::Duplicate,
                        Some(r.seq),
                        format!("{}: seq {} delivered twice with different contents", where_(), r.seq),
                    );
                    // Hash fields that agree would show nothing; the altered finding names the difference.
                    if earlier.hash != hash {
                        f.expected = Some(String::from_utf8_lossy(&earlier.hash).into_owned());
                        f.found = Some(r.hash.to_string());
                    }
                    self.note(f);
                }
                return;
            }
            if self.fill_missing(r.seq) {
                if self.filled_late.len() < MAX_FINDINGS {
                    self.filled_late.push(r.seq);
                }
                let jumped = (r.seq >= self.fill_next)
                    .then(|| self.jumps.iter().position(|j| j.from <= r.seq && r.seq <= j.to))
                    .flatten();
                match jumped {
                    // One more of those jumped over: judged when they stop coming.
                    Some(i) => {
                        self.fill_next = r.seq + 1;
                        let came = &mut self.jumps[i].came;
                        if came.len() < MAX_FINDINGS {
                            came.push(r.seq);
                        }
                    }
                    None => self.note(Finding::new(
                        Kind::Reordered,
                        Some(r.seq),
                        format!("{}: seq {} comes after a later seq", where_(), r.seq),
                    )),
                }
                self.check_late_links(r.seq, &seen, where_);
                self.remember(r.seq, seen);
                self.match_head(r.seq, hash);
            } else {
                self.note(Finding::new(
                    Kind::Reordered,
                    Some(r.seq),
                    format!("{}: seq {} comes far after later seqs", where_(), r.seq),
                ));
            }
            return;
        }
        let expected_prev = self
            .hash_before(r.seq - 1)
            .filter(|e| r.seq == next && e[..] != *prev.as_bytes());
        // Past a break the stored hashes are no tree a checkpoint vouches
        // for: as a database's walk, the tree ends there, and the exact
        // ranges say what is vouched for again.
        if content != hash || expected_prev.is_some() {
            self.tree = None;
            self.checkpoints.clear();
        }
        self.grow_tree(r.seq, r.seq == next && self.missing.is_empty(), &hash);
        if r.seq > next {
            self.missing.insert(next, r.seq - 1);
            if self.jumps.iter().any(|j| !j.came.is_empty()) || self.jumps.len() >= MAX_JUMPS {
                self.flush_jumps(None);
            }
            if self.jumps.is_empty() {
                self.fill_next = next;
            }
            self.jumps.push(Jump {
                jumper: r.seq,
                hash,
                prev,
                whole: content == hash,
                from: next,
                to: r.seq - 1,
                came: Vec::new(),
            });
        } else if let Some(expected_prev) = expected_prev {
            let mut f = Finding::new(
                Kind::Altered,
                Some(r.seq),
                format!(
                    "{}: seq {}'s prev_hash is not the previous record's hash",
                    where_(),
                    r.seq
                ),
            );
            f.expected = Some(String::from_utf8_lossy(&expected_prev).into_owned());
            f.found = Some(r.prev_hash.to_string());
            if self.findings.len() < MAX_FINDINGS {
                self.link_breaks.push(self.findings.len());
            }
            self.note(f);
        }
        self.last = Some((r.seq, hash));
        self.remember(r.seq, seen);
        self.match_head(r.seq, hash);
        self.settle_behind();
    }

    /// Heads far behind the copy's position that it never held: a late
    /// record that far back is no longer taken in order, so they are judged
    /// now and let go (what keeps a copy with a long gap in bounded memory).
    fn settle_behind(&mut self) {
        let Some((position, _)) = self.last else { return };
        let horizon = position.saturating_sub(WINDOW as u64);
        while let Some(key) = self
            .heads
            .first_key_value()
            .map(|(k, _)| *k)
            .filter(|(s, _)| *s < horizon)
        {
            let head = self.heads.remove(&key).expect("just seen");
            self.judge_unheld(head, position);
        }
    }

    /// A trusted head whose seq the copy does not hold: in a gap, the gap's
    /// finding names it; past the copy's end, the copy is cut.
    fn judge_unheld(&mut self, head: Head, end: u64) {
        if head.seq <= end && self.in_missing(head.seq) {
            return;
        }
        let kind = if head.seq > end { Kind::Cut } else { Kind::Gap };
        if kind == Kind::Cut && self.findings.iter().any(|f| f.kind == Kind::Cut && f.seq.is_some()) {
            self.more_past_end += 1;
            return;
        }
        let mut f = Finding::new(
            kind,
            Some(head.seq),
            format!(
                "the copy does not hold seq {} of the kept head {head} (it ends at seq {end})",
                head.seq
            ),
        );
        f.expected = Some(head.hash_str().to_owned());
        self.note(f);
    }

    /// Jumps judged once the records they jumped over stopped coming: two or
    /// more came after a jumper, ascending, so it alone was out of place
    /// (early); one alone is that one, late (a swap of two names the late
    /// record). Those that never came are missing either way.
    ///
    /// A jumper is only early if it links in its place both ways: its fields
    /// give its hash, it names the hash of the record before it, and the
    /// record after it (come already, or `after`: `(seq, prev_hash)`) names
    /// its hash. Otherwise it is no record of this chain at that seq, and is
    /// judged where it stood.
    fn flush_jumps(&mut self, after: Option<(u64, &[u8])>) {
        for j in std::mem::take(&mut self.jumps) {
            self.judge_jump(j, after);
        }
    }

    fn judge_jump(&mut self, j: Jump, after: Option<(u64, &[u8])>) {
        let links_back = self.hash_before(j.jumper - 1).is_some_and(|h| h == j.prev.as_bytes());
        // The largest seq has no record after it to link on.
        let links_on = j.jumper.checked_add(1).is_some_and(|next| {
            self.recent
                .get(&next)
                .is_some_and(|n| n.prev.as_bytes() == j.hash.as_slice())
                || after.is_some_and(|(seq, prev)| seq == next && prev == j.hash.as_slice())
        });
        if j.came.len() >= 2 && j.whole && links_back && links_on {
            // Held, only early: not missing where a walk in the copy's order passed it.
            if self.filled_late.len() < MAX_FINDINGS {
                self.filled_late.push(j.jumper);
            }
            self.note(Finding::new(
                Kind::Reordered,
                Some(j.jumper),
                format!(
                    "seq {} came before {} record(s) of seqs {}..{}, which follow it in the copy",
                    j.jumper,
                    j.came.len(),
                    j.from,
                    j.to
                ),
            ));
        } else {
            for seq in j.came {
                self.note(Finding::new(
                    Kind::Reordered,
                    Some(seq),
                    format!("seq {seq} comes after a later seq ({})", j.jumper),
                ));
            }
        }
    }

    fn note_redacted(&mut self, seq: u64) {
        if let Err(at) = self.redacted.binary_search(&seq)
            && self.redacted.len() < MAX_FINDINGS
        {
            self.redacted.insert(at, seq);
        }
    }

    fn in_missing(&self, seq: u64) -> bool {
        self.missing
            .range(..=seq)
            .next_back()
            .is_some_and(|(_, end)| seq <= *end)
    }

    /// Removes `seq` from the missing ranges; false if it was not missing.
    fn fill_missing(&mut self, seq: u64) -> bool {
        let Some((&start, &end)) = self.missing.range(..=seq).next_back() else {
            return false;
        };
        if seq > end {
            return false;
        }
        self.missing.remove(&start);
        if start < seq {
            self.missing.insert(start, seq - 1);
        }
        if seq < end {
            self.missing.insert(seq.saturating_add(1), end);
        }
        true
    }

    /// A late record must still link to its neighbours.
    fn check_late_links(&mut self, seq: u64, seen: &Seen, where_: &dyn Fn() -> String) {
        let before_ok = self
            .hash_before(seq.saturating_sub(1))
            .is_none_or(|h| h[..] == *seen.prev.as_bytes());
        let after_ok = self
            .recent
            .get(&seq.saturating_add(1))
            .is_none_or(|n| *n.prev.as_bytes() == seen.hash[..]);
        if !before_ok || !after_ok {
            self.note(Finding::new(
                Kind::Altered,
                Some(seq),
                format!("{}: seq {} does not link to its neighbours", where_(), seq),
            ));
        }
    }

    fn match_head(&mut self, seq: u64, hash: HexHash) {
        let at_seq: Vec<(u64, HexHash)> = self
            .heads
            .range((seq, [0; 64])..=(seq, [u8::MAX; 64]))
            .map(|(k, _)| *k)
            .collect();
        for key in at_seq {
            let head = self.heads.remove(&key).expect("just seen");
            if head.hash == hash {
                self.matched.push(seq);
                self.matched_recent.push_back(head);
                if self.matched_recent.len() > RECENT_HEADS {
                    self.matched_recent.pop_front();
                }
            } else {
                self.contradicted.push(seq);
                let mut f = Finding::new(
                    Kind::Fork,
                    Some(seq),
                    format!("the copy's seq {seq} has another hash than the kept head"),
                );
                f.expected = Some(head.hash_str().to_owned());
                f.found = Some(String::from_utf8_lossy(&hash).into_owned());
                self.note(f);
            }
        }
    }

    /// Ends the check: reports what is still missing and heads past the
    /// copy's end, and returns the last trusted head: the highest the copy
    /// matched below its first problem (`lookup` reads a head's hash again
    /// when it is no longer at hand).
    pub fn finish(&mut self, lookup: &mut dyn FnMut(u64) -> Option<Head>) -> Option<Head> {
        self.close();
        self.last_trusted(None, lookup)
    }

    /// Ends the check: what is still missing and the heads past the copy's
    /// end become findings.
    pub fn close(&mut self) {
        self.flush_jumps(None);
        let end = self.last.map_or(0, |(s, _)| s);
        let pending = std::mem::take(&mut self.heads);
        for head in pending.into_values() {
            self.judge_unheld(head, end);
        }
        // A trusted checkpoint past the copy's end vouches for its size as a
        // head would (its head may be missing): the copy was cut before it.
        let beyond = self.checkpoints.iter().map(|(s, _)| *s).find(|s| *s > end);
        if let Some(size) = beyond
            && !self.findings.iter().any(|f| f.kind == Kind::Cut)
        {
            self.note(Finding::new(
                Kind::Cut,
                Some(size),
                format!("checkpoint {size} vouches for seq {size}, but the copy ends at seq {end}"),
            ));
        }
        if self.more_past_end > 0
            && let Some(cut) = self
                .findings
                .iter_mut()
                .find(|f| f.kind == Kind::Cut && f.seq.is_some())
        {
            cut.message += &format!(", nor those of {} later kept head(s)", self.more_past_end);
        }
        let gaps: Vec<(u64, u64)> = self.missing.iter().map(|(a, b)| (*a, *b)).collect();
        for (start, end) in gaps {
            let msg = if start == end {
                format!("seq {start} is missing")
            } else {
                format!("seqs {start} to {end} are missing")
            };
            self.note(Finding::new(Kind::Gap, Some(start), msg));
        }
        if self.more_findings > 0 {
            let first = self.findings.iter().filter_map(|f| f.seq).min();
            self.findings.push(Finding::new(
                Kind::Altered,
                first,
                format!(
                    "and {} more finding(s) like those above, not listed (at most {MAX_FINDINGS} are kept)",
                    self.more_findings
                ),
            ));
        }
        // Sorted by seq and kind; `link_breaks` follow their findings.
        let mut order: Vec<usize> = (0..self.findings.len()).collect();
        order.sort_by_key(|&i| (self.findings[i].seq, self.findings[i].kind));
        let mut moved_to = vec![0; order.len()];
        for (new, &old) in order.iter().enumerate() {
            moved_to[old] = new;
        }
        for i in &mut self.link_breaks {
            *i = moved_to[*i];
        }
        let mut taken: Vec<Option<Finding>> = std::mem::take(&mut self.findings).into_iter().map(Some).collect();
        self.findings = order.into_iter().filter_map(|i| taken[i].take()).collect();
    }

    /// The highest head the copy matched below every finding that ends
    /// trust, and below `limit` (the store's own such findings, for one rule
    /// with `anchor verify`). After [`ExportCheck::close`].
    pub fn last_trusted(&self, limit: Option<u64>, lookup: &mut dyn FnMut(u64) -> Option<Head>) -> Option<Head> {
        let first_error = self
            .findings
            .iter()
            .filter(|f| f.kind.ends_trust())
            .filter_map(|f| f.seq)
            .chain(self.unplaced)
            .chain(limit)
            .min()
            .unwrap_or(u64::MAX);
        let mut below: Vec<u64> = self.matched.iter().copied().filter(|s| *s < first_error).collect();
        below.sort_unstable();
        below.dedup();
        // The highest still at hand or readable again (one matched by a
        // checkpoint alone has no head note to read).
        below.iter().rev().take(16).find_map(|&seq| {
            self.matched_recent
                .iter()
                .find(|h| h.seq == seq)
                .copied()
                .or_else(|| lookup(seq))
        })
    }

    /// Keeps a finding, up to [`MAX_FINDINGS`]; past that they are counted
    /// (a copy of millions of bad records must not hold millions of findings).
    fn note(&mut self, f: Finding) {
        if self.findings.len() < MAX_FINDINGS {
            self.findings.push(f);
        } else {
            self.more_findings += 1;
        }
    }

    /// The copy is read to its end: heads handed on from now are past it.
    pub fn read_to_end(&mut self) {
        self.read_to_end = true;
    }

    /// What vouches for the copy's records, for the exact ranges: the seqs
    /// of the heads and checkpoints it matched, and of the heads it contradicts.
    pub fn anchors(&self) -> crate::ranges::Anchors {
        crate::ranges::Anchors {
            heads: self.matched.clone(),
            contradicted: self.contradicted.clone(),
        }
    }

    /// Where trust in the copy's records ends: the lowest seq of a finding
    /// that ends it, or of a line that is no record.
    pub fn first_problem(&self) -> Option<u64> {
        self.findings
            .iter()
            .filter(|f| f.kind.ends_trust())
            .filter_map(|f| f.seq)
            .chain(self.unplaced)
            .min()
    }

    /// The highest seq the copy holds.
    pub fn end(&self) -> Option<u64> {
        self.last.map(|(s, _)| s)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use chainship_chain::event_hash;

    /// A chain of `n` records of origin "o" as a copy holds them (shared
    /// with the other unit tests of a copy's check).
    pub(crate) fn chain(n: u64) -> Vec<String> {
        let mut prev = String::new();
        (1..=n)
            .map(|seq| {
                let (line, hash) = record(seq, &prev, &format!("{{\"n\":{seq}}}"));
                prev = hash;
                line
            })
            .collect()
    }

    /// The record of `seq` with `payload` after `prev` (its hash computed),
    /// as a copy holds it, and its hash.
    pub(crate) fn record(seq: u64, prev: &str, payload: &str) -> (String, String) {
        let h = event_hash(prev.as_bytes(), seq, b"r", b"", b"t", b"k", payload.as_bytes());
        let hash = String::from_utf8(h.to_vec()).unwrap();
        let line = serde_json::json!({"origin":"o","seq":seq,"run_id":"r","step_id":"","at":"t","type":"k","payload_json":payload,"hash":hash,"prev_hash":prev}).to_string();
        (line, hash)
    }

    /// (findings as kind and seq, last trusted seq, identical duplicates)
    type Outcome = (Vec<(Kind, Option<u64>)>, Option<u64>, u64);

    fn check(lines: &[String], heads: &[Head]) -> Outcome {
        let mut c = ExportCheck::new("o", None);
        for h in heads {
            c.add_head(*h);
        }
        for l in lines {
            c.feed_line(l.as_bytes(), &|| "copy".into());
        }
        let last = c.finish(&mut |_| None);
        (
            c.findings.iter().map(|f| (f.kind, f.seq)).collect(),
            last.map(|h| h.seq),
            c.identical_duplicates,
        )
    }

    /// Seq `seq` of `lines` as its tombstone, and a redaction set covering it.
    fn redacted(lines: &[String], seq: u64) -> (String, chainship_chain::redaction::Redactions) {
        let r = Record::parse(lines[seq as usize - 1].as_bytes()).unwrap();
        let mut tomb = Vec::new();
        r.own_tombstone().write_json(&mut tomb);
        let mut set = chainship_chain::redaction::Redactions::default();
        set.insert(
            seq,
            chainship_chain::redaction::Covered {
                hash: r.hash.as_bytes().try_into().unwrap(),
                fields: r.fields_digest(),
                statement: "redactions/x".into(),
                key: "erasure".into(),
                reason: "a token".into(),
            },
        );
        (String::from_utf8(tomb).unwrap(), set)
    }

    fn check_redacted(
        lines: &[String],
        heads: &[Head],
        set: Option<chainship_chain::redaction::Redactions>,
    ) -> (Outcome, Vec<u64>) {
        let mut c = ExportCheck::new("o", None).with_redactions(set.map(Arc::new));
        for h in heads {
            c.add_head(*h);
        }
        for l in lines {
            c.feed_line(l.as_bytes(), &|| "copy".into());
        }
        let last = c.finish(&mut |_| None);
        let found = c.findings.iter().map(|f| (f.kind, f.seq)).collect();
        ((found, last.map(|h| h.seq), c.identical_duplicates), c.redacted.clone())
    }

    #[test]
    fn a_covered_tombstone_holds_its_place_and_nothing_else_does() {
        let good = chain(10);
        let heads = [head(&good, 10)];
        let (tomb, set) = redacted(&good, 4);
        let mut copy = good.clone();
        copy[3] = tomb.clone();
        // Covered: in place, named, the head after it trusted.
        let ((found, last, _), named) = check_redacted(&copy, &heads, Some(set.clone()));
        assert_eq!((found, last, named), (vec![], Some(10), vec![4]));
        // Not covered: altered, as always.
        let ((found, _, _), named) = check_redacted(&copy, &heads, None);
        assert_eq!((found, named), (vec![(Kind::Altered, Some(4))], vec![]));
        // A payload put back beside `redacted`, or another statement named: not a tombstone.
        for (key, value) in [
            ("payload_json", "{\"tool\":\"shell.exec\"}"),
            ("redacted", "redactions/00000000000000000005"),
        ] {
            let mut forged: serde_json::Value = serde_json::from_str(&tomb).unwrap();
            forged[key] = value.into();
            copy[3] = forged.to_string();
            let ((found, _, _), named) = check_redacted(&copy, &heads, Some(set.clone()));
            assert_eq!((found, named), (vec![(Kind::Altered, Some(4))], vec![]), "{key}");
        }
        // Its type changed: the statement's fields digest no longer matches.
        let mut retyped: serde_json::Value = serde_json::from_str(&tomb).unwrap();
        retyped["type"] = "other".into();
        copy[3] = retyped.to_string();
        let ((found, _, _), named) = check_redacted(&copy, &heads, Some(set.clone()));
        assert_eq!((found, named), (vec![(Kind::Altered, Some(4))], vec![]));
        // Appended after the whole copy (a Kafka topic): accepted, the original stays first.
        let mut appended = good.clone();
        appended.push(tomb.clone());
        // (Not an identical duplicate either: it is the record's redaction.)
        let ((found, last, dups), named) = check_redacted(&appended, &heads, Some(set.clone()));
        assert_eq!((found, last, dups, named), (vec![], Some(10), 0, vec![4]));
        // Appended far later (out of the recent window) too.
        let long = chain(70_000);
        let (far, far_set) = redacted(&long, 4);
        let mut appended = long.clone();
        appended.push(far);
        let ((found, _, dups), named) = check_redacted(&appended, &[head(&long, 70_000)], Some(far_set));
        assert_eq!((found, dups, named), (vec![], 0, vec![4]));
        // A covered tombstone moved onto another seq's place is not that seq's.
        let (tomb5, _) = redacted(&good, 5);
        let mut moved = good.clone();
        moved[4] = tomb5;
        let ((found, _, _), _) = check_redacted(&moved, &heads, Some(set));
        assert_eq!(found, vec![(Kind::Altered, Some(5))]);
    }

    fn head(lines: &[String], seq: u64) -> Head {
        let r = Record::parse(lines[seq as usize - 1].as_bytes()).unwrap();
        Head::from_stored(seq, r.hash.as_bytes()).unwrap()
    }

    #[test]
    fn each_damage_is_named_with_its_seq() {
        let good = chain(10);
        let heads = [head(&good, 4), head(&good, 8)];
        assert_eq!(check(&good, &heads), (vec![], Some(8), 0));

        let mut removed = good.clone();
        removed.remove(5);
        assert_eq!(check(&removed, &heads).0, vec![(Kind::Gap, Some(6))]);

        let mut dup = good.clone();
        dup.insert(5, good[4].clone());
        assert_eq!(check(&dup, &heads), (vec![], Some(8), 1));

        // A second copy of seq 5 with another payload but the same hash
        // field: altered and a differing duplicate, never an identical one.
        let mut differing = good.clone();
        differing.insert(5, good[4].replace(r#"\"n\":5}"#, r#"\"n\":50}"#));
        let (found, last, identical) = check(&differing, &heads);
        assert_eq!(found, vec![(Kind::Altered, Some(5)), (Kind::Duplicate, Some(5))]);
        assert_eq!((last, identical), (Some(4), 0));
        // The altered copy first, the intact one second: the same.
        let mut first_altered = good.clone();
        first_altered[4] = differing[5].clone();
        first_altered.insert(5, good[4].clone());
        assert_eq!(check(&first_altered, &heads).2, 0);

        let mut swapped = good.clone();
        swapped.swap(2, 3);
        let (f, last, _) = check(&swapped, &heads);
        assert_eq!(f, vec![(Kind::Reordered, Some(3))]);
        assert_eq!(last, None, "nothing trusted at or past the first problem");

        let altered: Vec<String> = good
            .iter()
            .enumerate()
            .map(|(i, l)| {
                if i == 6 {
                    l.replace(r#"\"n\":7}"#, r#"\"n\":70}"#)
                } else {
                    l.clone()
                }
            })
            .collect();
        assert_eq!(check(&altered, &heads).0, vec![(Kind::Altered, Some(7))]);
        assert_eq!(check(&altered, &heads).1, Some(4));

        let cut = good[..6].to_vec();
        assert_eq!(check(&cut, &heads).0, vec![(Kind::Cut, Some(8))]);

        let foreign: Vec<String> = good
            .iter()
            .enumerate()
            .map(|(i, l)| {
                if i == 9 {
                    l.replace("\"origin\":\"o\"", "\"origin\":\"x\"")
                } else {
                    l.clone()
                }
            })
            .collect();
        assert_eq!(check(&foreign, &heads).0, vec![(Kind::Foreign, Some(10))]);
    }

    /// A line that is no record ends trust where it stands, not everywhere;
    /// and findings stop being kept past [`MAX_FINDINGS`], counted instead.
    #[test]
    fn junk_ends_trust_where_it_stands_and_findings_are_bounded() {
        let good = chain(10);
        let heads = [head(&good, 4), head(&good, 8)];
        let mut lines = good.clone();
        lines.push("not a record".into());
        let (found, last, _) = check(&lines, &heads);
        assert_eq!(found, vec![(Kind::Altered, None)]);
        assert_eq!(last, Some(8), "the heads before the junk line are trusted");
        let mut lines = good.clone();
        lines.insert(5, "{}".into());
        assert_eq!(check(&lines, &heads).1, Some(4));

        let mut c = ExportCheck::new("o", None);
        let foreign = good[0].replace("\"origin\":\"o\"", "\"origin\":\"x\"");
        for _ in 0..MAX_FINDINGS + 50 {
            c.feed_line(foreign.as_bytes(), &|| "copy".into());
        }
        c.close();
        assert_eq!(c.findings.len(), MAX_FINDINGS + 1);
        assert!(c.findings.iter().any(|f| f.message.contains("and 50 more finding(s)")));
    }

    #[test]
    fn heads_at_or_below_the_start_are_left_out() {
        let good = chain(10);
        let heads = [head(&good, 2), head(&good, 4), head(&good, 8)];
        let run = |after: Head| {
            let mut c = ExportCheck::new("o", Some(after));
            for h in &heads {
                c.add_head(*h);
            }
            for l in &good[4..] {
                c.feed_line(l.as_bytes(), &|| "copy".into());
            }
            let last = c.finish(&mut |_| None);
            let found: Vec<_> = c.findings.iter().map(|f| (f.kind, f.seq)).collect();
            (found, last.map(|h| h.seq), c.heads_covered())
        };
        assert_eq!(run(head(&good, 4)), (vec![], Some(8), 1), "no gap below the start");
        let wrong = Head::from_stored(4, head(&good, 3).hash_str().as_bytes()).unwrap();
        let (found, last, _) = run(wrong);
        assert_eq!(found[0], (Kind::Fork, Some(4)), "{found:?}");
        assert_eq!(last, None);
    }
}
