//! Proving what a sink says it holds.
//!
//! A restarted follower resumes after what its sink already holds, so
//! that claim decides which events are never sent again. Headers, object
//! names and metadata are easy to plant by anyone who can write to a
//! shared topic or bucket; the records themselves are not. So a sink reads
//! back every record it holds past the last trusted head (the cursor) and
//! feeds them here, in the order it holds them. They count as held only if
//! they are this origin's, re-hash to their own hash, link each to the one
//! before, and leave no seq out from the trusted head on. Anything else is
//! an error naming where it was found: the follower stops, it never skips.

use crate::{Error, integrity};
use std::collections::VecDeque;

use crate::head::Head;
use crate::record::Record;

/// How many recent records are remembered to tell an identical duplicate
/// (a batch resent after a crash, or an aborted transaction a broker still
/// shows) from a differing one.
const WINDOW: usize = 65_536;

pub struct HeldCheck {
    origin: String,
    after: Option<Head>,
    /// The highest record proven so far.
    last: Option<Head>,
    recent: VecDeque<Head>,
    records: u64,
}

impl HeldCheck {
    /// A check of `origin`'s records past `after` (`None`: from seq 1).
    pub fn new(origin: &str, after: Option<Head>) -> Self {
        HeldCheck {
            origin: origin.to_owned(),
            after,
            last: None,
            recent: VecDeque::new(),
            records: 0,
        }
    }

    /// The seq records must come after to be fed (0: all).
    pub fn after_seq(&self) -> u64 {
        self.after.map_or(0, |h| h.seq)
    }

    /// How many records past `after` were fed.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// What is proven held: the last record fed, or `after` when none was.
    pub fn head(&self) -> Option<Head> {
        self.last.or(self.after)
    }

    /// Feeds one record as held at `location` (an offset, an object, a
    /// line). Records at or below `after` are ignored: they are covered by
    /// the trusted head.
    pub fn feed(&mut self, json: &[u8], location: &dyn Fn() -> String) -> Result<(), Error> {
        self.feed_parsed(Record::parse(json), location)
    }

