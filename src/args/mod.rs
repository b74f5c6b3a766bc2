//! Every flag is declared once, here, in a small group flattened into each
//! command that takes it; commands add only their own flags. A flag that
//! one command needs and another may leave out is declared optional here and
//! made required by the command (`#[command(mut_arg("origin", |a|
//! a.required(true)))]`); the accessors turn a missing value into a usage
//! error rather than trusting that. Environment variables follow from the
//! long names (see `env_names`).

pub mod anchor;
pub mod db;
pub mod runs;
pub mod sink;
pub mod witness;

use std::path::PathBuf;

use clap::Args;

pub use anchor::{AnchorRetainArgs, AnchorStoreArgs};
pub use db::DbArgs;
pub use runs::RunRulesArgs;
pub use sink::{SinkArgs, SinkConnectArgs, SinkWriteArgs};
pub use witness::{WitnessArgs, WitnessTrustArgs};

use crate::exit::CliError;

/// What a follower runs with, and `check` checks: the database, the origin,
/// the sink, the cursor, the anchor store, the signing keys and the witnesses.
#[derive(Args, Clone, Debug)]
pub struct PipelineArgs {
    #[command(flatten)]
    pub db: DbArgs,
    #[command(flatten)]
    pub origin: OriginArg,
    #[command(flatten)]
    pub sink: SinkArgs,
    #[command(flatten)]
    pub cursor: CursorArg,
    #[command(flatten)]
    pub anchor: AnchorStoreArgs,
    #[command(flatten)]
    pub retain: AnchorRetainArgs,
    #[command(flatten)]
    pub signing: SigningArgs,
    #[command(flatten)]
    pub witness: WitnessArgs,
}

impl PipelineArgs {
    /// Refuses a sink file, or any file written for the cursor (see
    /// `FileCursor::files`), that is the audit database or one of SQLite's
    /// files beside it (`-wal`, `-shm`, `-journal`), by any path, or that is
    /// another of them: writing there would destroy the evidence it ships.
    pub fn refuse_overlaps(&self) -> Result<(), CliError> {
        let mut taken: Vec<(String, PathBuf)> = Vec::new();
        if let Some(db) = &self.db.db {
            for suffix in ["", "-wal", "-shm", "-journal"] {
                let mut path = db.clone().into_os_string();
                path.push(suffix);
                let what = if suffix.is_empty() {
                    "the audit database".to_owned()
                } else {
                    format!("the audit database's {suffix} file")
                };
                taken.push((what, path.into()));
            }
        }
        let mut writers: Vec<(String, PathBuf)> = Vec::new();
        if let chainship_sinks::SinkConfig::File(path) = &self.sink.sink {
            writers.push(("--sink".into(), path.clone()));
        }
        if let Some(cursor) = &self.cursor.cursor {
            for file in chainship_follower::FileCursor::new(cursor).files() {
                writers.push((format!("--cursor {}", cursor.display()), file));
            }
        }
        for (i, (who, path)) in writers.iter().enumerate() {
            let others = taken.iter().cloned().chain(
                writers[..i]
                    .iter()
                    .map(|(w, p)| (format!("written for {w} too"), p.clone())),
            );
            for (what, other) in others {
                if same_file(path, &other) {
                    return Err(CliError::usage(format!(
                        "{who}: would write {}, which is {what} ({}); refusing to write there",
                        path.display(),
                        other.display()
                    )));
                }
            }
        }
        Ok(())
    }
}

/// The same file: the same inode when both exist, else the same path.
fn same_file(a: &std::path::Path, b: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => (x.dev(), x.ino()) == (y.dev(), y.ino()),
        _ => std::path::absolute(a).ok() == std::path::absolute(b).ok(),
    }
}

/// `--origin`.
#[derive(Args, Clone, Debug)]
pub struct OriginArg {
    /// Whose chain: the origin named in every record, sink key and signed
    /// head (e.g. prod-eu1/agentrt).
    #[arg(long, value_parser = chainship_chain::origin::parse_origin)]
    pub origin: Option<String>,
}

impl OriginArg {
    pub fn get(&self) -> Result<&str, CliError> {
        self.origin
            .as_deref()
            .ok_or_else(|| CliError::usage("--origin is required"))
    }
}

/// `--cursor`.
#[derive(Args, Clone, Debug)]
pub struct CursorArg {
    /// Where the follower keeps its delivered position (SEQ:HASH): file:PATH.
    #[arg(long, value_name = "URL", value_parser = parse_cursor_url)]
    pub cursor: Option<PathBuf>,
}

impl CursorArg {
    pub fn get(&self) -> Result<&std::path::Path, CliError> {
        self.cursor
            .as_deref()
            .ok_or_else(|| CliError::usage("--cursor is required"))
    }
}

