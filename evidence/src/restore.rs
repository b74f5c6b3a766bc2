//! `restore`: a new events database rebuilt from the exported copy, fed
//! the checked records of one read ([`crate::copy::read_checked`]) and
//! written only when the copy can be trusted, up to its last trusted head
//! (or past it, when asked, to the end of the checked records).
//!
//! What is put in place has been walked once more from disk, as `verify
//! --head` would walk it: what is restored is what was checked.

use std::path::{Path, PathBuf};

use chainship_chain::record::Record;
use chainship_chain::redaction::Redactions;
use chainship_chain::{Error, EventDb, Head, OpenOptions, WalkPlan, integrity, permanent, walk_chain};
use chainship_runs::affected::RecordEvent;

use chainship_runs::Touched;

use crate::copy::{self, CopyExpectations, CopyInput, CopyOutcome};
use crate::new_database::NewDatabase;
use chainship_verify::Verdict;
use chainship_verify::copy::CopyCovered;

/// A restore in progress: fed the copy's records as they are checked.
pub struct Restore {
    db: NewDatabase,
    to: Option<u64>,
    write_error: Option<Error>,
    /// The seqs trusted redaction statements cover: their rows get a
    /// placeholder payload, whatever the copy still holds.
    redactions: Option<std::sync::Arc<Redactions>>,
    placeholders: Vec<u64>,
}

pub use chainship_chain::redaction::placeholder;

/// A restore's verdict: the copy's, and what was written.
pub type RestoreVerdict = Verdict<RestoreCovered>;

/// What a restore covered: the copy, and what it wrote (`None`: refused, nothing written).
#[derive(Debug)]
pub struct RestoreCovered {
    pub copy: CopyCovered,
    pub restored: Option<Restored>,
}

/// What was restored.
#[derive(Debug, Clone)]
pub struct Restored {
    /// The rows written with a placeholder payload (redacted), ascending.
    pub placeholders: Vec<u64>,
    /// The last seq written (events 1 to it).
    pub end: u64,
    pub last_trusted: Head,
    /// Checked records after the last trusted head that were written.
    pub unanchored_written: u64,
    /// Checked records after the last trusted head that were not.
    pub unanchored_left: u64,
}

/// The restore use case: a database at `out` from the copy, read once and
/// checked as it is written (`restored` called for each record written);
/// a copy that is refused is read again for the runs and side effects its
/// invalid seqs touch, with `touched`.
pub fn restore(
    input: &CopyInput<'_>,
    out: &Path,
    to: Option<u64>,
    include_unanchored: bool,
    touched: Option<Touched>,
    restored: &mut dyn FnMut(),
) -> Result<RestoreVerdict, Error> {
    let mut restore = Restore::create(out, to)?;
    let loaded = copy::load_redactions(input)?;
    restore.redactions = loaded.shared();
    let outcome = copy::read_checked_with(input, CopyExpectations::default(), loaded, &mut |record| {
        if restore.take(record) {
            restored();
        }
    })?;
    let invalid = outcome.affected_ranges();
    let mut verdict = restore.finish(outcome, include_unanchored)?;
    if let (false, false, Some(touched)) = (verdict.passed(), invalid.is_empty(), touched) {
        verdict.touched = Some(copy::touched_in(input.source, input.origin, &invalid, touched)?);
    }
    Ok(verdict)
}

/// The verdict on a copy refused before it was read (another origin's): nothing written.
pub fn refused(outcome: CopyOutcome) -> RestoreVerdict {
    outcome.map(|copy| RestoreCovered { copy, restored: None })
}

impl Restore {
    /// Starts a database that will be `out` (refused if it exists), ending at `to` when given.
    pub fn create(out: &Path, to: Option<u64>) -> Result<Restore, Error> {
        Ok(Restore {
            db: NewDatabase::create(out).map_err(at_out)?,
            to,
            write_error: None,
            redactions: None,
            placeholders: Vec::new(),
        })
    }

    /// Takes one checked record of the copy; true when it was written.
    /// Only the next seq is written: duplicates, late and out-of-order
    /// records are the check's to name, and a gap stops the writing. A
    /// record whose fields cannot be decoded is the check's to name too (as
    /// altered, with its place in the copy); it is never written.
    pub fn take(&mut self, record: &Record<'_>) -> bool {
        if self.write_error.is_some()
            || record.seq != self.db.last().saturating_add(1)
            || self.to.is_some_and(|to| record.seq > to)
            || RecordEvent::of(record).is_none()
        {
            return false;
        }
        let covered = self.redactions.as_ref().and_then(|r| r.get(record.seq));
        let written = match covered {
            Some(c) if c.hash[..] == *record.hash.as_bytes() => {
                let mut blanked = record.tombstone(&c.statement);
                blanked.payload_json = placeholder(&c.statement).into();
                blanked.redacted = None;
                self.placeholders.push(record.seq);
                self.db.insert(&blanked)
            }
            _ => self.db.insert(record),
        };
        match written {
            Ok(()) => true,
            Err(e) => {
                self.write_error = Some(e);
                false
            }
        }
    }

