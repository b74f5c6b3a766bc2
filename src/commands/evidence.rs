//! `chainship evidence` and `check-evidence`: one run's evidence as a
//! bundle an auditor checks offline (`chainship_evidence::bundle`).

use std::path::{Path, PathBuf};

use chainship_anchor::VerifierKey;
use chainship_anchor::cosignature::WitnessPolicy;
use chainship_chain::EventDb;
use chainship_chain::record::{Record, RecordFormat};
use chainship_evidence::bundle::make::{self, Made, Source};
use chainship_evidence::bundle::{self, BundleFiles, CheckInput, EvidenceReport, build};
use chainship_evidence::copy::CopyInput;
use chainship_runs::Profile;
use chainship_sinks::SinkConfig;
use clap::Args;

use crate::args::{
    AnchorStoreArgs, DbArgs, OriginArg, OutputArgs, RunRulesArgs, SinkConnectArgs, TrustArgs, WitnessTrustArgs,
};
use crate::exit::{self, CliError, CmdResult};
use crate::report;
use chainship_verify::Verdict;

/// Write one run's evidence: its records, the tiles that prove them, the checkpoint, a report.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  chainship evidence --run run_d56640480004 --db /data/audit.db --origin prod-eu1/agentrt \\
      --anchor file:/mnt/anchors --trusted-key /etc/chainship/head.pub --out /tmp/run_d56640480004
  chainship evidence --run run_d56640480004 --from s3://siem-bucket/exports --origin prod-eu1/agentrt \\
      --anchor s3://audit-anchors/heads --trusted-key /etc/chainship/head.pub --with-gaps --out /tmp/run.tar
  chainship check-evidence /tmp/run.tar --trusted-key /etc/chainship/head.pub