/// A cursor URL: `file:PATH` (or a plain path).
pub fn parse_cursor_url(text: &str) -> Result<PathBuf, String> {
    let path = text
        .strip_prefix("file:")
        .map(|p| p.strip_prefix("//").unwrap_or(p))
        .unwrap_or(text);
    if path.is_empty() || text.contains("://") && !text.starts_with("file:") {
        return Err(format!("{text:?}: a cursor is file:PATH"));
    }
    Ok(PathBuf::from(path))
}

/// `--signing-key`: what signs published heads.
#[derive(Args, Clone, Debug)]
pub struct SigningArgs {
    /// What signs the heads: a key file (from `chainship keygen`), or
    /// `ssh-agent:PUBLIC_KEY_FILE` (an Ed25519 key the agent at $SSH_AUTH_SOCK
    /// holds); repeat to sign with several while rotating.
    #[arg(long = "signing-key", value_name = "PATH|ssh-agent:PATH", value_delimiter = ',')]
    pub signing_keys: Vec<PathBuf>,
    /// The key name in the signed notes for a key kept outside a key file
    /// (default: the ssh public key's comment).
    #[arg(long, value_name = "NAME")]
    pub signing_key_name: Option<String>,
}

/// How far past the last trusted head a check still passes: `anchor verify`, `verify-export`.
#[derive(Args, Clone, Debug)]
pub struct UnvouchedArgs {
    /// Records (rows) after the last trusted head that still pass (said as a warning):
    /// by default what one default --anchor-interval (10s) leaves at 1,000 events/s.
    /// More is a finding (`unvouched`, exit 1); 0 asks every record to be vouched for.
    #[arg(long, value_name = "N", default_value_t = chainship_verify::copy::DEFAULT_MAX_UNVOUCHED)]
    pub max_unvouched: u64,
}

/// A fleet's checks (`verify-export --all-origins`): every origin at once,
/// or those under a prefix, or one worker's share.
#[derive(Args, Clone, Debug)]
pub struct FleetArgs {
    /// Check every origin of the copy in one read of it (a fleet's topic, S3
    /// prefix, file or directory of files), each against its own heads with
    /// the trusted key named after it; an origin the anchor store keeps heads
    /// for but the copy lacks is a missing-copy finding.
    #[arg(long, conflicts_with_all = ["origin", "after"])]
    pub all_origins: bool,
    /// Only origins whose name starts with this (e.g. prod-eu1/).
    #[arg(long, value_name = "PREFIX", requires = "all_origins")]
    pub origin_prefix: Option<String>,
    /// This worker's share of the fleet, I of N (1-based; a Kubernetes
    /// Indexed Job gives $(JOB_COMPLETION_INDEX)+1): a topic's partitions
    /// p with p mod N = I-1, elsewhere origins by a stable hash. N workers
    /// cover every origin once.
    #[arg(long, value_name = "I/N", requires = "all_origins", value_parser = chainship_sinks::Shard::parse)]
    pub shard: Option<chainship_sinks::Shard>,
    /// Where the fleet pass sets each origin's records aside while it runs
    /// (an unlinked temporary file; about the size of the records read).
    /// Default: the system temp dir ($TMPDIR).
    #[arg(long, value_name = "DIR", requires = "all_origins")]
    pub spill_dir: Option<std::path::PathBuf>,
}

/// A first run's escape: `anchor verify`, `verify-export`.
#[derive(Args, Clone, Debug)]
pub struct NoHeadsArgs {
    /// Pass with no trusted head to compare with (a first run, before any
    /// head was published); the output then says that no head was checked.
    #[arg(long)]
    pub allow_no_heads: bool,
}

/// `--trusted-key`: whose signatures a verifier accepts.
#[derive(Args, Clone, Debug)]
pub struct TrustArgs {
    /// A trusted verifier key (NAME+KEYID+BASE64[ until=SEQ]), or a file of them; repeat for several.
    #[arg(long = "trusted-key", value_name = "KEY|FILE", value_delimiter = ',')]
    pub trusted_keys: Vec<String>,
    /// A trust policy in the Sigsum policy format: its `log` keys sign heads and checkpoints,
    /// its `witness` lines cosign, and its `quorum` (with nested `group`s) is what cosignatures
    /// must meet. Adds to --trusted-key; replaces --witness-key/--witness-quorum.
    #[arg(long, value_name = "FILE")]
    pub policy: Option<std::path::PathBuf>,
    /// A key that may authorize erasure (NAME+KEYID+BASE64, made by `keygen`), or a file of them:
    /// a tombstone, or a row whose payload was blanked, passes as redacted where a statement it
    /// signed in the anchor store names that origin, seq, hash and other fields. Never a head key.
    #[arg(long = "redaction-key", value_name = "KEY|FILE", value_delimiter = ',')]
    pub redaction_keys: Vec<String>,
}

