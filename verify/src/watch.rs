//! Watching one origin's copy as it grows (`chainship monitor`): each
//! record is checked as it arrives, against the record before it and
//! against every copy of its seq seen, and each trusted head as it is
//! published, against the copy's record at its seq. Nothing here waits for
//! the end of the copy: a live copy has none.
//!
//! The rules are [`crate::export`]'s, applied one record at a time:
//! a record must hash to its own hash field and name its predecessor's
//! hash; a seq seen twice with different contents is a `duplicate`; a kept
//! head the copy's record contradicts is a `fork` over the records it no
//! longer vouches for. What it keeps is the origin's own: the hashes of the
//! records no head vouches for yet (the unvouched tail, one anchor interval
//! of records), a few below, and the records that came ahead of their turn.
//!
//! The state is plain data ([`WatchState`]) so the monitor can save it and
//! a restart goes on where it stood, reading nothing it verified again.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, SystemTime};

use chainship_chain::record::Record;
use chainship_chain::{Head, HexHash, InvalidRange, PrevHash, RangeKind};
use serde::{Deserialize, Serialize};

use crate::finding::{Finding, Kind};
use crate::verdict::Verdict;

/// Hashes kept below the verified head, to compare a repeat of a recent seq
/// (a repeat further below is a finding without the comparison).
const KEPT_BELOW: u64 = 16;
/// Records held while they wait for the seqs before them, at most, and
/// their bytes at most (a flood of planted records must not take memory).
const MAX_AHEAD: usize = 4096;
const MAX_AHEAD_BYTES: usize = 16 << 20;
/// Matched heads kept, to say which is the newest below a problem.
const MATCHED_KEPT: usize = 64;
/// Missing ranges remembered.
const GAPS_KEPT: usize = 64;
/// Trusted heads past the copy's position, waiting for it.
const MAX_PENDING: usize = 64;

/// What one origin's watch covered so far.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct WatchCovered {
    /// Records read, and repeats identical to the first copy (no finding).
    pub records: u64,
    pub identical_duplicates: u64,
    /// Trusted heads compared with the copy.
    pub heads_matched: u64,
    /// The seq the watch started at (its first record): what lies below is
    /// the scheduled `verify-export`'s to check.
    pub first_seq: Option<u64>,
}

/// A record that came ahead of its turn.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
struct Ahead {
    line: String,
    place: String,
    /// Unix seconds when it came, and whether its wait was reported.
    came: u64,
    reported: bool,
    /// Its place in the order records arrived in.
    #[serde(default)]
    order: u64,
}

/// One origin's watch, as saved (see the module doc).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct WatchState {
    pub origin: String,
    /// The last record in order (`seq:hash`): the copy's position.
    pub position: Option<String>,
    /// The newest trusted head the copy's record matched.
    pub verified: Option<String>,
    /// Seq → its hash field, and `!` after it when its fields do not give
    /// it, of the records past `verified`, and [`KEPT_BELOW`] below it.
    tail: BTreeMap<u64, String>,
    /// Trusted heads past the position (`seq:hash`).
    pending: Vec<String>,
    ahead: BTreeMap<u64, Ahead>,
    /// The lowest seq of a finding that ends trust in the copy, and the
    /// newest heads the copy matched (`seq:hash`), to say which stays trusted.
    #[serde(default)]
    problem: Option<u64>,
    #[serde(default)]
    matched: Vec<String>,
    /// Seq ranges named missing (`gap`), the newest few: a record of one
    /// coming later is out of place, not delivered again.
    #[serde(default)]
    gaps: Vec<(u64, u64)>,
    pub covered: WatchCovered,
}

