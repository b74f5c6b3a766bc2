//! Exact invalid ranges: after a break, which seqs are invalid and which
//! are vouched for again.
//!
//! A kept head (or a checkpoint's leaf) vouches for the stored hash at its
//! seq, and through the chain for every stored hash before it that links
//! up to it: a row whose fields and previous stored hash give its stored
//! hash. So row `s` is valid exactly when some anchor `a >= s` has every
//! row of `s..=a` present and linked. A break does not end trust for good:
//! past it, the stored hashes that link to a later anchor are vouched
//! again. What is left is named precisely:
//!
//! - `altered`: a row that does not link (its fields or its predecessor's
//!   stored hash changed, or its predecessor is missing);
//! - `missing`: seqs no row holds;
//! - `unvouched`: rows that link, but to no anchor before the next break
//!   (they may be intact, or rewritten with the hashes recomputed up to the
//!   break: nothing can tell, so they are not evidence). A last stretch
//!   with no anchor at all is open-ended; one past the last anchor of a
//!   stretch that has one is the ordinary unanchored tail, not a finding;
//! - `rewritten`: rows that link up to a stored hash a kept head contradicts
//!   (signed another hash at that seq): a consistent rewrite, or another
//!   history. Rows linked after the contradicted one are on it too, to the
//!   next break (open-ended when none comes).
//!
//! [`RangeClassifier`] is fed the rows in seq order with two facts each
//! (linked, and whether an anchor vouches for or contradicts its stored
//! hash) and holds a few numbers, whatever the range's size.

/// What is wrong with a range of seqs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum RangeKind {
    Altered,
    Missing,
    Unvouched,
    Rewritten,
    /// A copy's record that came after later seqs (intact, out of place).
    Reordered,
}

impl RangeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RangeKind::Altered => "altered",
            RangeKind::Missing => "missing",
            RangeKind::Unvouched => "unvouched",
            RangeKind::Rewritten => "rewritten",
            RangeKind::Reordered => "reordered",
        }
    }
}

/// One invalid range, `from..=to`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidRange {
    pub kind: RangeKind,
    pub from: u64,
    pub to: u64,
    /// The anchor that vouches again for what follows (its seq), if one does.
    pub anchored_by: Option<u64>,
    /// For `unvouched`: open-ended, no anchor after it at all.
    pub open: bool,
}

/// What vouches for a row's stored hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vouch {
    Nothing,
    /// A kept head, or a trusted checkpoint's leaf, holds this hash.
    Anchor,
    /// A kept head holds another hash at this seq (and none holds this one).
    Contradicted,
}

/// The linked rows since the last break: `start..` with its last anchor.
#[derive(Clone, Copy, Debug)]
struct Stretch {
    start: u64,
    last_anchor: Option<u64>,
    /// Linked up to a contradicted hash: rewritten from `start` on.
    rewritten: bool,
    /// The `rewritten` range the contradiction put in `out`: withdrawn if an
    /// anchor turns up further along the same links (the contradicting head
    /// was the forgery, two signed heads disagreeing).
    rewritten_range: Option<usize>,
}

/// Classifies rows fed in seq order (see the module doc).
#[derive(Debug, Default)]
pub struct RangeClassifier {
    prev: Option<u64>,
    stretch: Option<Stretch>,
    /// Ranges found; `anchored_by` is filled in when the next anchor comes.
    out: Vec<InvalidRange>,
    /// The first range in `out` still waiting for its next anchor.
    waiting_from: usize,
}

impl RangeClassifier {
    /// A classifier that starts after row `after` (trusted: an anchor, or
    /// seq 0 before the first row).
    pub fn after(after: u64) -> Self {
        RangeClassifier {
            prev: Some(after),
            stretch: Some(Stretch {
                start: after.saturating_add(1),
                last_anchor: Some(after),
                rewritten: false,
                rewritten_range: None,
            }),
            ..Default::default()
        }
    }

    /// Ranges found so far.
    pub fn ranges(&self) -> &[InvalidRange] {
        &self.out
    }

    /// The last row the current stretch's anchor vouches for (with all it
    /// links back to): the rows after it, if any, are vouched by nothing yet.
    pub fn anchored_through(&self) -> Option<u64> {
        self.stretch.and_then(|s| s.last_anchor)
    }