    /// [`HeldCheck::feed`] for a line the caller has parsed already.
    pub fn feed_parsed(
        &mut self,
        parsed: Result<Record<'_>, crate::record::RecordError>,
        location: &dyn Fn() -> String,
    ) -> Result<(), Error> {
        let record = parsed.map_err(|e| integrity!("{}: not a chainship record ({e})", location()))?;
        if record.origin != self.origin {
            return Err(integrity!(
                "{}: a record of origin {:?} (seq {}), not {:?}",
                location(),
                record.origin,
                record.seq,
                self.origin
            ));
        }
        if record.seq <= self.after_seq() {
            return Ok(());
        }
        let expected = record.expected_hash();
        let head = Head::from_stored(record.seq, record.hash.as_bytes())
            .filter(|h| h.hash == expected)
            .ok_or_else(|| integrity!("{}: seq {} does not hash to its own hash field", location(), record.seq))?;
        let last = self.head();
        let next = last.map_or(1, |h| h.seq + 1);
        if record.seq < next {
            return match self.recent.iter().find(|h| h.seq == record.seq) {
                Some(earlier) if *earlier == head => Ok(()),
                Some(_) => Err(integrity!(
                    "{}: seq {} is held twice with different contents",
                    location(),
                    record.seq
                )),
                None => Err(integrity!(
                    "{}: seq {} comes after seq {} and cannot be checked against its first copy",
                    location(),
                    record.seq,
                    next - 1
                )),
            };
        }
        if record.seq > next {
            let missing = if record.seq == next + 1 {
                format!("seq {next} is missing")
            } else {
                format!("seqs {next} to {} are missing", record.seq - 1)
            };
            return Err(integrity!(
                "{}: seq {} follows {}: {missing}",
                location(),
                record.seq,
                last.map_or("the start".to_owned(), |h| format!("seq {}", h.seq))
            ));
        }
        let prev = last.as_ref().map_or(&[][..], |h| &h.hash[..]);
        if record.prev_hash.as_bytes() != prev {
            return Err(integrity!(
                "{}: seq {}'s prev_hash is not the hash of seq {}",
                location(),
                record.seq,
                record.seq - 1
            ));
        }
        self.records += 1;
        self.last = Some(head);
        self.recent.push_back(head);
        if self.recent.len() > WINDOW {
            self.recent.pop_front();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event_hash;

    fn chain(n: u64, origin: &str) -> Vec<String> {
        let mut prev = String::new();
        (1..=n)
            .map(|seq| {
                let payload = format!("{{\"n\":{seq}}}");
                let h = event_hash(prev.as_bytes(), seq, b"r", b"", b"t", b"k", payload.as_bytes());
                let hash = String::from_utf8(h.to_vec()).unwrap();
                let line = serde_json::json!({"origin":origin,"seq":seq,"run_id":"r","step_id":"","at":"t","type":"k","payload_json":payload,"hash":hash,"prev_hash":prev}).to_string();
                prev = hash;
                line
            })
            .collect()
    }

    fn head_of(line: &str) -> Head {
        let r = Record::parse(line.as_bytes()).unwrap();
        Head::from_stored(r.seq, r.hash.as_bytes()).unwrap()
    }

    fn run(lines: &[String], after: Option<Head>) -> Result<Option<u64>, Error> {
        let mut check = HeldCheck::new("o", after);
        for (i, l) in lines.iter().enumerate() {
            check.feed(l.as_bytes(), &|| format!("line {}", i + 1))?;
        }
        Ok(check.head().map(|h| h.seq))
    }

    #[test]
    fn proves_a_contiguous_run_past_the_trusted_head() {
        let c = chain(10, "o");
        assert_eq!(run(&c, None), Ok(Some(10)));
        assert_eq!(run(&c, Some(head_of(&c[3]))), Ok(Some(10)));
        assert_eq!(
            run(&c[..4], Some(head_of(&c[3]))),
            Ok(Some(4)),
            "nothing past: the trusted head"
        );
        let mut dup = c.clone();
        dup.insert(7, c[5].clone());
        assert_eq!(run(&dup, None), Ok(Some(10)), "an identical duplicate is allowed");
    }

    #[test]
    fn planted_or_missing_records_are_refused() {
        let c = chain(10, "o");
        let cursor = Some(head_of(&c[3]));
        // A gap between the cursor and what the sink holds.
        let err = run(&c[6..], cursor).unwrap_err();
        assert!(err.message.contains("seqs 5 to 6 are missing"), "{err}");
        // Junk where a record should be.
        let mut junk = c[..5].to_vec();
        junk.push("junk".into());
        assert!(
            run(&junk, cursor)
                .unwrap_err()
                .message
                .contains("line 6: not a chainship record")
        );
        // A record whose hash field is right but whose content was changed.
        let mut altered = c.clone();
        altered[6] = altered[6].replace(r#"\"n\":7"#, r#"\"n\":70"#);
        assert!(
            run(&altered, cursor)
                .unwrap_err()
                .message
                .contains("seq 7 does not hash")
        );
        // Another origin's records.
        assert!(
            run(&chain(10, "x"), cursor)
                .unwrap_err()
                .message
                .contains("origin \"x\"")
        );
        // A differing duplicate.
        let mut other = chain(10, "o");
        other[5] = other[5].replace(r#""run_id":"r""#, r#""run_id":"q""#);
        let forged = Record::parse(other[5].as_bytes()).unwrap();
        let mut f = forged.clone();
        let h = f.expected_hash();
        f.hash = String::from_utf8(h.to_vec()).unwrap().into();
        let mut line = Vec::new();
        f.write_json(&mut line);
        let mut dup = c.clone();
        dup.insert(8, String::from_utf8(line).unwrap());
        assert!(
            run(&dup, cursor)
                .unwrap_err()
                .message
                .contains("seq 6 is held twice with different contents")
        );
        // A valid-looking record that does not link to the one before.
        let mut unlinked = c[..5].to_vec();
        unlinked.push(line_with_prev(&c[5], &"0".repeat(64)));
        assert!(run(&unlinked, cursor).unwrap_err().message.contains("prev_hash"));
    }

    fn line_with_prev(line: &str, prev: &str) -> String {
        let mut r = Record::parse(line.as_bytes()).unwrap().clone();
        r.prev_hash = prev.to_owned().into();
        let h = r.expected_hash();
        r.hash = String::from_utf8(h.to_vec()).unwrap().into();
        let mut out = Vec::new();
        r.write_json(&mut out);
        String::from_utf8(out).unwrap()
    }
}
