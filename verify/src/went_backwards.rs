//! The went-backwards rule, in one pass in seq order and bounded memory: a
//! kept note published after a note of a higher seq means the log went
//! backwards (a follower restored from an older cursor, a store rolled
//! back and written again, a clock set back).
//!
//! Notes arrive in seq order. Each is compared with the earlier notes (of
//! lower seqs) still held: those published after it are flagged. Only the
//! [`HELD`] latest-published earlier notes are held; a note published
//! before one let go is still caught, as one finding without the other's
//! name. In a healthy log every note is the latest published so far, and
//! nothing is ever flagged.

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use crate::finding::{Finding, Kind};
use chainship_anchor::store::NameKey;

/// Earlier notes held for the comparison.
pub const HELD: usize = 4096;

#[derive(Debug, Default)]
pub struct WentBackwards {
    /// Earlier notes not yet flagged, by publication (ms), seq and name.
    held: BTreeSet<(u64, u64, NameKey)>,
    /// Notes of the current seq: compared only with lower seqs.
    same_seq: Vec<(u64, u64, NameKey)>,
    /// The latest publication among the notes let go.
    let_go: Option<u64>,
    pub findings: Vec<Finding>,
}

fn time(ms: u64) -> String {
    humantime::format_rfc3339_millis(SystemTime::UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

impl WentBackwards {
    /// A trusted note of `seq` published at `ms` (notes in seq order).
    pub fn note(&mut self, seq: u64, ms: u64, key: NameKey) {
        if self.same_seq.first().is_some_and(|(s, _, _)| *s != seq) {
            for (s, at, k) in std::mem::take(&mut self.same_seq) {
                self.held.insert((at, s, k));
            }
            while self.held.len() > HELD {
                let first = self.held.pop_first().expect("more than HELD");
                self.let_go = self.let_go.max(Some(first.0));
            }
        }
        // Every held note published after this one went backwards against it.
        let later: Vec<(u64, u64, NameKey)> = self
            .held
            .range((ms + 1, 0, NameKey { seq: 0, beside: 0 })..)
            .copied()
            .collect();
        for (at, s, k) in later {
            self.held.remove(&(at, s, k));
            self.findings.push(Finding {
                kind: Kind::HeadsDisagree,
                seq: Some(s),
                message: format!(
                    "head at seq {s} ({}) published {} has a lower seq than the head at seq {seq} ({}) published earlier ({}): the log went backwards",
                    k.note_name(),
                    time(at),
                    key.note_name(),
                    time(ms)
                ),
                source: Some(k.note_name()),
                expected: None,
                found: None, remedy: None, });
        }
        if let Some(gone) = self.let_go.filter(|gone| *gone > ms) {
            self.findings.push(Finding {
                kind: Kind::HeadsDisagree,
                seq: Some(seq),
                message: format!(
                    "head at seq {seq} ({}) published {} was published before a head of a lower seq (published {}, more than {HELD} notes back): the log went backwards",
                    key.note_name(),
                    time(ms),
                    time(gone)
                ),
                source: Some(key.note_name()),
                expected: None,
                found: None, remedy: None, });
            self.let_go = None;
        }
        self.same_seq.push((seq, ms, key));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(seq: u64) -> NameKey {
        NameKey { seq, beside: 0 }
    }

    fn flagged(notes: &[(u64, u64)]) -> Vec<u64> {
        let mut w = WentBackwards::default();
        for &(seq, ms) in notes {
            w.note(seq, ms, key(seq));
        }
        w.findings.iter().filter_map(|f| f.seq).collect()
    }

    #[test]
    fn a_note_published_after_a_higher_seq_is_flagged() {
        assert_eq!(flagged(&[(1, 10), (2, 20), (3, 30)]), Vec::<u64>::new());
        // 2 was published at 40, after 3 (at 30).
        assert_eq!(flagged(&[(1, 10), (2, 40), (3, 30)]), vec![2]);
        // Notes of one seq are not compared with each other.
        assert_eq!(flagged(&[(1, 10), (2, 40), (2, 20), (3, 50)]), Vec::<u64>::new());
        // Two earlier notes undercut by one.
        assert_eq!(flagged(&[(1, 50), (2, 60), (3, 10)]), vec![1, 2]);
    }

    #[test]
    fn memory_is_bounded_and_a_note_undercutting_one_let_go_is_still_caught() {
        let mut w = WentBackwards::default();
        for seq in 1..=100_000u64 {
            w.note(seq, seq * 10, key(seq));
        }
        assert!(w.held.len() <= HELD + 1);
        assert!(w.findings.is_empty());
        // Published before seq 10 (let go long ago) was.
        w.note(100_001, 5, key(100_001));
        assert!(!w.findings.is_empty());
        assert!(
            w.findings
                .iter()
                .any(|f| f.message.contains("more than 4096 notes back")),
            "{:?}",
            w.findings
        );
    }
}
