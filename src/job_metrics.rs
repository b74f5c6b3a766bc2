//! `--metrics-textfile`: what a scheduled check (`anchor verify`,
//! `verify-export`) leaves for node_exporter's textfile collector, since a
//! job that ends cannot be scraped. Written after every run, also one that
//! failed to run (its result is `error`), atomically: a temporary file in the
//! same directory, then a rename, so the collector never reads half a file.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, SystemTime};

use chainship_anchor::{Finding, Kind};

/// How a run ended (`Running` while it runs: a run killed, timed out or
/// out of memory leaves that, never the previous run's `ok`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobResult {
    Ok,
    Findings,
    Error,
    Running,
}

/// What one run of a check found, for the textfile.
#[derive(Clone, Debug)]
pub struct JobReport {
    /// `anchor_verify` or `verify_export`.
    pub job: &'static str,
    pub origin: String,
    pub result: JobResult,
    pub findings: BTreeMap<&'static str, u64>,
    pub last_trusted_seq: Option<u64>,
    /// When the last trusted head was published.
    pub last_trusted_published: Option<SystemTime>,
    pub events_checked: u64,
    /// Trusted heads the data was compared with (0: `--allow-no-heads` passed on the chain alone).
    pub heads_checked: u64,
    /// A copy's records after its last trusted head (verify-export only).
    pub unvouched_records: Option<u64>,
}

impl JobReport {
    pub fn new(job: &'static str, origin: &str) -> Self {
        JobReport {
            job,
            origin: origin.to_owned(),
            result: JobResult::Error,
            findings: BTreeMap::new(),
            last_trusted_seq: None,
            last_trusted_published: None,
            events_checked: 0,
            heads_checked: 0,
            unvouched_records: None,
        }
    }

    /// Records the findings (the result follows from them).
    pub fn findings(&mut self, findings: &[Finding]) {
        for f in findings {
            *self.findings.entry(f.kind.as_str()).or_default() += 1;
        }
        self.result = if findings.is_empty() {
            JobResult::Ok
        } else {
            JobResult::Findings
        };
    }
}

/// The Prometheus text exposition of `report` for a run that started at
/// `started` and took `took`.
pub fn render(report: &JobReport, started: SystemTime, took: Duration) -> String {
    let labels = format!(
        "check=\"{}\",origin=\"{}\"",
        report.job,
        report.origin.replace('\\', "\\\\").replace('"', "\\\"")
    );
    let secs = |t: SystemTime| {
        t.duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64())
    };
    let mut out = String::new();
    let mut metric = |name: &str, kind: &str, help: &str, rows: Vec<(String, f64)>| {
        out.push_str(&format!(
            "# HELP chainship_job_{name} {help}\n# TYPE chainship_job_{name} {kind}\n"
        ));
        for (extra, value) in rows {
            out.push_str(&format!("chainship_job_{name}{{{labels}{extra}}} {value}\n"));
        }
    };
    metric(
        "last_run_timestamp_seconds",
        "gauge",
        "When the check last ran (Unix seconds).",
        vec![(String::new(), secs(started))],
    );
    metric(
        "duration_seconds",
        "gauge",
        "How long the last run took.",
        vec![(String::new(), took.as_secs_f64())],
    );
    let results = [
        ("ok", JobResult::Ok),
        ("findings", JobResult::Findings),
        ("error", JobResult::Error),
        ("running", JobResult::Running),
    ];
    metric(
        "result",
        "gauge",
        "How the last run ended: 1 for its result (ok, findings, error; running while it runs), 0 for the others.",
        results
            .iter()
            .map(|(name, r)| (format!(",result=\"{name}\""), f64::from(u8::from(report.result == *r))))
            .collect(),
    );
    // Every kind, 0 when absent: an alert on one kind has a series from the first run on.
    let mut kinds: Vec<&'static str> = Kind::ALL.iter().map(|k| k.as_str()).collect();
    kinds.sort_unstable();
    metric(
        "findings",
        "gauge",
        "Findings of the last run, by kind.",
        kinds
            .iter()
            .map(|k| {
                (
                    format!(",kind=\"{k}\""),
                    report.findings.get(k).copied().unwrap_or(0) as f64,
                )
            })
            .collect(),
    );
    metric(
        "heads_checked",
        "gauge",
        "Trusted heads the last run compared the data with (0: it proved nothing against a kept head).",
        vec![(String::new(), report.heads_checked as f64)],
    );
    metric(
        "events_checked",
        "gauge",
        "Events (or copy records) the last run checked.",
        vec![(String::new(), report.events_checked as f64)],
    );
    if let Some(n) = report.unvouched_records {
        metric(
            "unvouched_records",
            "gauge",
            "Records of the copy after its last trusted head: intact, but vouched for by no signed head.",
            vec![(String::new(), n as f64)],
        );
    }
    if let Some(seq) = report.last_trusted_seq {
        metric(
            "last_trusted_head_seq",
            "gauge",
            "Seq of the highest kept head the last run found the data to match.",
            vec![(String::new(), seq as f64)],
        );
    }
    if let Some(published) = report.last_trusted_published {
        let age = SystemTime::now().duration_since(published).unwrap_or_default();
        metric(
            "last_trusted_head_age_seconds",
            "gauge",
            "How old the last trusted head was when the run ended.",
            vec![(String::new(), age.as_secs_f64())],
        );
    }
    out
}

/// Writes `text` to `path` atomically (temp file in the same directory, fsync, rename).
pub fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = std::fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(text.as_bytes()).and_then(|_| f.sync_all()))
        .and_then(|_| std::fs::rename(&tmp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

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
        if let Err(e) = write_atomically(path, &render(&running, started, Duration::ZERO)) {
            return Err(crate::exit::CliError::usage(format!(
                "--metrics-textfile {}: {e}",
                path.display()
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
    let written = write_atomically(path, &render(report, started, clock.elapsed()));
    match (written, result) {
        (Ok(()), result) => result,
        // A good run whose result cannot be recorded is a setup error; findings stay findings.
        (Err(e), Ok(crate::exit::OK)) => Err(crate::exit::CliError::usage(format!(
            "--metrics-textfile {}: {e}",
            path.display()
        ))),
        (Err(e), result) => {
            tracing::warn!(file = %path.display(), error = %e, "cannot write the metrics textfile");
            result
        }
    }
}
