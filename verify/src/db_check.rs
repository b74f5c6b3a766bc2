//! The database use case (`anchor verify`): the store listed, the database
//! walked to the highest kept seq (with its progress), every kept head and
//! checkpoint judged against it ([`crate::database`]), the runs the invalid
//! seqs touch read back, and, after a clean incremental run, the state saved.
//! One call from the CLI; it returns the one [`DbVerdict`].

use std::path::Path;
use std::time::Duration;

use chainship_anchor::AnchorStore;
use chainship_anchor::cosignature::WitnessPolicy;
use chainship_anchor::note::VerifierKey;
use chainship_chain::{Error, EventDb, OpenOptions, Setting, WalkPlan, WalkReport, walk_chain};
use chainship_runs::Touched;
use chainship_runs::affected;

use crate::database::{self, DbAudit, DbVerdict};
use crate::finding::{self, Finding, Kind};
use crate::pass::{self, StreamInput};
use crate::state;
use crate::verdict::Verdict;

/// The database to walk.
pub struct DbSource<'a> {
    pub path: &'a Path,
    pub open: &'a OpenOptions,
    /// Threads checking seq segments at once; 0: the cores available.
    pub jobs: usize,
}

/// Everything `anchor verify` judges, and how.
pub struct DbCheck<'a> {
    pub store: &'a AnchorStore,
    pub origin: &'a str,
    pub keys: &'a [VerifierKey],
    /// Witness cosignatures to hold checkpoints to, with the grace period.
    pub witness: Option<(&'a WitnessPolicy, Duration)>,
    /// `None`: the store alone (signatures, checkpoints, tiles).
    pub db: Option<DbSource<'a>>,
    /// The verify state: read first (only what was published since), saved after a clean run.
    pub state: Option<&'a Path>,
    pub max_age: Option<Duration>,
    pub allow_no_heads: bool,
    pub max_unvouched: u64,
    /// The run rules to name the runs and side effects the invalid seqs touch.
    pub touched: Option<Touched>,
    /// The keys that may authorize erasure (`--redaction-key`): rows whose
    /// payload was blanked pass where their statements cover them.
    pub redaction_keys: &'a [VerifierKey],
}

/// Runs the check (see the module doc). `progress` is told the events
/// walked and the total expected, as the walk goes.
pub fn check_database(c: DbCheck<'_>, progress: &mut dyn FnMut(u64, u64)) -> Result<DbVerdict, Error> {
    let state_error = |e: Error| e.with_setting(Setting::VerifyState);
    let since = match c.state {
        Some(path) => state::load(path, c.origin, &c.store.describe()).map_err(state_error)?,
        None => None,
    };
    let input = |since| StreamInput {
        store: c.store,
        origin: c.origin,
        keys: c.keys,
        witness: c.witness,
        since,
        every_tile: true,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::permanent(format!("cannot start the async runtime: {e}")))?;
    let listing = runtime.block_on(pass::list(&input(since.as_ref())))?;
    let redactions = runtime.block_on(crate::redactions::load(c.store, c.origin, c.redaction_keys))?;
    // The walk first (every core), then the heads and checkpoints in seq order against it.
    let walked = match &c.db {
        Some(source) => Some(walk(source, listing.highest_seq(), redactions.shared(), progress)?),
        None => None,
    };
    let judge = |input: &StreamInput<'_>, listing| {
        runtime.block_on(database::audit_database(
            &DbAudit {
                input,
                walked: walked.as_ref().map(|(r, db)| (r, db)),
                max_age: c.max_age,
                allow_no_heads: c.allow_no_heads,
                max_unvouched: c.max_unvouched,
            },
            listing,
        ))
    };
    let mut verdict = judge(&input(since.as_ref()), listing)?;
    // An incremental run that finds anything judges the whole store again:
    // damage below the state's head, or a cut, gets the exact ranges and
    // the last trusted head a full run gives.
    if let Some(state) = since.as_ref().filter(|_| !verdict.passed()) {
        let full = input(None);
        let listing = runtime.block_on(pass::list(&full))?;
        let mut whole = judge(&full, listing)?;
        // Beside it: what names the state file, and what the incremental run
        // found about a kept object the full run said nothing of (bundles
        // below the state's size are judged against the state's tree). Its
        // chain findings are the full run's to give, with their exact ranges.
        let kept = |f: &&crate::Finding| match f.source.as_deref() {
            Some(s) if s.contains(&state.source) => true,
            Some(s) => !whole
                .findings
                .iter()
                .any(|w| w.kind == f.kind && w.source.as_deref() == Some(s)),
            None => false,
        };
        let extra: Vec<_> = verdict.findings.iter().filter(kept).cloned().collect();
        whole.findings.extend(extra);
        whole.warnings.push(
            "the run found something, so every kept head and checkpoint was judged, not only those published since the state".to_owned(),
        );
        verdict = whole;
    }
    // The redaction statements, held to the database at their seqs.
    let accepted = walked.as_ref().map_or(&[][..], |(r, _)| &r.redacted[..]);
    // A row the walk passed whole still holds its payload (none without a database).
    let still_held: Vec<u64> = match &walked {
        Some((report, _)) => redactions
            .redactions
            .iter()
            .map(|(seq, _)| seq)
            .filter(|s| accepted.binary_search(s).is_err() && report.last_good.is_some_and(|g| *s <= g.seq))
            .collect(),
        None => Vec::new(),
    };
    let (found, said, redacted) = crate::redactions::judge(
        &redactions.redactions,
        &mut |seq| {
            let (_, db) = walked.as_ref()?;
            db.hash_at(seq)
                .ok()
                .flatten()
                .and_then(|h| h.as_slice().try_into().ok())
        },
        verdict.covered.audit.highest_trusted_seq(),
        (accepted, &still_held),
        "the database",
    );
    verdict
        .findings
        .extend(redactions.findings.iter().cloned().chain(found));
    verdict.warnings.extend(redactions.warnings.iter().cloned().chain(said));
    verdict.redacted = redacted;
    verdict.covered.redactions = redactions.shared();
    // What the invalid seqs touch: their runs, and side effects to reconcile.
    if let (Some(from), Some(touched), Some((_, db))) = (verdict.covered.invalid_from, c.touched, &walked) {
        verdict.touched = Some(match &verdict.ranges {
            Some(ranges) => affected::scan_ranges(db, ranges, touched),
            None => affected::scan_to_head(db, from, touched),
        });
    }
    if verdict.passed()
        && let (Some(path), Some(head)) = (c.state, verdict.last_trusted)
    {
        let published = verdict.last_trusted_published;
        runtime
            .block_on(state::save_after(
                path,
                c.store,
                c.origin,
                (head, published),
                &verdict.covered.audit,
                since.as_ref(),
            ))
            .map_err(state_error)?;
        verdict.covered.state_saved = true;
    }
    verdict.covered.since = since;
    Ok(verdict)
}

