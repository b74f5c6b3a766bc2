//! The `evidence` use case: choose the checkpoint, collect the run's
//! records from a database or a checked copy, build the bundle beside its
//! destination, check it, and place it there only when it proves every
//! record (the run's own findings are its content, not a refusal).

use std::path::{Path, PathBuf};

use chainship_chain::{Error, EventDb, Setting, permanent};
use chainship_verify::Verdict;
use tokio::runtime::Runtime;

use super::build::{self, BuildInput, Collector};
use super::check::EvidenceReport;
use crate::copy::{self, CopyExpectations, CopyInput, CopyOutcome};

/// Where the run's records are read from.
pub enum Source<'a> {
    /// The database: the run's rows and the checkpoint's newest, proven by
    /// the store's tiles; with `walk` (always with gaps), every event up to
    /// the checkpoint, so damage anywhere before it refuses the bundle.
    Database { db: &'a EventDb, walk: bool },
    /// An exported copy, checked as `verify-export` checks it as it is read.
    Copy(&'a CopyInput<'a>),
}

/// What became of the bundle.
pub enum Made {
    /// The copy is not evidence: its verdict; nothing was written.
    CopyRefused(Box<CopyOutcome>),
    /// The bundle's verdict: placed at `out` when it passed, else removed.
    Checked(Box<Verdict<EvidenceReport>>),
}

/// The files a bundle for `out` is built in before it is placed: what an
/// interruption must remove.
pub fn temporary_paths(out: &Path) -> [PathBuf; 2] {
    [build::partial_path(out), super::files::tar_temp_path(out)]
}

/// Makes the evidence of `run` at `out` (a new directory, or FILE.tar).
pub fn make(
    runtime: &Runtime,
    run: &str,
    with_gaps: bool,
    source: Source<'_>,
    input: &BuildInput<'_>,
    out: &Path,
) -> Result<Made, Error> {
    let chosen = runtime.block_on(build::choose_checkpoint(
        input.store,
        input.origin,
        input.check.keys,
        input.check.witnesses,
    ))?;
    let redactions = runtime.block_on(chainship_verify::redactions::load(
        input.store,
        input.origin,
        input.check.redaction_keys,
    ))?;
    let mut collected = Collector::new(run, chosen.size, with_gaps).with_redactions(redactions.shared());
    match source {
        Source::Database { db, walk } if walk || with_gaps => build::read_database(db, input.origin, &mut collected)?,
        Source::Database { db, .. } => {
            collected = collected.run_only();
            build::read_run(db, input.origin, run, &mut collected)?
        }
        Source::Copy(copy) => {
            // The statements read above: judged with the copy, not read again.
            let outcome = copy::read_checked_with(copy, CopyExpectations::default(), redactions, &mut |r| {
                collected.take(r)
            })?;
            if !outcome.passed() {
                return Ok(Made::CopyRefused(Box::new(outcome)));
            }
        }
    }
    if collected.later > 0 {
        return Err(permanent!(
            "run {run}: {} of its events come after checkpoint {}, the newest usable one: write its evidence once a later checkpoint covers them",
            collected.later,
            chosen.size
        ));
    }
    // Without a redaction key the statements are not read, and a withheld
    // payload the source still holds would travel in the bundle: refused.
    if input.check.redaction_keys.is_empty() {
        let names = runtime.block_on(
            input
                .store
                .list_names(input.origin, chainship_anchor::store::REDACTIONS_DIR),
        )?;
        let redacted: std::collections::BTreeSet<u64> = names
            .iter()
            .filter_map(|n| chainship_anchor::redaction::seq_of_name(n))
            .collect();
        let hit: Vec<String> = collected
            .seqs()
            .filter(|s| redacted.contains(s))
            .map(|s| s.to_string())
            .collect();
        if !hit.is_empty() {
            return Err(permanent!(
                "seq(s) {} of the bundle have redaction statements in {}: give --redaction-key, so their withheld payloads stay out of the bundle",
                hit.join(", "),
                input.store.describe()
            ));
        }
    }
    if out.exists() {
        return Err(permanent!("{}: exists", out.display()).with_setting(Setting::Out));
    }
    if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty() && !p.is_dir()) {
        return Err(permanent!(
            "{}: its directory {} does not exist (create it first)",
            out.display(),
            parent.display()
        )
        .with_setting(Setting::Out));
    }
    let partial = build::partial_path(out);
    let verdict = match runtime.block_on(build::write(&partial, collected, &chosen, input)) {
        Ok(report) => report.verdict(false),
        Err(e) => {
            let _ = std::fs::remove_dir_all(&partial);
            return Err(e);
        }
    };
    if verdict.passed() {
        build::place(&partial, out)?;
    } else {
        let _ = std::fs::remove_dir_all(&partial);
    }
    Ok(Made::Checked(Box::new(verdict)))
}
