//! `--metrics-textfile`: a scheduled check's textfile for node_exporter
//! (`chainship_verify::job_textfile`), written after every run, also one
//! that failed to run (its result is `error`).

use std::path::Path;
use std::time::{Duration, SystemTime};

pub use chainship_verify::job_textfile::{self, JobReport, JobResult, render};

/// Runs a check, then writes its metrics to `textfile` (when given), also
/// when the check failed to run: its result is then `error`. A textfile
/// that cannot be written is a setup error (exit 2) of a run that was
/// otherwise fine, else a warning beside the run's own error.
pub fn run_job(
    textfile: Option<&Path>,
    report: &mut JobReport,
    check: impl FnOnce(&mut JobReport) -> crate::exit::CmdResult,
) -> crate::exit::CmdResult {
    let started = SystemTime::now();
    let clock = std::time::Instant::now();
    // Marked running first: a run that never ends never leaves the last `ok` standing.
    if let Some(path) = textfile {
        let running = JobReport {
            result: JobResult::Running,
            ..report.clone()
        };
        if let Err(e) = job_textfile::write(path, &render(&running, started, Duration::ZERO)) {
            return Err(crate::exit::CliError::usage(format!(
                "--metrics-textfile {}: {}",
                path.display(),
                chainship_chain::access::explain(path, &e)
            )));
        }
    }
    let result = check(report);
    if result.is_err() {
        report.result = JobResult::Error;
    }
    let Some(path) = textfile else {
        return result;
    };
    let written = job_textfile::write(path, &render(report, started, clock.elapsed()));
    match (written, result) {
        (Ok(()), result) => result,
        // A good run whose result cannot be recorded is a setup error; findings stay findings.
        (Err(e), Ok(crate::exit::OK)) => Err(crate::exit::CliError::usage(format!(
            "--metrics-textfile {}: {}",
            path.display(),
            chainship_chain::access::explain(path, &e)
        ))),
        (Err(e), result) => {
            tracing::warn!(file = %path.display(), error = %e, "cannot write the metrics textfile");
            result
        }
    }
}