    /// Ends the restore after the copy was read, with the copy's verdict:
    /// when the copy cannot be trusted, nothing is left at the final name
    /// and the verdict's findings say why (a copy with none and no trusted
    /// head is refused for that); else the database is put in place and the
    /// verdict says what it holds.
    pub fn finish(mut self, outcome: CopyOutcome, include_unanchored: bool) -> Result<RestoreVerdict, Error> {
        if let Some(e) = self.write_error.take() {
            return Err(at_out(e));
        }
        let trusted = match outcome.restorable() {
            Ok(trusted) => trusted,
            Err(findings) => {
                let mut refused = refused(outcome);
                refused.findings = findings;
                return Ok(refused);
            }
        };
        let copy_end = outcome.covered.end_seq.unwrap_or(0);
        let limit = self.to.unwrap_or(u64::MAX);
        let end = if include_unanchored {
            self.db.last().min(limit)
        } else {
            trusted.seq.min(limit)
        };
        self.db.complete(end).map_err(at_out)?;
        recheck(&self.db, end, trusted, self.redactions.clone())?;
        self.placeholders.retain(|s| *s <= end);
        self.db.place().map_err(at_out)?;
        let restored = Restored {
            placeholders: std::mem::take(&mut self.placeholders),
            end,
            last_trusted: trusted,
            unanchored_written: end.saturating_sub(trusted.seq),
            // Left out by choice with `to`: not counted as left behind.
            unanchored_left: if self.to.is_none() {
                copy_end.saturating_sub(end.max(trusted.seq))
            } else {
                0
            },
        };
        Ok(outcome.map(|copy| RestoreCovered {
            copy,
            restored: Some(restored),
        }))
    }
}

/// Walks the finished file once more, as `verify --head` would: what is
/// put in place is what was checked, read back from disk.
/// An error writing the new database is the output path's (a full disk,
/// a file already there); one about the data stays the data's.
fn at_out(e: Error) -> Error {
    match e.kind {
        chainship_chain::ErrorKind::Integrity => e,
        _ => e.with_setting(chainship_chain::Setting::Out),
    }
}

fn recheck(
    db: &NewDatabase,
    end: u64,
    trusted: Head,
    redactions: Option<std::sync::Arc<Redactions>>,
) -> Result<(), Error> {
    let failed = |why: String| integrity!("{}: the restored database {why}", db.temp_path().display());
    let opened = EventDb::open(db.temp_path(), &OpenOptions::default()).map_err(|e| failed(e.to_string()))?;
    let plan = WalkPlan {
        from: 1,
        to: Some(end),
        heads: (trusted.seq <= end).then_some(trusted).into_iter().collect(),
        roots_at: Vec::new(),
        redactions,
        ..WalkPlan::default()
    };
    let report = walk_chain(opened, &plan, &mut |_| {}).map_err(|e| failed(e.to_string()))?;
    if !report.ok() || report.checked != end {
        return Err(failed(format!(
            "does not walk clean to seq {end} (checked {}): nothing was put at the final name",
            report.checked
        )));
    }
    Ok(())
}

/// Refuses an `out` inside a file anchor store (`store_dir`), by path or by
/// identity (a bind mount of the store is the store under another path): a
/// file there reads as a bad head to the next `anchor verify`. The message
/// names the store.
pub fn refuse_inside_store(out: &Path, store_dir: &Path) -> Result<(), Error> {
    let real = |p: &Path| -> Option<PathBuf> {
        std::fs::canonicalize(p).ok().or_else(|| {
            let dir = p
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            Some(std::fs::canonicalize(dir).ok()?.join(p.file_name()?))
        })
    };
    let (Some(real_out), Some(place)) = (real(out), real(store_dir)) else {
        return Ok(());
    };
    let identity = |p: &Path| {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()))
    };
    let inside = real_out.starts_with(&place)
        || identity(&place).is_some_and(|store| real_out.ancestors().skip(1).any(|dir| identity(dir) == Some(store)));
    if inside {
        return Err(permanent!(
            "{}: inside the anchor store ({}); write the restored database elsewhere",
            out.display(),
            place.display()
        ));
    }
    Ok(())
}
