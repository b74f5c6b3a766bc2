//! What a scheduled check (`anchor verify`, `verify-export`) leaves for
//! node_exporter's textfile collector, since a job that ends cannot be
//! scraped: its result, findings by kind, what it checked and the age of
//! the last trusted head, as Prometheus text ([`render`]), written whole
//! ([`write`]) so the collector never reads half a file.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::finding::Kind;
use crate::verdict::Verdict;

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
    /// A fleet run's origins (`verify-export --all-origins`), see [`render_fleet`].
    pub fleet: Option<Vec<FleetOrigin>>,
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
            fleet: None,
        }
    }

    /// Records a check with a verdict per origin (a fleet's): every
    /// origin's findings by kind, each origin for [`render_fleet`], and the
    /// run's result, `passed` for the whole (which may hold more than the
    /// origins: the fleet's own findings).
    pub fn origins<'a, C: 'a>(&mut self, origins: impl IntoIterator<Item = (&'a str, &'a Verdict<C>)>, passed: bool) {
        let mut listed = Vec::new();
        for (origin, v) in origins {
            for f in &v.findings {
                *self.findings.entry(f.kind.as_str()).or_default() += 1;
            }
            listed.push(FleetOrigin {
                origin: origin.to_owned(),
                passed: v.passed(),
                kind: v.findings.first().map(|f| f.kind.as_str()),
            });
        }
        self.fleet = Some(listed);
        self.result = if passed { JobResult::Ok } else { JobResult::Findings };
    }

    /// Records a verdict: its findings, its result (whether it passed) and
    /// its last trusted head; what it covered is the caller's to add.
    pub fn verdict<C>(&mut self, v: &Verdict<C>) {
        for f in &v.findings {
            *self.findings.entry(f.kind.as_str()).or_default() += 1;
        }
        self.result = if v.passed() { JobResult::Ok } else { JobResult::Findings };
        self.last_trusted_seq = v.last_trusted.map(|h| h.seq);
        self.last_trusted_published = v.last_trusted_published;
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
    if let Some(origins) = &report.fleet {
        out.push_str(&render_fleet(report.job, origins));
    }
    out
}

/// One origin of a fleet check, for the textfile.
#[derive(Clone, Debug)]
pub struct FleetOrigin {
    pub origin: String,
    pub passed: bool,
    /// The first finding's kind, for a failed origin.
    pub kind: Option<&'static str>,
}

/// Failed origins a fleet's textfile names one by one; the rest are counted
/// (a series per origin of a fleet of thousands would swamp Prometheus).
pub const FLEET_ORIGINS_LISTED: usize = 50;

/// The fleet part of a fleet check's textfile, after [`render`]'s lines for
/// the whole run: origins by result, and the first [`FLEET_ORIGINS_LISTED`]
/// failed origins (by name) with an `origin` label and their first
/// finding's kind. Cardinality stays bounded whatever the fleet's size.
pub fn render_fleet(job: &str, origins: &[FleetOrigin]) -> String {
    let escape = |v: &str| v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
    let failed: Vec<&FleetOrigin> = origins.iter().filter(|o| !o.passed).collect();
    let mut out = String::new();
    out.push_str("# HELP chainship_fleet_origins Origins the last fleet run judged, by result.\n");
    out.push_str("# TYPE chainship_fleet_origins gauge\n");
    for (result, n) in [("ok", origins.len() - failed.len()), ("failed", failed.len())] {
        out.push_str(&format!(
            "chainship_fleet_origins{{check=\"{job}\",result=\"{result}\"}} {n}\n"
        ));
    }
    out.push_str(&format!(
        "# HELP chainship_fleet_origin_failed A failed origin of the last fleet run (the first {FLEET_ORIGINS_LISTED} by name), with its first finding's kind.\n"
    ));
    out.push_str("# TYPE chainship_fleet_origin_failed gauge\n");
    for o in failed.iter().take(FLEET_ORIGINS_LISTED) {
        out.push_str(&format!(
            "chainship_fleet_origin_failed{{check=\"{job}\",origin=\"{}\",kind=\"{}\"}} 1\n",
            escape(&o.origin),
            o.kind.unwrap_or("error")
        ));
    }
    out.push_str(
        "# HELP chainship_fleet_origins_failed_unlisted Failed origins of the last fleet run not listed by name.\n",
    );
    out.push_str("# TYPE chainship_fleet_origins_failed_unlisted gauge\n");
    out.push_str(&format!(
        "chainship_fleet_origins_failed_unlisted{{check=\"{job}\"}} {}\n",
        failed.len().saturating_sub(FLEET_ORIGINS_LISTED)
    ));
    out
}

/// Writes `text` to `path` atomically (temp file in the same directory, fsync, rename).
pub fn write(path: &Path, text: &str) -> std::io::Result<()> {
    // Readable by the collector (mode 0666 before the umask), as any file it makes.
    chainship_chain::atomic_file::replace_per_process(path, text.as_bytes(), 0o666)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fleets_textfile_names_few_failed_origins_and_counts_the_rest() {
        let origins: Vec<FleetOrigin> = (0..1000)
            .map(|i| FleetOrigin {
                origin: format!("team/\"{i:04}"),
                passed: i % 10 != 0,
                kind: (i % 10 == 0).then_some("altered"),
            })
            .collect();
        let text = render_fleet("verify_export", &origins);
        assert!(text.contains("chainship_fleet_origins{check=\"verify_export\",result=\"ok\"} 900\n"));
        assert!(text.contains("chainship_fleet_origins{check=\"verify_export\",result=\"failed\"} 100\n"));
        assert_eq!(
            text.matches("chainship_fleet_origin_failed{").count(),
            FLEET_ORIGINS_LISTED
        );
        assert!(
            text.contains("origin=\"team/\\\"0000\",kind=\"altered\"} 1\n"),
            "{text}"
        );
        assert!(text.contains("chainship_fleet_origins_failed_unlisted{check=\"verify_export\"} 50\n"));
    }
}
