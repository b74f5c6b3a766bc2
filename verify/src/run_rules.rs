//! The run check's verdict (`runs`): what a [`RunTally`] adds up to, as
//! the one [`Verdict`]. A check that read no event (of the run asked for)
//! is `nothing-checked`; one that could not read every event is
//! `not-whole` (its findings cover only what was read); each run finding
//! kept is `run-rule`, and those past the kept ones one more, counted.

use chainship_runs::tally::RunTally;

use crate::finding::{self, Finding, Kind};
use crate::verdict::Verdict;

/// The verdict on `tally`, given how many events of the run asked for were read.
pub fn verdict(tally: RunTally, run_events: u64) -> Verdict<RunTally> {
    let mut v = Verdict::new(());
    if tally.events == 0 || (tally.run.is_some() && run_events == 0) {
        let of_run = tally.run.as_ref().map_or(String::new(), |id| format!(" of run {id}"));
        v.findings.push(Finding::new(
            Kind::NothingChecked,
            None,
            format!("no event read{of_run}"),
        ));
    }
    if let Some((first, n)) = &tally.not_whole {
        v.findings.push(Finding::new(
            Kind::NotWhole,
            None,
            format!("{n} unreadable line(s), seq gap(s) or row(s) no seq reaches, the first: {first}"),
        ));
    }
    // A rule that could not be checked because its payload was withheld
    // found nothing either way: the check is not whole, never ok.
    if tally.content_redacted_count > 0 {
        let first = tally
            .content_redacted
            .first()
            .map_or(String::new(), |f| format!(", the first: {f}"));
        v.findings.push(Finding::new(
            Kind::NotWhole,
            tally.content_redacted.first().map(|f| f.seq),
            format!(
                "{} rule check(s) could not be made: the payloads they need were withheld (redacted){first}",
                tally.content_redacted_count
            ),
        ));
    }
    v.findings.extend(tally.findings.iter().map(finding::run_rule));
    let more = tally.relevant().saturating_sub(tally.findings.len() as u64);
    if more > 0 {
        v.findings
            .push(Finding::new(Kind::RunRule, None, format!("{more} more run finding(s)")));
    }
    v.map(|()| tally)
}

/// What the verdict is called in `runs --json`'s `status`.
pub fn status(v: &Verdict<RunTally>) -> &'static str {
    match v.findings.first().map(|f| f.kind) {
        None => "ok",
        Some(Kind::NothingChecked) => "nothing checked",
        Some(Kind::NotWhole) => "not whole",
        Some(_) => "findings",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tally_of_nothing_never_passes_and_part_of_the_events_is_not_whole() {
        let empty = verdict(RunTally::new(None), 0);
        assert_eq!((empty.passed(), status(&empty)), (false, "nothing checked"));
        let mut read = RunTally::new(None);
        read.events = 10;
        let whole = verdict(read.clone(), 0);
        assert_eq!((whole.passed(), status(&whole)), (true, "ok"));
        read.not_whole("line 3: not a record".into());
        let part = verdict(read.clone(), 0);
        assert_eq!((part.passed(), status(&part)), (false, "not whole"));
        let mut withheld = RunTally::new(None);
        withheld.events = 10;
        withheld.content_redacted_count = 1;
        let v = verdict(withheld, 0);
        assert_eq!((v.passed(), status(&v)), (false, "not whole"));
        let mut one_run = RunTally::new(Some("r1".into()));
        one_run.events = 10;
        assert_eq!(
            status(&verdict(one_run, 0)),
            "nothing checked",
            "none of the run's own events read"
        );
    }
}