With witnesses, add --witness-key FILE --witness-quorum N (or --policy FILE).
The bundle holds records.jsonl (the run's events as exported, --record-format), tile/ (the
C2SP tlog-tiles each record's inclusion proof is computed from: the bundle is a tiles directory
any C2SP client reads; one record's own tlog-proof: `chainship prove`), the checkpoint (the
newest the witnesses' quorum cosigned when --witness-key or --policy is given, else the newest
a trusted key signed) with its cosignatures, the signed head at its size, run.json,
report.html and README.txt. With
--from the copy is first checked as verify-export checks it. The bundle is checked before it
is written, by the same check as check-evidence; the run check's findings are in it.
Exit codes: 0 written, 1 the source or the store does not prove the run's events (nothing is
written), 2 usage or setup error (no usable checkpoint, the run not yet covered by one).")]
#[command(mut_arg("anchor", |a| a.required(true)))]
#[command(mut_arg("origin", |a| a.required(true)))]
pub struct EvidenceArgs {
    /// The run.
    #[arg(long, value_name = "ID")]
    pub run: String,
    #[command(flatten)]
    pub db: DbArgs,
    /// Read an exported copy instead of the database: file:PATH, s3://BUCKET/PREFIX or kafka://HOST:PORT/TOPIC.
    #[arg(long = "from", value_name = "URL", conflicts_with = "db")]
    pub source: Option<SinkConfig>,
    #[command(flatten)]
    pub origin: OriginArg,
    #[command(flatten)]
    pub sink: SinkConnectArgs,
    #[command(flatten)]
    pub anchor: AnchorStoreArgs,
    #[command(flatten)]
    pub trust: TrustArgs,
    #[command(flatten)]
    pub witness: WitnessTrustArgs,
    #[command(flatten)]
    pub rules: RunRulesArgs,
    /// The shape of the records in the bundle: chainship, ocsf or ecs (as the sink exports them).
    #[arg(long, default_value = "chainship", value_name = "chainship|ocsf|ecs")]
    pub record_format: RecordFormat,
    /// Also account for every other event from the run's creation to the checkpoint: its seq, its entry in the tiles.
    #[arg(long)]
    pub with_gaps: bool,
    /// With --db: read every event up to the checkpoint, not only the run's stretch of the log. Slower
    /// (the whole log), but it also refuses a database damaged anywhere before the checkpoint, or the
    /// run's head or tail deleted, which the run's remaining stretch cannot show. Always so with --with-gaps.
    #[arg(long, conflicts_with = "source")]
    pub walk: bool,
    /// Where to write the bundle: a new directory, or FILE.tar (refused if it exists).
    #[arg(long, value_name = "DIR|FILE.tar")]
    pub out: PathBuf,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Check one run's evidence bundle offline.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  chainship evidence --run run_d56640480004 --db /data/audit.db --origin prod-eu1/agentrt \\
      --anchor file:/mnt/anchors --trusted-key /etc/chainship/head.pub --with-gaps --out /tmp/evidence.tar
  chainship check-evidence /tmp/evidence.tar --trusted-key /etc/chainship/head.pub
  chainship check-evidence /tmp/evidence.tar --trusted-key /etc/chainship/head.pub --run run_d56640480004 --json

Every record is re-hashed and its proof, computed from the bundle's tiles once each tile is
proven to be of the checkpoint's tree (or read from proofs/SEQ.proof in a bundle written before
the tiles), checked against the bundle's checkpoint, the checkpoint
and the head against the trusted keys (and the witnesses' quorum), and the run check runs again
on the records (run.json is not trusted); run.json, report.html and README.txt must be what the
checked records render. Proven records, run findings and renderings are reported apart.
--reveal SEQ --record R: a record for a seq the bundle gives only as an entry (--with-gaps); if it
is the entry there and of this run, the run's event was withheld (a tombstone: add --statement FILE,
its redaction statement, and --redaction-key).
Exit codes: 0 every record proven, the run without finding and the page as rendered, 1 otherwise
(each named), 2 not a bundle, or usage.")]
pub struct CheckEvidenceArgs {
    /// The bundle: a directory or a .tar file.
    #[arg(value_name = "DIR|FILE.tar")]
    pub bundle: PathBuf,
    /// The run the bundle must be of (default: its first record's).
    #[arg(long, value_name = "ID")]
    pub run: Option<String>,
    #[command(flatten)]
    pub origin: OriginArg,
    #[command(flatten)]
    pub trust: TrustArgs,
    #[command(flatten)]
    pub witness: WitnessTrustArgs,
    #[command(flatten)]
    pub rules: RunRulesArgs,
    /// A seq the bundle gives only as an entry of the tree, to reveal with --record.
    #[arg(long, value_name = "SEQ", requires = "record")]
    pub reveal: Option<u64>,
    /// The revealed record: a file holding its JSON, or the JSON itself.
    #[arg(long, value_name = "FILE|JSON", requires = "reveal")]
    pub record: Option<String>,
    /// When the revealed record is a tombstone (its payload withheld): its redaction statement, as the
    /// anchor store keeps it at ORIGIN/redactions/SEQ (with --redaction-key).
    #[arg(long, value_name = "FILE", requires = "record")]
    pub statement: Option<PathBuf>,
    /// Insist that the bundle accounts for every position (written with --with-gaps).
    #[arg(long)]
    pub with_gaps: bool,
    /// Write run.json, report.html and README.txt, as this check renders them, into this new directory.
    #[arg(long, value_name = "DIR")]
    pub render: Option<PathBuf>,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// The trusted keys, the witnesses' policy and the run rules' profile.
type Trust = (Vec<VerifierKey>, Option<WitnessPolicy>, &'static Profile);

fn trust(keys: &TrustArgs, witness: &WitnessTrustArgs, rules: &RunRulesArgs) -> Result<Trust, CliError> {
    let profile = rules.profile()?;
    let profile = profile.ok_or_else(|| CliError::usage("--profile none: the bundle needs a run check"))?;
    Ok((keys.load()?, keys.witness_policy(witness)?, profile))
}

pub fn run(args: &EvidenceArgs) -> CmdResult {
    let (keys, witnesses, profile) = trust(&args.trust, &args.witness, &args.rules)?;
    let origin = args.origin.get()?;
    let url = args.anchor.url()?;
    let store = args.anchor.open(url, None);
    let runtime = report::runtime()?;
    let redaction_keys = args.trust.redaction_keys(&keys)?;
    let input = build::BuildInput {
        store: store.as_ref(),
        origin,
        format: args.record_format,
        check: CheckInput {
            keys: &keys,
            witnesses: witnesses.as_ref(),
            run_id: Some(&args.run),
            origin: Some(origin),
            profile,
            rules: args.rules.config(),
            reveal: None,
            reveal_statement: None,
            require_gaps: args.with_gaps,
            redaction_keys: &redaction_keys,
        },
    };
    let open_store = || args.anchor.open(url, None);
    let copy_source = args.source.as_ref().map(|s| args.sink.apply(s));
    let copy_input = copy_source.as_ref().map(|source| CopyInput {
        source: source.into(),
        origin,
        keys: &keys,
        witness: witnesses.as_ref().map(|p| (p, args.witness.witness_grace)),
        open_store: &open_store,
        redaction_keys: &redaction_keys,
    });
    let db;
    let source = match &copy_input {
        Some(copy) => Source::Copy(copy),
        None => {
            let open = args.db.open_options().map_err(|e| CliError::from_kind(&e))?;
            db = EventDb::open(args.db.path()?, &open)?;
            Source::Database {
                db: &db,
                walk: args.walk,
            }
        }
    };
    remove_when_interrupted(make::temporary_paths(&args.out));
    let made = make::make(&runtime, &args.run, args.with_gaps, source, &input, &args.out);
    // Interrupted meanwhile: whatever the write made of its vanishing
    // directory, the handler is removing it and exits 130; exiting first
    // would cut the removal short.
    if INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst) {
        loop {
            std::thread::park();
        }
    }
    match made.map_err(|e| CliError::from_kind(&e))? {
        // A copy that is not evidence: its verdict, as verify-export gives it; no bundle.
        Made::CopyRefused(outcome) => {
            let Some(source) = &copy_source else {
                return Err(CliError::failed("the source is not evidence: no bundle was written"));
            };
            if args.output.json {
                let mut doc = crate::trusted_copy::verdict_json(source, &outcome, &outcome.covered);
                doc["message"] = "the copy is not evidence: no bundle was written".into();
                outln!("{doc}");
            } else {
                outln!("{}", crate::trusted_copy::summary(source, &outcome.covered));
                report::print_verdict(&outcome, "");
                outln!(
                    "the copy is not evidence: no bundle was written to {}",
                    args.out.display()
                );
            }
            Ok(exit::of(&outcome))
        }
        Made::Checked(verdict) => {
            render(&verdict, &args.out, args.output.json, verdict.passed());
            Ok(exit::of(&verdict))
        }
    }
}

/// Ctrl-C or SIGTERM while the bundle is built removes what was written, then exits 130.
/// Set by the signal handler as it starts removing what was written.
static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn remove_when_interrupted(partial: [PathBuf; 2]) {
    use signal_hook::consts::{SIGINT, SIGTERM};
    if let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM]) {
        std::thread::spawn(move || {
            if signals.forever().next().is_some() {
                INTERRUPTED.store(true, std::sync::atomic::Ordering::SeqCst);
                remove_under_a_writer(&partial[0]);
                let _ = std::fs::remove_file(&partial[1]);
                std::process::exit(130);
            }
        });
    }
}

