//! The whole sidecar, wired once: the follower, and beside it the anchoring
//! task (heads, and unless heads only the transparency log) and the
//! witnessing task; their sibling files next to the cursor; and the order
//! in which a run ends (the export stops, the newest head gets the grace to
//! be published, then the witnesses get theirs).
//!
//! The CLI maps flags to a [`Pipeline`] and renders its [`Ending`].

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use chainship_anchor::{AnchorStore, Signer};
use chainship_chain::{ChainBreak, Error, Head};
use chainship_sinks::Sink;

use crate::anchoring::{Anchoring, AnchoringHandle};
use crate::config::FollowConfig;
use crate::cursor::FileCursor;
use crate::error::FollowError;
use crate::follow::{Follower, Outcome};
use crate::health::Health;
use crate::tree_log::TreeLog;
use crate::witnessing::{Witness, Witnessing, WitnessingHandle};

/// Where heads go and who cosigns.
pub struct AnchorSetup {
    pub store: Arc<AnchorStore>,
    pub keys: Vec<Arc<dyn Signer>>,
    /// Publish the transparency log (checkpoints and tiles) with each head.
    pub checkpoints: bool,
    pub witnesses: Vec<Witness>,
    /// Cosignatures a checkpoint needs.
    pub quorum: usize,
    /// Publish a head at most this often; and the heartbeat's period.
    pub interval: Duration,
    pub heartbeat: Duration,
}

/// Everything a run is told.
pub struct Pipeline {
    pub config: FollowConfig,
    pub sink: Box<dyn Sink>,
    pub cursor: FileCursor,
    pub anchor: Option<AnchorSetup>,
    /// Longest wait between retries of a failing store or witness.
    pub retry_max_delay: Duration,
    /// How long the newest head, then the witnesses, may take at the end.
    pub shutdown_grace: Duration,
    pub stop: Arc<AtomicBool>,
    pub health: Arc<Health>,
}

/// How a run ended, for the CLI to render (and map to an exit code).
#[derive(Debug)]
pub enum Ending {
    /// Delivered what there was (`--once`), or stopped by a signal; the
    /// heads delivered and anchored so far.
    Done {
        delivered: Option<Head>,
        anchored: Option<u64>,
    },
    /// Stopped by a signal while a delivery was failing.
    Interrupted(String),
    /// The chain broke.
    Broken(Box<ChainBreak>),
    /// The follower failed.
    Failed(FollowError),
    /// The anchoring task died (a bug or a hung runtime).
    AnchoringCrashed(String),
    /// The anchor store contradicts the delivered chain (heads-disagree,
    /// checkpoints-disagree): a finding.
    AnchorContradicts(String),
    /// The witnessing task stopped on an error.
    WitnessingFailed(Error),
    /// A `--once` run whose newest head was not published within the
    /// grace: the newest head, the last published seq and the store's last error.
    NotAnchored {
        newest: Head,
        published: u64,
        error: Option<Error>,
    },
    /// A `--once` run whose newest checkpoint met no quorum within the
    /// grace; with what a witness contradicted, if one did.
    NoQuorum {
        message: String,
        contradiction: Option<String>,
    },
}

impl Ending {
    /// The ending as a result: `Ok` for a run that stopped as asked (the
    /// line to log), else the error, whose kind says what failed: the data
    /// (integrity: a break, a store or witness contradicting the chain) or
    /// the setup (everything else). `db` names the database in a break.
    pub fn into_result(self, db: &std::path::Path) -> Result<Stopped, Error> {
        match self {
            Ending::Done { delivered, anchored } => Ok(Stopped::Done { delivered, anchored }),
            Ending::Interrupted(message) => Ok(Stopped::Interrupted(message)),
            Ending::Broken(b) => Err(Error::integrity(format!("{}: {b}", db.display()))),
            Ending::Failed(FollowError::Stop(e)) => Err(e),
            Ending::Failed(FollowError::Interrupted(m)) => Err(Error::transient(m)),
            Ending::AnchoringCrashed(crash) => Err(Error::permanent(crash)),
            Ending::AnchorContradicts(finding) => Err(Error::integrity(finding)),
            Ending::WitnessingFailed(e) => Err(e),
            Ending::NotAnchored {
                newest,
                published,
                error,
            } => {
                let why = error.as_ref().map_or(String::new(), |e| format!(": {}", e.message));
                let stopped = Error::permanent(format!(
                    "the newest head {newest} was not published to the anchor store within the shutdown grace (last published: seq {published}){why}; it is in the cursor and the next run publishes it"
                ));
                // The setting the store's error points at is this error's too.
                Err(match error.and_then(|e| e.setting) {
                    Some(setting) => stopped.with_setting(setting),
                    None => stopped,
                })
            }
            Ending::NoQuorum { message, contradiction } => Err(match contradiction {
                Some(c) => Error::integrity(format!("{message}; {c}")),
                None => Error::permanent(message),
            }),
        }
    }
}

/// A run that stopped as asked.
#[derive(Debug)]
pub enum Stopped {
    /// Delivered what there was, or stopped by a signal.
    Done {
        delivered: Option<Head>,
        anchored: Option<u64>,
    },
    /// Stopped by a signal while a delivery was failing.
    Interrupted(String),
}