    /// Row `seq`: whether it links to the row before it (which must be
    /// `seq - 1`), and what vouches for its stored hash.
    pub fn row(&mut self, seq: u64, linked: bool, vouch: Vouch) {
        let prev = self.prev.unwrap_or(0);
        if seq > prev.saturating_add(1) {
            self.close(prev);
            self.push(RangeKind::Missing, prev.saturating_add(1), seq - 1);
        }
        let linked = linked && seq == prev.saturating_add(1);
        if !linked {
            if seq == prev.saturating_add(1) {
                self.close(prev);
            }
            self.push(RangeKind::Altered, seq, seq);
            self.stretch = Some(Stretch {
                start: seq.saturating_add(1),
                last_anchor: None,
                rewritten: vouch == Vouch::Contradicted,
                rewritten_range: None,
            });
        }
        self.vouched(seq, linked, vouch);
        self.prev = Some(seq);
    }

    /// Row `seq` after rows missing before it (which [`RangeClassifier::row`]
    /// would call altered: nothing to link to), whose own fields give its
    /// stored hash after the predecessor hash it names (a copy's record
    /// names it). Its hash commits to its fields and that predecessor, so
    /// it starts a new stretch, valid once an anchor vouches for it.
    pub fn resume(&mut self, seq: u64, vouch: Vouch) {
        let prev = self.prev.unwrap_or(0);
        self.close(prev);
        if seq > prev.saturating_add(1) {
            self.push(RangeKind::Missing, prev.saturating_add(1), seq - 1);
        }
        self.stretch = Some(Stretch {
            start: seq,
            last_anchor: None,
            rewritten: false,
            rewritten_range: None,
        });
        self.vouched(seq, true, vouch);
        self.prev = Some(seq);
    }

    /// Row `seq` whose fields nothing can check: its predecessor is missing,
    /// or its predecessor's stored hash is not vouched for, and no entry of
    /// the log gives the hash before it (a database row names no
    /// predecessor). It is not vouched for itself; the rows after it link to
    /// its stored hash, vouched for when `vouch` is an anchor.
    pub fn unchecked(&mut self, seq: u64, vouch: Vouch) {
        let prev = self.prev.unwrap_or(0);
        self.close(prev);
        if seq > prev.saturating_add(1) {
            self.push(RangeKind::Missing, prev.saturating_add(1), seq - 1);
        }
        self.push(RangeKind::Unvouched, seq, seq);
        self.stretch = Some(Stretch {
            start: seq.saturating_add(1),
            last_anchor: (vouch == Vouch::Anchor).then_some(seq),
            rewritten: false,
            rewritten_range: None,
        });
        self.prev = Some(seq);
    }

    /// A second row at `seq`, the row just fed: a table that holds two rows
    /// for one event holds something the chain does not (a copy's second
    /// record has its own finding instead).
    pub fn second_row(&mut self, seq: u64) {
        if self.out.last().is_some_and(|r| r.from <= seq && seq <= r.to) {
            return;
        }
        self.push(RangeKind::Altered, seq, seq);
    }

    /// What vouches for row `seq` (linked to the row before it, or not).
    fn vouched(&mut self, seq: u64, linked: bool, vouch: Vouch) {
        match vouch {
            Vouch::Anchor => {
                if let Some(s) = self.stretch.as_mut().filter(|_| linked) {
                    s.last_anchor = Some(seq);
                    if s.rewritten {
                        s.rewritten = false;
                        if let Some(i) = s.rewritten_range.take().filter(|i| *i + 1 == self.out.len()) {
                            self.out.truncate(i);
                            self.waiting_from = self.waiting_from.min(i);
                        }
                    }
                }
                self.anchored(seq);
            }
            Vouch::Contradicted if linked => {
                // Everything since the stretch's last anchor links up to it.
                let mut range = None;
                if let Some(s) = self.stretch.take() {
                    let from = s.last_anchor.map_or(s.start, |a| a.saturating_add(1));
                    let kind = RangeKind::Rewritten;
                    if s.rewritten {
                        self.push(kind, s.start, seq);
                        range = s.rewritten_range;
                    } else if from <= seq {
                        self.push(kind, from, seq);
                        range = Some(self.out.len() - 1);
                    }
                }
                self.stretch = Some(Stretch {
                    start: seq.saturating_add(1),
                    last_anchor: None,
                    rewritten: true,
                    rewritten_range: range,
                });
            }
            _ => {}
        }
    }