/// Told each record that took its place in the chain.
pub type Accepted<'a> = &'a mut dyn FnMut(&Record<'_>);

/// One origin's watch (see the module doc).
pub struct CopyWatch {
    origin: String,
    position: Option<Head>,
    verified: Option<Head>,
    /// Seq → its hash field, and whether its fields give it.
    tail: BTreeMap<u64, (HexHash, bool)>,
    /// The bytes of the records held in `ahead`.
    ahead_bytes: usize,
    pending: BTreeMap<u64, Head>,
    ahead: BTreeMap<u64, Ahead>,
    problem: Option<u64>,
    matched: VecDeque<Head>,
    gaps: VecDeque<(u64, u64)>,
    covered: WatchCovered,
    /// How long a record ahead of its turn waits before it is named.
    grace: Duration,
    /// The redactions trusted statements cover (never saved: read from the store).
    redactions: Option<std::sync::Arc<chainship_chain::redaction::Redactions>>,
}

fn hex(h: &HexHash) -> String {
    String::from_utf8_lossy(h).into_owned()
}

fn unix(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl CopyWatch {
    /// A watch of `origin` from its first record.
    pub fn new(origin: &str, grace: Duration) -> Self {
        CopyWatch {
            origin: origin.to_owned(),
            position: None,
            verified: None,
            tail: BTreeMap::new(),
            ahead_bytes: 0,
            pending: BTreeMap::new(),
            ahead: BTreeMap::new(),
            problem: None,
            matched: VecDeque::new(),
            gaps: VecDeque::new(),
            covered: WatchCovered::default(),
            grace,
            redactions: None,
        }
    }

    /// Accepts, from now on, the tombstones trusted statements cover.
    pub fn set_redactions(&mut self, redactions: Option<std::sync::Arc<chainship_chain::redaction::Redactions>>) {
        self.redactions = redactions.filter(|r| !r.is_empty());
    }

    /// A watch going on from a saved state; a state of another origin, or
    /// one that does not parse, is refused with what is wrong.
    pub fn resume(state: WatchState, grace: Duration) -> Result<Self, String> {
        let head = |text: &str| text.parse::<Head>().map_err(|e| format!("{text:?}: {e}"));
        let mut tail = BTreeMap::new();
        for (seq, text) in state.tail {
            let (hash, whole) = match text.strip_suffix('!') {
                Some(hash) => (hash, false),
                None => (text.as_str(), true),
            };
            tail.insert(seq, (head(&format!("{seq}:{hash}"))?.hash, whole));
        }
        let mut pending = BTreeMap::new();
        for p in &state.pending {
            let h = head(p)?;
            pending.insert(h.seq, h);
        }
        Ok(CopyWatch {
            origin: state.origin,
            position: state.position.as_deref().map(head).transpose()?,
            verified: state.verified.as_deref().map(head).transpose()?,
            tail,
            ahead_bytes: state.ahead.values().map(|a| a.line.len()).sum(),
            pending,
            ahead: state.ahead,
            problem: state.problem,
            matched: state.matched.iter().map(|h| head(h)).collect::<Result<_, _>>()?,
            gaps: state.gaps.into_iter().collect(),
            covered: state.covered,
            grace,
            redactions: None,
        })
    }

    /// What to save to go on from here.
    pub fn state(&self) -> WatchState {
        WatchState {
            origin: self.origin.clone(),
            position: self.position.map(|h| h.to_string()),
            verified: self.verified.map(|h| h.to_string()),
            tail: self
                .tail
                .iter()
                .map(|(seq, (h, whole))| (*seq, format!("{}{}", hex(h), if *whole { "" } else { "!" })))
                .collect(),
            pending: self.pending.values().map(|h| h.to_string()).collect(),
            ahead: self.ahead.clone(),
            problem: self.problem,
            matched: self.matched.iter().map(|h| h.to_string()).collect(),
            gaps: self.gaps.iter().copied().collect(),
            covered: self.covered.clone(),
        }
    }

    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The highest seq of the copy a trusted head vouches for, below every
    /// finding that ends trust in it (the copy's check's last trusted head).
    pub fn verified(&self) -> Option<Head> {
        match self.problem {
            None => self.verified,
            Some(p) => self.matched.iter().rev().find(|h| h.seq < p).copied(),
        }
    }

    /// Keeps a finding; one that ends trust at a seq lowers where trust ends.
    fn found(&mut self, out: &mut Vec<Finding>, f: Finding) {
        if f.kind.ends_trust()
            && let Some(seq) = f.seq
        {
            self.problem = Some(self.problem.map_or(seq, |p| p.min(seq)));
        }
        out.push(f);
    }

    /// The last record in order.
    pub fn position(&self) -> Option<Head> {
        self.position
    }

    /// The verdict so far, with `findings` (what this step found): the last
    /// trusted head, the tail no head vouches for yet, what was covered.
    pub fn verdict(&self, findings: Vec<Finding>) -> Verdict<WatchCovered> {
        let mut v = Verdict::new(self.covered.clone());
        v.ranges = Some(
            findings
                .iter()
                .filter(|f| f.kind == Kind::Fork)
                .filter_map(|f| {
                    let to = f.seq?;
                    let from = self
                        .verified
                        .filter(|h| h.seq < to)
                        .map_or(self.covered.first_seq.unwrap_or(1), |h| h.seq + 1);
                    Some(InvalidRange {
                        kind: RangeKind::Rewritten,
                        from,
                        to,
                        anchored_by: None,
                        open: false,
                    })
                })
                .collect(),
        )
        .filter(|r: &Vec<InvalidRange>| !r.is_empty());
        v.findings = findings;
        v.last_trusted = self.verified();
        v.unvouched = match (self.verified, self.position) {
            (Some(t), Some(p)) if p.seq > t.seq => Some((t.seq + 1, p.seq)),
            (None, Some(p)) => Some((self.covered.first_seq.unwrap_or(1), p.seq)),
            _ => None,
        };
        v
    }

    /// Checks one line of the copy (`place` names where it was read), and
    /// the records it let through that were waiting for it.
    pub fn feed(&mut self, line: &[u8], place: &str, now: SystemTime) -> Vec<Finding> {
        self.feed_with(line, place, now, &mut |_| {})
    }

    /// [`CopyWatch::feed`], telling `accepted` each record that took its
    /// place in the chain, in seq order (what the run check reads).
    pub fn feed_with(&mut self, line: &[u8], place: &str, now: SystemTime, accepted: Accepted<'_>) -> Vec<Finding> {
        let mut out = Vec::new();
        self.feed_one(line, place, now, &mut out, accepted, None);
        out
    }

    /// `order`: when a record held ahead came (its place among arrivals).
    fn feed_one(
        &mut self,
        line: &[u8],
        place: &str,
        now: SystemTime,
        out: &mut Vec<Finding>,
        accepted: Accepted<'_>,
        order: Option<u64>,
    ) {
        self.covered.records += 1;
        let arrived = order.unwrap_or(self.covered.records);
        let record = match Record::parse(line) {
            Ok(r) => r,
            Err(e) => {
                let seq = e.carried().map(|r| r.seq);
                self.found(
                    out,
                    Finding::new(Kind::Altered, seq, format!("{place}: not a record of the chain: {e}")),
                );
                return;
            }
        };
        if record.origin != self.origin {
            self.found(
                out,
                Finding::new(
                    Kind::Foreign,
                    Some(record.seq),
                    format!("{place}: a record of origin {:?} (seq {})", record.origin, record.seq),
                ),
            );
            return;
        }
        let (Some(hash), Some(prev)) = (
            Head::from_stored(1, record.hash.as_bytes()).map(|h| h.hash),
            PrevHash::parse(record.prev_hash.as_bytes()),
        ) else {
            self.found(
                out,
                Finding::new(
                    Kind::Altered,
                    Some(record.seq),
                    format!("{place}: seq {} has a malformed hash or prev_hash", record.seq),
                ),
            );
            return;
        };
        let mut content = record.expected_hash();
        let seq = record.seq;
        let next = self.position.map_or(seq, |p| p.seq.saturating_add(1));
        if content != hash && self.redactions.as_ref().is_some_and(|r| r.accepts_record(&record)) {
            // A tombstone a trusted statement covers: its hash stands for its content.
            content = hash;
            if record.is_tombstone() && seq < next && self.tail.get(&seq).is_none_or(|(h, _)| *h == hash) {
                // Appended after the record it stands for (a Kafka copy).
                return;
            }
        }
        if self.position.is_none() {
            self.covered.first_seq = Some(seq);
        }
        if seq < next || self.position.is_some_and(|p| p.seq == u64::MAX) {
            self.repeat(seq, hash, content, place, out);
            return;
        }
        if seq > next {
            self.hold(seq, line, place, now, out, arrived);
            return;
        }
        if content != hash {
            let mut f = Finding::new(
                Kind::Altered,
                Some(seq),
                format!("{place}: seq {seq} does not hash to its own hash field"),
            );
            if content != [0; 64] {
                f.expected = Some(hex(&content));
            }
            f.found = Some(hex(&hash));
            self.found(out, f);
        }
        if let Some(p) = self.position.filter(|p| p.hash[..] != *prev.as_bytes()) {
            let mut f = Finding::new(
                Kind::Altered,
                Some(seq),
                format!("{place}: seq {seq}'s prev_hash is not seq {}'s hash", p.seq),
            );
            f.expected = Some(hex(&p.hash));
            f.found = Some(record.prev_hash.to_string());
            self.found(out, f);
        }
        // It holds its place either way, as in the copy's check.
        accepted(&record);
        self.position = Some(Head::new(seq, hash));
        self.tail.insert(seq, (hash, content == hash));
        if let Some(head) = self.pending.remove(&seq) {
            self.compare(head, out);
        }
        // Whatever was waiting for it.
        if let Some(waiting) = self.take_ahead(seq + 1) {
            // It came before this one: out of place (a copy has one order).
            if waiting.order < arrived {
                self.found(
                    out,
                    Finding::new(
                        Kind::Reordered,
                        Some(seq + 1),
                        format!("{}: seq {} came before seq {seq} ({place})", waiting.place, seq + 1),
                    ),
                );
            }
            self.covered.records -= 1;
            self.feed_one(
                waiting.line.as_bytes(),
                &waiting.place,
                now,
                out,
                accepted,
                Some(waiting.order),
            );
        }
    }

    /// A seq at or below the position: identical to the copy seen, or a finding.
    fn repeat(&mut self, seq: u64, hash: HexHash, content: HexHash, place: &str, out: &mut Vec<Finding>) {
        match self.tail.get(&seq) {
            // Identical only if both copies' fields give the one hash field.
            Some((h, whole)) if *h == hash && *whole && content == hash => self.covered.identical_duplicates += 1,
            Some((h, _)) => {
                let mut f = Finding::new(
                    Kind::Duplicate,
                    Some(seq),
                    format!("{place}: seq {seq} delivered again with different contents"),
                );
                if *h != hash {
                    f.expected = Some(hex(h));
                    f.found = Some(hex(&hash));
                }
                self.found(out, f);
            }
            None if self.gaps.iter().any(|(a, b)| *a <= seq && seq <= *b) => self.found(
                out,
                Finding::new(
                    Kind::Reordered,
                    Some(seq),
                    format!("{place}: seq {seq} came after later seqs, once it had been named missing"),
                ),
            ),
            None if self.covered.first_seq.is_some_and(|f| seq < f) => {
                // Below where the watch started: what it has not seen, it cannot compare.
                self.found(
                    out,
                    Finding::new(
                        Kind::Reordered,
                        Some(seq),
                        format!(
                            "{place}: seq {seq} came after seq {}, long after its turn",
                            self.position.map_or(0, |p| p.seq)
                        ),
                    ),
                );
            }
            None => self.found(
                out,
                Finding::new(
                    Kind::Duplicate,
                    Some(seq),
                    format!(
                        "{place}: seq {seq} delivered again, far below the copy's position {} (verified through {})",
                        self.position.map_or(0, |p| p.seq),
                        self.verified.map_or(0, |h| h.seq)
                    ),
                ),
            ),
        }
    }

    /// A record ahead of its turn waits for the seqs before it.
    fn hold(&mut self, seq: u64, line: &[u8], place: &str, now: SystemTime, out: &mut Vec<Finding>, order: u64) {
        if let Some(earlier) = self.ahead.get(&seq) {
            if earlier.line.as_bytes() != line {
                self.found(
                    out,
                    Finding::new(
                        Kind::Duplicate,
                        Some(seq),
                        format!(
                            "{place}: seq {seq} delivered twice with different contents (first at {})",
                            earlier.place
                        ),
                    ),
                );
            } else {
                self.covered.identical_duplicates += 1;
            }
            return;
        }
        if self.ahead.len() >= MAX_AHEAD || self.ahead_bytes + line.len() > MAX_AHEAD_BYTES {
            self.found(
                out,
                Finding::new(
                    Kind::Reordered,
                    Some(seq),
                    format!(
                        "{place}: seq {seq} came while {} later records wait for seq {} (no room to hold it)",
                        self.ahead.len(),
                        self.position.map_or(1, |p| p.seq + 1)
                    ),
                ),
            );
            return;
        }
        self.ahead_bytes += line.len();
        self.ahead.insert(
            seq,
            Ahead {
                line: String::from_utf8_lossy(line).into_owned(),
                place: place.to_owned(),
                came: unix(now),
                reported: false,
                order,
            },
        );
    }

    fn take_ahead(&mut self, seq: u64) -> Option<Ahead> {
        let waiting = self.ahead.remove(&seq)?;
        self.ahead_bytes -= waiting.line.len();
        Some(waiting)
    }

    /// A trusted head (the store's pass trusted it), compared with the
    /// copy's record at its seq now, or when the copy reaches it.
    pub fn trusted_head(&mut self, head: Head) -> Vec<Finding> {
        let mut out = Vec::new();
        if self.verified.is_some_and(|v| head.seq <= v.seq) {
            return out;
        }
        match self.position {
            Some(p) if head.seq <= p.seq => self.compare(head, &mut out),
            _ => {
                self.pending.insert(head.seq, head);
                while self.pending.len() > MAX_PENDING {
                    // The chain vouches for the older ones through the newest.
                    self.pending.pop_first();
                }
            }
        }
        // A gap it proves is settled by the next [`CopyWatch::settle`].
        out
    }

    fn compare(&mut self, head: Head, out: &mut Vec<Finding>) {
        match self.tail.get(&head.seq) {
            Some((hash, _)) if *hash == head.hash => {
                self.covered.heads_matched += 1;
                self.verified = Some(head);
                self.matched.push_back(head);
                if self.matched.len() > MATCHED_KEPT {
                    self.matched.pop_front();
                }
                let keep_from = head.seq.saturating_sub(KEPT_BELOW);
                self.tail = self.tail.split_off(&keep_from);
            }
            Some((hash, _)) => {
                let from = self.verified.map_or(self.covered.first_seq.unwrap_or(1), |v| v.seq + 1);
                let mut f = Finding::new(
                    Kind::Fork,
                    Some(head.seq),
                    format!(
                        "the copy's seq {} has another hash than the kept head: seqs {from} to {} are not the log's",
                        head.seq, head.seq
                    ),
                );
                f.expected = Some(head.hash_str().to_owned());
                f.found = Some(hex(hash));
                self.found(out, f);
            }
            // Before the watch's first record: the scheduled check's to compare.
            None if self.covered.first_seq.is_none_or(|f| head.seq < f) => {}
            None => {
                let mut f = Finding::new(
                    Kind::Gap,
                    Some(head.seq),
                    format!(
                        "the copy does not hold seq {} of the kept head {head} (it holds seq {} and later)",
                        head.seq,
                        self.ahead.keys().next().map_or(head.seq + 1, |s| *s)
                    ),
                );
                f.expected = Some(head.hash_str().to_owned());
                self.found(out, f);
            }
        }
    }

    /// Records that waited past the grace: a kept head at or past the
    /// first of them says the seqs before it are gone (a `gap`), and the
    /// copy goes on from there; otherwise the first is named once (out of
    /// place, or planted), and still waits.
    pub fn settle(&mut self, now: SystemTime, out: &mut Vec<Finding>) {
        self.settle_with(now, out, &mut |_| {});
    }

    /// [`CopyWatch::settle`], telling `accepted` the records it let through.
    pub fn settle_with(&mut self, now: SystemTime, out: &mut Vec<Finding>, accepted: Accepted<'_>) {
        let Some(&first) = self.ahead.keys().next() else {
            return;
        };
        let full = self.ahead.len() >= MAX_AHEAD || self.ahead_bytes >= MAX_AHEAD_BYTES / 2;
        let next = self.position.map_or(1, |p| p.seq + 1);
        let vouched_past = self.pending.keys().next_back().is_some_and(|&h| h >= first);
        if vouched_past || full {
            let mut f = Finding::new(
                Kind::Gap,
                Some(next),
                if next + 1 == first {
                    format!("seq {next} is missing from the copy")
                } else {
                    format!("seqs {next} to {} are missing from the copy", first - 1)
                },
            );
            let waiting = self.take_ahead(first).expect("just seen");
            f.source = Some(waiting.place.clone());
            self.found(out, f);
            // Go on from the first held record, as if its predecessor were the one it names.
            if let Ok(r) = Record::parse(waiting.line.as_bytes())
                && let Some(prev) = Head::from_stored(first - 1, r.prev_hash.as_bytes())
            {
                self.position = Some(prev);
            }
            self.gaps.push_back((next, first - 1));
            if self.gaps.len() > GAPS_KEPT {
                self.gaps.pop_front();
            }
            self.covered.records -= 1;
            self.feed_one(
                waiting.line.as_bytes(),
                &waiting.place,
                now,
                out,
                accepted,
                Some(waiting.order),
            );
            for head in std::mem::take(&mut self.pending).into_values() {
                if self.position.is_some_and(|p| head.seq <= p.seq) {
                    self.compare(head, out);
                } else {
                    self.pending.insert(head.seq, head);
                }
            }
            return;
        }
        let grace = self.grace.as_secs();
        let waiting = self.ahead.get_mut(&first).expect("just seen");
        if !waiting.reported && unix(now).saturating_sub(waiting.came) >= grace {
            waiting.reported = true;
            let message = format!(
                "{}: seq {first} came, but seq {next} has not after {grace}s: out of place or planted",
                waiting.place
            );
            self.found(out, Finding::new(Kind::Reordered, Some(first), message));
        }
    }
}

#[cfg(test)]
mod tests;