/// The walk's verdict (`verify`): the database walked by `plan`, every
/// break, damaged row, unmatched head and end not reached a finding, a walk
/// that checked nothing one too, and the runs from the first seq it could
/// not vouch for to the head, when `touched` is given.
pub fn walk_database(
    source: &DbSource<'_>,
    plan: &WalkPlan,
    touched: Option<Touched>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Verdict<WalkReport>, Error> {
    let db = EventDb::open(source.path, source.open)?;
    // Only for the progress: a head the walk cannot read is its to report.
    let total = match db.head().ok().flatten() {
        Some((head, _)) => plan.to.unwrap_or(head).min(head).saturating_sub(plan.from.max(1) - 1),
        None => 0,
    };
    progress(0, total);
    let report = walk_chain(db, plan, &mut |n| progress(n, total))?;
    let mut verdict = Verdict::new(());
    verdict.findings = finding::break_findings(&report, 0);
    let break_at = finding::break_position(&report);
    verdict.findings.extend(
        report
            .heads
            .iter()
            .filter_map(|(head, check)| finding::head_finding(head, check, None, break_at)),
    );
    if let Some(to) = report.to_not_reached {
        let end = report.last_good.map_or(0, |h| h.seq);
        verdict.findings.push(Finding::new(
            Kind::Cut,
            Some(to),
            format!("the walk was to reach seq {to}; the database ends at seq {end}"),
        ));
    }
    if report.ok() && report.checked == 0 {
        verdict.findings.push(Finding::new(
            Kind::NothingChecked,
            None,
            "no event in the range: an empty table, or a start past the head",
        ));
    }
    verdict.last_trusted = report.last_trusted_head();
    if let (Some(from), Some(touched)) = (database::walk_invalid_from(&report), touched) {
        let db = EventDb::open(source.path, source.open)?;
        verdict.touched = Some(affected::scan_to_head(&db, from, touched));
    }
    Ok(verdict.map(|()| report))
}

/// Walks the whole database (at least to `reach`, the highest kept seq),
/// keeping the tree's groups for the checkpoints' roots; a second
/// connection for the lookups after it.
fn walk(
    source: &DbSource<'_>,
    reach: u64,
    redactions: Option<std::sync::Arc<chainship_chain::redaction::Redactions>>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(WalkReport, EventDb), Error> {
    let db = EventDb::open(source.path, source.open)?;
    // Only for the progress: a head the walk cannot read is its to report.
    let total = db.head().ok().flatten().map_or(0, |(s, _)| s);
    progress(0, total);
    let lookup = EventDb::open(source.path, source.open)?;
    let report = walk_chain(
        db,
        &WalkPlan {
            from: 1,
            reach: Some(reach),
            tree: true,
            jobs: source.jobs,
            redactions,
            ..WalkPlan::default()
        },
        &mut |n| progress(n, total),
    )?;
    Ok((report, lookup))
}