    /// Ends the stretch before a break at `prev + 1`: what follows its last
    /// anchor is unvouched (rewritten, on a contradicted stretch).
    fn close(&mut self, prev: u64) {
        if let Some(s) = self.stretch.take() {
            if s.rewritten {
                if s.start <= prev {
                    self.push(RangeKind::Rewritten, s.start, prev);
                }
                return;
            }
            let from = s.last_anchor.map_or(s.start, |a| a.saturating_add(1));
            if from <= prev {
                self.push(RangeKind::Unvouched, from, prev);
            }
        }
    }

    /// Adds a range, merging it into the last one when they touch and agree
    /// (and no anchor came between them).
    fn push(&mut self, kind: RangeKind, from: u64, to: u64) {
        if let Some(last) = self.out.last_mut()
            && last.kind == kind
            && last.to.saturating_add(1) == from
            && last.anchored_by.is_none()
        {
            last.to = to;
            return;
        }
        self.out.push(InvalidRange {
            kind,
            from,
            to,
            anchored_by: None,
            open: false,
        });
    }

    /// An anchor at `seq`: the ranges that end before it are followed by it
    /// (ranges are in seq order, so those are the first still waiting).
    fn anchored(&mut self, seq: u64) {
        while let Some(r) = self.out.get_mut(self.waiting_from).filter(|r| r.to < seq) {
            r.anchored_by = Some(seq);
            self.waiting_from += 1;
        }
    }