/// Removes the directory the main thread may still be writing files into.
/// Renamed first, so no later file can be created in it by its path; then
/// removed, again if a file whose path was resolved before the rename
/// landed in it meanwhile (a removal racing a writer leaves it otherwise).
fn remove_under_a_writer(dir: &Path) {
    let mut doomed = dir.as_os_str().to_owned();
    doomed.push(".removing");
    let doomed = PathBuf::from(doomed);
    let target = match std::fs::rename(dir, &doomed) {
        Ok(()) => doomed.as_path(),
        Err(_) => dir,
    };
    for _ in 0..20 {
        if std::fs::remove_dir_all(target).is_ok() || !target.exists() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

pub fn check(args: &CheckEvidenceArgs) -> CmdResult {
    let (keys, witnesses, profile) = trust(&args.trust, &args.witness, &args.rules)?;
    let files = BundleFiles::read(&args.bundle).map_err(|e| CliError::usage(bundle::printable(&e.message)))?;
    let record_text = match &args.record {
        Some(r) if r.trim_start().starts_with('{') => Some(r.as_bytes().to_vec()),
        Some(path) => Some(std::fs::read(path).map_err(|e| CliError::usage(format!("--record {path}: {e}")))?),
        None => None,
    };
    let revealed = match &record_text {
        Some(bytes) => Some(
            Record::parse(bytes.trim_ascii())
                .map_err(|e| CliError::usage(format!("--record: not a chainship record: {e}")))?,
        ),
        None => None,
    };
    let statement = match &args.statement {
        Some(path) => {
            Some(std::fs::read(path).map_err(|e| CliError::usage(format!("--statement {}: {e}", path.display())))?)
        }
        None => None,
    };
    let redaction_keys = args.trust.redaction_keys(&keys)?;
    if let (Some(seq), Some(r)) = (args.reveal, &revealed)
        && r.seq != seq
    {
        return Err(CliError::usage(format!(
            "--record is seq {}, not the --reveal seq {seq}",
            r.seq
        )));
    }
    let input = CheckInput {
        keys: &keys,
        witnesses: witnesses.as_ref(),
        run_id: args.run.as_deref(),
        origin: args.origin.origin.as_deref(),
        profile,
        rules: args.rules.config(),
        reveal: revealed.as_ref(),
        reveal_statement: statement.as_deref(),
        require_gaps: args.with_gaps,
        redaction_keys: &redaction_keys,
    };
    let mut report =
        bundle::check::check(&files, &input).map_err(|e| CliError::usage(bundle::printable(&e.message)))?;
    bundle::check::check_renderings(&files, &mut report);
    if let Some(dir) = &args.render {
        std::fs::create_dir(dir).map_err(|e| CliError::usage(format!("--render {}: {e}", dir.display())))?;
        for (name, bytes) in bundle::renderings(&report) {
            std::fs::write(dir.join(name), bytes)
                .map_err(|e| CliError::usage(format!("--render {}: {e}", dir.display())))?;
        }
    }
    let verdict = report.verdict(true);
    render(&verdict, &args.bundle, args.output.json, false);
    Ok(exit::of(&verdict))
}

/// The verdict, as text or JSON; `written` when `evidence` wrote it.
fn render(v: &Verdict<EvidenceReport>, path: &Path, json: bool, written: bool) {
    let r = &v.covered;
    if json {
        let mut doc = bundle::run_json::render(r);
        doc["status"] = serde_json::json!(v.status());
        doc["bundle"] = serde_json::json!(path);
        doc["written"] = serde_json::json!(written);
        let reveal = r.reveal.as_ref();
        doc["reveal"] = serde_json::json!(
            reveal.map(|v| serde_json::json!({"seq": v.seq, "run_id": v.run_id, "withheld": v.problem.is_some()}))
        );
        doc["renderings"] = serde_json::json!(r.renderings.iter().map(|p| &p.reason).collect::<Vec<_>>());
        doc.as_object_mut().map(|o| o.remove("timeline"));
        outln!("{doc}");
        return;
    }
    let cp = &r.checkpoint;
    if written {
        outln!("wrote {}", path.display());
    }
    let p = |t: &str| bundle::printable(t).into_owned();
    outln!(
        "run {} of {}: checkpoint {} signed by {}{}; head published {}",
        p(&r.run_id),
        p(&cp.origin),
        cp.size,
        if cp.signers.is_empty() {
            "no trusted key".into()
        } else {
            cp.signers.join(", ")
        },
        if cp.witnesses.is_empty() {
            String::new()
        } else {
            format!(", cosigned by {}", cp.witnesses.join(", "))
        },
        p(&r.head.published)
    );
    if let Some(s) = &r.summary {
        outln!(
            "the run at the checkpoint: {}, seqs {}..={}, {} events{}",
            s.status.as_str(),
            s.first_seq,
            s.last_seq,
            s.events,
            if s.status.as_str() == "finished" {
                ""
            } else {
                " (events of the run after the checkpoint are not in the bundle)"
            }
        );
    }
    for line in report::redacted_lines(v) {
        outln!("{line}");
    }
    let not_proven = r.not_proven();
    let bad_records = r.records.iter().filter(|x| x.problem.is_some()).count();
    outln!(
        "proven: {} of {} records",
        r.records.len() - bad_records,
        r.records.len()
    );
    for (seq, np) in &not_proven {
        match seq {
            Some(seq) => outln!("  not proven: seq {seq}: {}", p(&np.to_string())),
            None => outln!("  not proven: {}", p(&np.to_string())),
        }
    }
    match &r.gaps {
        Some(g) if g.first == 0 => {}
        Some(g) => outln!(
            "gaps: seqs {}..={}: {} other event(s) as entries of the tree{}",
            g.first,
            g.last,
            g.hashes,
            if g.problems.is_empty() {
                ", every position accounted for in the tree"
            } else {
                ""
            }
        ),
        None => outln!("gaps: not in the bundle: it cannot show that no event of the run was left out"),
    }
    if let Some(v) = r.reveal.as_ref().filter(|v| v.problem.is_none()) {
        outln!(
            "revealed: seq {} is an event of run {:?}, not of this run",
            v.seq,
            p(&v.run_id)
        );
    }
    for problem in &r.renderings {
        outln!("renderings: {}", problem.reason);
    }
    outln!("findings: {}", r.findings.len());
    for f in &r.findings {
        outln!("  {}", p(&f.to_string()));
    }
}