impl SigningArgs {
    /// The signing keys, each refused with the flag and file named.
    pub fn load(&self) -> Result<Vec<std::sync::Arc<dyn chainship_anchor::Signer>>, CliError> {
        self.signing_keys
            .iter()
            .map(|p| {
                chainship_anchor::signer::open(p, self.signing_key_name.as_deref())
                    .map_err(|e| CliError::usage(format!("--signing-key {e}")))
            })
            .collect()
    }
}

impl TrustArgs {
    /// The trusted keys (and the policy's log keys), refused with the flag named.
    pub fn load(&self) -> Result<Vec<chainship_anchor::VerifierKey>, CliError> {
        let policy = self.policy()?;
        let mut keys = match (&policy, self.trusted_keys.is_empty()) {
            // The policy's log keys are enough.
            (Some(_), true) => Vec::new(),
            _ => chainship_anchor::keys::load_trusted(&self.trusted_keys)
                .map_err(|e| CliError::usage(format!("--trusted-key {e}")))?,
        };
        if let Some(policy) = policy {
            keys.extend(policy.logs.iter().map(|k| chainship_anchor::VerifierKey::any_name(*k)));
        }
        Ok(keys)
    }

    /// The `--redaction-key` keys (none: no redaction is accepted), refused
    /// with the flag named, and refused when one is a key trusted for heads
    /// (`head_keys`): whoever signs heads must not also authorize erasure.
    pub fn redaction_keys(
        &self,
        head_keys: &[chainship_anchor::VerifierKey],
    ) -> Result<Vec<chainship_anchor::VerifierKey>, CliError> {
        if self.redaction_keys.is_empty() {
            return Ok(Vec::new());
        }
        let keys = chainship_anchor::keys::load_trusted(&self.redaction_keys)
            .map_err(|e| CliError::usage(format!("--redaction-key {e}")))?;
        if let Some(k) = keys.iter().find(|k| head_keys.iter().any(|h| h.key == k.key)) {
            return Err(CliError::usage(format!(
                "--redaction-key {:?} is also a key trusted for heads: a redaction key must be its own (chainship keygen)",
                k.name
            )));
        }
        Ok(keys)
    }

    /// The `--policy` file, parsed.
    pub fn policy(&self) -> Result<Option<chainship_anchor::policy::TrustPolicy>, CliError> {
        let Some(path) = &self.policy else {
            return Ok(None);
        };
        let text = chainship_anchor::files::read_small(path, 16 << 20)
            .map_err(|e| CliError::usage(format!("--policy {}: {e}", path.display())))?;
        chainship_anchor::policy::TrustPolicy::parse(&text)
            .map(Some)
            .map_err(|e| CliError::usage(format!("--policy {}: {e}", path.display())))
    }

    /// What cosignatures must meet: the policy's witnesses and quorum, or
    /// the flags' (`--witness-key`, `--witness-quorum`).
    pub fn witness_policy(
        &self,
        flags: &WitnessTrustArgs,
    ) -> Result<Option<chainship_anchor::cosignature::WitnessPolicy>, CliError> {
        let Some(policy) = self.policy()? else {
            return flags.load();
        };
        if !flags.witness_keys.is_empty() || flags.witness_quorum.is_some() {
            return Err(CliError::usage(
                "--policy names the witnesses and the quorum: give --witness-key/--witness-quorum in it, not beside it",
            ));
        }
        if !policy.needs_witnesses() {
            return Ok(None);
        }
        let keys = policy
            .witnesses
            .iter()
            .map(|(name, key)| chainship_anchor::cosignature::WitnessKey::from_policy(name, *key))
            .collect();
        Ok(Some(chainship_anchor::cosignature::WitnessPolicy {
            keys,
            quorum: 0,
            rule: Some(policy),
        }))
    }
}

/// `--metrics-textfile`: for checks run on a schedule.
#[derive(Args, Clone, Debug)]
pub struct JobMetricsArgs {
    /// After the run (also one that failed), write Prometheus metrics of its result to
    /// this file, atomically, for node_exporter's textfile collector.
    #[arg(long, value_name = "FILE")]
    pub metrics_textfile: Option<PathBuf>,
}

/// `--jobs`: how many threads walk the chain.
#[derive(Args, Clone, Copy, Debug)]
pub struct WalkArgs {
    /// Threads checking the chain at once, each on its own seq range and
    /// read-only connection (default: the cores available). The report is
    /// the same with any number.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub jobs: Option<u16>,
}

impl WalkArgs {
    /// For [`chainship_chain::WalkPlan::jobs`]: 0 = the cores available.
    pub fn jobs(&self) -> usize {
        self.jobs.map_or(0, usize::from)
    }
}

/// `--json`.
#[derive(Args, Debug)]
pub struct OutputArgs {
    /// Print the result as one JSON document on stdout (logs stay on stderr).
    #[arg(long)]
    pub json: bool,
}