    /// Ends the classification at the last row fed: a last stretch with no
    /// anchor, after a break, is open-ended `unvouched`; one on a
    /// contradicted hash, open-ended `rewritten`.
    pub fn finish(mut self) -> Vec<InvalidRange> {
        let prev = self.prev.unwrap_or(0);
        if let Some(s) = self.stretch.take()
            && s.last_anchor.is_none()
            && s.start <= prev
            && (s.rewritten || !self.out.is_empty())
        {
            let kind = if s.rewritten {
                RangeKind::Rewritten
            } else {
                RangeKind::Unvouched
            };
            self.push(kind, s.start, prev);
            if let Some(last) = self.out.last_mut() {
                last.open = true;
            }
        }
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_seq_is_classified_without_overflow() {
        let mut c = RangeClassifier::after(0);
        for seq in 1..=3 {
            c.row(seq, true, Vouch::Anchor);
        }
        c.row(u64::MAX, false, Vouch::Nothing);
        c.resume(u64::MAX, Vouch::Nothing);
        let kinds: Vec<(RangeKind, u64, u64)> = c.ranges().iter().map(|r| (r.kind, r.from, r.to)).collect();
        assert_eq!(
            kinds[..2],
            [
                (RangeKind::Missing, 4, u64::MAX - 1),
                (RangeKind::Altered, u64::MAX, u64::MAX)
            ]
        );
    }

    /// The rows of a chain 1..=n after tampering, with anchors: what the
    /// classifier is fed, computed by brute force from the definition.
    struct Case {
        /// `(seq, content)` of the rows present, in seq order; content is
        /// what the row holds, `orig` what it held.
        rows: Vec<(u64, u64)>,
        /// The stored "hash" of each row present: a function of its content
        /// and its predecessor's stored hash, unless rewritten.
        stored: Vec<u64>,
        anchors: Vec<u64>,
        /// Heads whose seq holds another hash than theirs.
        contradicted: Vec<u64>,
    }

    fn h(prev: u64, seq: u64, content: u64) -> u64 {
        // Any injective-enough mix stands in for SHA-256 here.
        let mut x = prev ^ seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ content.wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x ^= x >> 31;
        x.wrapping_mul(0x94D0_49BB_1331_11EB) | 1
    }

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// A random chain of up to 40 rows, tampered at random: contents
    /// changed (hash kept), rows deleted, stretches rewritten with their
    /// hashes recomputed, two rows swapped; anchors at random original seqs.
    fn case(rng: &mut Rng) -> Case {
        let n = 1 + rng.below(40);
        let mut content: Vec<u64> = (1..=n).collect();
        let mut stored = Vec::new();
        let mut prev = 0;
        for seq in 1..=n {
            prev = h(prev, seq, content[seq as usize - 1]);
            stored.push(prev);
        }
        let original = stored.clone();
        let mut present = vec![true; n as usize];
        for _ in 0..rng.below(4) {
            let at = rng.below(n) as usize;
            match rng.below(4) {
                0 => content[at] += 1000,
                1 => present[at] = false,
                2 => {
                    // A consistent rewrite of at..=end_of_stretch.
                    let end = (at + 1 + rng.below(6) as usize).min(n as usize);
                    let mut p = if at == 0 { 0 } else { stored[at - 1] };
                    for i in at..end {
                        content[i] += 5000;
                        p = h(p, i as u64 + 1, content[i]);
                        stored[i] = p;
                    }
                }
                _ => {
                    let other = rng.below(n) as usize;
                    content.swap(at, other);
                }
            }
        }
        let mut heads: Vec<u64> = (0..rng.below(6)).map(|_| 1 + rng.below(n)).collect();
        heads.sort_unstable();
        heads.dedup();
        // A head vouches for the original hash: an anchor where the row
        // present holds that hash, a contradiction where it holds another.
        let holds = |a: &u64| present[*a as usize - 1] && stored[*a as usize - 1] == original[*a as usize - 1];
        let anchors = heads.iter().copied().filter(holds).collect();
        let contradicted = heads
            .iter()
            .copied()
            .filter(|a| present[*a as usize - 1] && !holds(a))
            .collect();
        let rows = (1..=n)
            .filter(|s| present[*s as usize - 1])
            .map(|s| (s, content[s as usize - 1]))
            .collect();
        let stored = (1..=n)
            .filter(|s| present[*s as usize - 1])
            .map(|s| stored[s as usize - 1])
            .collect();
        Case {
            rows,
            stored,
            anchors,
            contradicted,
        }
    }

    /// Whether each row links to the one before it, as the walk decides it.
    fn linked(c: &Case) -> Vec<bool> {
        (0..c.rows.len())
            .map(|i| {
                let (seq, content) = c.rows[i];
                let (prev_seq, prev_hash) = if i == 0 {
                    (0, 0)
                } else {
                    (c.rows[i - 1].0, c.stored[i - 1])
                };
                prev_seq + 1 == seq && h(prev_hash, seq, content) == c.stored[i]
            })
            .collect()
    }

    /// The definition itself: row `s` is valid when some anchor `a >= s`
    /// has every row of `s..=a` present and linked.
    fn valid_by_definition(c: &Case, links: &[bool]) -> Vec<bool> {
        (0..c.rows.len())
            .map(|i| {
                c.anchors.iter().any(|&a| {
                    let Some(j) = c.rows.iter().position(|r| r.0 == a) else {
                        return false;
                    };
                    j >= i && (i..=j).all(|k| links[k])
                })
            })
            .collect()
    }

    #[test]
    fn the_ranges_are_exactly_the_rows_no_anchor_vouches_for() {
        let mut rng = Rng(0x5EED_1234_ABCD_0001);
        for round in 0..20_000 {
            let c = case(&mut rng);
            let links = linked(&c);
            let valid = valid_by_definition(&c, &links);
            let mut k = RangeClassifier::after(0);
            for (i, (seq, _)) in c.rows.iter().enumerate() {
                let vouch = if c.anchors.contains(seq) {
                    Vouch::Anchor
                } else if c.contradicted.contains(seq) {
                    Vouch::Contradicted
                } else {
                    Vouch::Nothing
                };
                k.row(*seq, links[i], vouch);
            }
            let ranges = k.finish();
            let in_range = |s: u64| ranges.iter().find(|r| r.from <= s && s <= r.to);
            let last_anchor = c
                .anchors
                .last()
                .copied()
                .unwrap_or(0)
                .max(c.contradicted.last().copied().unwrap_or(0));
            let broke = links.iter().any(|l| !l) || c.rows.last().is_some_and(|r| r.0 as usize != c.rows.len());
            for (i, (seq, _)) in c.rows.iter().enumerate() {
                let named = in_range(*seq);
                if valid[i] {
                    assert!(
                        named.is_none(),
                        "round {round}: valid seq {seq} named {named:?}; {ranges:?}"
                    );
                } else if *seq <= last_anchor || broke && !links[i] {
                    // Not vouched below an anchor, or a row that does not link: named.
                    assert!(
                        named.is_some(),
                        "round {round}: invalid seq {seq} not named; {ranges:?}"
                    );
                }
                if let Some(r) = named {
                    if links[i] {
                        assert!(
                            matches!(r.kind, RangeKind::Unvouched | RangeKind::Rewritten),
                            "round {round}: seq {seq}: {ranges:?}"
                        );
                    } else {
                        assert_eq!(r.kind, RangeKind::Altered, "round {round}: seq {seq}: {ranges:?}");
                    }
                }
                // Not vouched, and linked up to a contradicted hash: rewritten.
                let reaches_contradiction = !valid[i]
                    && c.contradicted.iter().any(|&x| {
                        c.rows
                            .iter()
                            .position(|r| r.0 == x)
                            .is_some_and(|j| j >= i && (i..=j).all(|k| links[k]))
                    });
                if reaches_contradiction {
                    assert_eq!(
                        named.map(|r| r.kind),
                        Some(RangeKind::Rewritten),
                        "round {round}: seq {seq}: {ranges:?}"
                    );
                }
            }
            // Missing seqs are named missing; nothing else is.
            let present: Vec<u64> = c.rows.iter().map(|r| r.0).collect();
            let top = present.last().copied().unwrap_or(0);
            for s in 1..=top {
                let named = in_range(s);
                if !present.contains(&s) {
                    assert_eq!(
                        named.map(|r| r.kind),
                        Some(RangeKind::Missing),
                        "round {round}: seq {s}: {ranges:?}"
                    );
                }
            }
            // Each range's anchor is the first anchor after it.
            for r in ranges.iter().filter(|r| r.kind != RangeKind::Rewritten) {
                let next = c.anchors.iter().copied().find(|a| *a > r.to);
                if !r.open {
                    assert_eq!(r.anchored_by, next, "round {round}: {r:?} in {ranges:?}");
                }
            }
        }
    }

    #[test]
    fn one_altered_row_between_two_anchors_is_that_row_alone() {
        let mut k = RangeClassifier::after(500);
        for seq in 501..=3000 {
            // Rows up to 1499 link; 1500 does not; its hash is vouched again by
            // 3000; with every leaf an anchor (checkpoint tiles) only 1500 is named.
            k.row(seq, seq != 1500, Vouch::Anchor);
        }
        assert_eq!(
            k.finish(),
            vec![InvalidRange {
                kind: RangeKind::Altered,
                from: 1500,
                to: 1500,
                anchored_by: Some(1501),
                open: false
            }]
        );
        // With only the heads at 500 and 3000, what lies between the head at
        // 500 and the break is not vouched: 501..=1499 may have been rewritten.
        let mut k = RangeClassifier::after(500);
        for seq in 501..=3000 {
            k.row(
                seq,
                seq != 1500,
                if seq == 3000 { Vouch::Anchor } else { Vouch::Nothing },
            );
        }
        let ranges = k.finish();
        assert_eq!(
            ranges
                .iter()
                .map(|r| (r.kind, r.from, r.to, r.anchored_by))
                .collect::<Vec<_>>(),
            vec![
                (RangeKind::Unvouched, 501, 1499, Some(3000)),
                (RangeKind::Altered, 1500, 1500, Some(3000))
            ]
        );
    }

    #[test]
    fn a_forged_head_contradicting_rows_a_later_head_vouches_for_names_nothing() {
        let mut k = RangeClassifier::after(300);
        for seq in 301..=900 {
            let vouch = match seq {
                450 => Vouch::Contradicted,
                600 => Vouch::Anchor,
                _ => Vouch::Nothing,
            };
            k.row(seq, true, vouch);
        }
        assert_eq!(k.finish(), vec![]);
    }

    #[test]
    fn a_consistent_rewrite_is_rewritten_from_its_first_changed_row_to_the_end() {
        // Leaves vouch for 501..=1499 and contradict 1500 on; every row links.
        let mut k = RangeClassifier::after(500);
        for seq in 501..=3100 {
            let vouch = match seq {
                501..=1499 => Vouch::Anchor,
                1500..=3000 => Vouch::Contradicted,
                _ => Vouch::Nothing,
            };
            k.row(seq, true, vouch);
        }
        let ranges = k.finish();
        assert_eq!(
            ranges
                .iter()
                .map(|r| (r.kind, r.from, r.to, r.open))
                .collect::<Vec<_>>(),
            vec![(RangeKind::Rewritten, 1500, 3100, true)]
        );
        // Heads only: from the last head on.
        let mut k = RangeClassifier::after(500);
        for seq in 501..=3100 {
            k.row(
                seq,
                true,
                if seq == 3000 {
                    Vouch::Contradicted
                } else {
                    Vouch::Nothing
                },
            );
        }
        let ranges = k.finish();
        assert_eq!(
            ranges
                .iter()
                .map(|r| (r.kind, r.from, r.to, r.open))
                .collect::<Vec<_>>(),
            vec![(RangeKind::Rewritten, 501, 3100, true)]
        );
    }
}