impl Pipeline {
    /// Runs until the follower is done, stopped or fails, on `runtime`.
    pub fn run(self, runtime: &tokio::runtime::Runtime) -> Ending {
        let Pipeline {
            config,
            sink,
            cursor,
            anchor,
            retry_max_delay,
            shutdown_grace,
            stop,
            health,
        } = self;
        let once = config.once;
        let origin = config.origin.clone();
        let anchored_file = cursor.sibling(".anchored");
        let witness_state = cursor.sibling(".witnesses");
        let tree_state = cursor.sibling(".tlog");
        let (tree_db, tree_open) = (config.db.clone(), config.open.clone());
        let mut follower = Follower::new(
            config,
            sink,
            cursor,
            runtime.handle().clone(),
            Arc::clone(&stop),
            Arc::clone(&health),
        );
        let delivered = follower.delivered_heads();
        let mut witnessing: Option<WitnessingHandle> = None;
        let anchoring: Option<AnchoringHandle> = anchor.map(|setup| {
            let keys = Arc::new(setup.keys);
            let store = setup.store;
            let tree_log = setup.checkpoints.then(|| {
                let log = TreeLog::new(
                    Arc::clone(&store),
                    Arc::clone(&keys),
                    origin.clone(),
                    tree_db,
                    tree_open,
                    tree_state,
                )
                .with_feed(follower.hash_feed());
                if setup.witnesses.is_empty() {
                    return log;
                }
                let (announce, published) = tokio::sync::watch::channel(None);
                witnessing = Some(
                    Witnessing {
                        witnesses: setup.witnesses,
                        quorum: setup.quorum,
                        store: Arc::clone(&store),
                        keys: Arc::clone(&keys),
                        origin: origin.clone(),
                        state_file: witness_state,
                        max_delay: retry_max_delay,
                        health: Arc::clone(&health),
                        stop: Arc::clone(&stop),
                    }
                    .spawn(runtime.handle(), published),
                );
                log.with_announce(announce)
            });
            Anchoring {
                store,
                keys,
                tree_log,
                origin: origin.clone(),
                anchored_file,
                max_delay: retry_max_delay,
                interval: setup.interval,
                heartbeat: setup.heartbeat,
                stop: Arc::clone(&stop),
                health: Arc::clone(&health),
            }
            .spawn(runtime.handle(), follower.delivered_heads())
        });
        let result = follower.run();
        if let Some(crash) = anchoring.as_ref().and_then(AnchoringHandle::crashed) {
            return Ending::AnchoringCrashed(crash);
        }
        if let Some(finding) = anchoring.as_ref().and_then(AnchoringHandle::failure) {
            return Ending::AnchorContradicts(finding);
        }
        if let Some(failure) = witnessing.as_ref().and_then(WitnessingHandle::failure) {
            return Ending::WitnessingFailed(failure);
        }
        let last = *delivered.borrow();
        let grace = shutdown_grace.max(Duration::from_secs(1));
        let mut anchoring = anchoring;
        // Give the newest head a chance to be published before exiting.
        if let (Some(anchoring), Some(last)) = (anchoring.as_mut(), last)
            && !runtime.block_on(anchoring.wait_for(last.seq, grace))
        {
            if let Some(finding) = anchoring.failure() {
                return Ending::AnchorContradicts(finding);
            }
            // A cron job must not read success while the copy is not anchored.
            if once && result.is_ok() {
                return Ending::NotAnchored {
                    newest: last,
                    published: anchoring.published_seq(),
                    error: anchoring.last_error(),
                };
            }
            tracing::warn!(
                "the newest head {last} was not published to the anchor store within the shutdown grace (last published: seq {}); it is in the cursor and the next run publishes it",
                anchoring.published_seq()
            );
        }
        // The export never waits for witnesses; a run that ends gives them a moment.
        if let (Some(w), Some(last)) = (witnessing.as_mut(), last)
            && !runtime.block_on(w.wait_for(last.seq, grace))
        {
            if let Some(failure) = w.failure() {
                return Ending::WitnessingFailed(failure);
            }
            let message = format!(
                "checkpoint {} has no quorum of witness cosignatures within the shutdown grace; the next run asks again",
                last.seq
            );
            // A cron job must not read success while the quorum was not met.
            if once && result.is_ok() {
                return Ending::NoQuorum {
                    message,
                    contradiction: w.contradiction(),
                };
            }
            tracing::warn!("{message}");
        }
        let anchored = anchoring.as_ref().map(AnchoringHandle::published_seq);
        match result {
            Ok(Outcome::Done) | Ok(Outcome::Stopped) => Ending::Done {
                delivered: last,
                anchored,
            },
            Ok(Outcome::Broken(b)) => Ending::Broken(b),
            Err(FollowError::Interrupted(m)) => Ending::Interrupted(m),
            Err(e) => Ending::Failed(e),
        }
    }
}

/// The follower's runtime (two workers), shut down within a bound however
/// the command ends: a store or sink call stuck in the kernel (a hung
/// mount) must not keep the process from exiting.
pub struct BoundedRuntime(Option<tokio::runtime::Runtime>, Duration);

impl BoundedRuntime {
    /// A runtime whose shutdown waits at most `grace` (at least 1 s).
    pub fn new(grace: Duration) -> Result<BoundedRuntime, Error> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| Error::permanent(format!("cannot start the async runtime: {e}")))?;
        Ok(BoundedRuntime(Some(runtime), grace.max(Duration::from_secs(1))))
    }
}

impl std::ops::Deref for BoundedRuntime {
    type Target = tokio::runtime::Runtime;
    fn deref(&self) -> &Self::Target {
        self.0.as_ref().expect("present until dropped")
    }
}

impl Drop for BoundedRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_timeout(self.1);
        }
    }
}
