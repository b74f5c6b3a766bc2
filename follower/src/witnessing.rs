//! Asking witnesses to cosign each published checkpoint (C2SP
//! `tlog-witness`), off the export path.
//!
//! The tree builder announces every checkpoint it publishes on a `watch`
//! channel (the newest wins); this task submits the newest one to every
//! witness that has not cosigned it: `old <size the witness last cosigned>`,
//! the consistency proof from that size (read from the store's tiles), the
//! signed checkpoint. A `409` tells the witness's real size: the proof is
//! made again from there. Once `quorum` witnesses cosigned a checkpoint,
//! the checkpoint with their cosignature lines is kept write-once at
//! `cosigned/<size>` (the plain checkpoint was kept before, with the head)
//! and becomes the `checkpoint` pointer standard clients read.
//!
//! A witness's answer is evidence about the witness, never a reason to
//! stop exporting or anchoring: `422` (it saw a history this checkpoint
//! does not extend), `409` twice for one size, or a size larger than any
//! checkpoint of this log (it claims to have cosigned one that was never
//! published) are logged with both sizes, counted, kept beside its size in
//! `<cursor>.witnesses` (`# URL said: ...`), and make readiness fail after
//! `--unhealthy-after`; a claimed size larger than ours is never kept as the
//! witness's state. A `follow --once` that ends without the quorum exits 1
//! when a witness contradicted the log, else 2 (as for an unpublished head).
//! `403`/`404` (the witness does not know this log or key) is a setup error
//! naming the witness: the follower stops. Anything else is retried with
//! backoff, also while a stopping follower waits `--shutdown-grace`.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use chainship_anchor::checkpoint::read_checkpoint;
use chainship_anchor::cosignature::WitnessKey;
use chainship_anchor::log_publish::{advance_pointer, newest_checkpoint};
use chainship_anchor::note::SignedNote;
use chainship_anchor::tile_reader::TileReader;
use chainship_anchor::{AnchorStore, Signer, VerifierKey};
use chainship_chain::Error;
use chainship_tlog::merkle::consistency_proof;
use metrics::{counter, gauge};
use tokio::sync::watch;

use crate::cursor::write_atomically;
use crate::health::Health;
use crate::metrics as m;
use crate::witness_http::{self, Answer, HttpsClient};

/// A witness: where to submit, and the key its cosignatures must verify with.
#[derive(Clone, Debug)]
pub struct Witness {
    pub url: String,
    pub key: WitnessKey,
}

/// A checkpoint as published: its size and the signed note.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublishedCheckpoint {
    pub size: u64,
    pub note: String,
}

pub struct Witnessing {
    pub witnesses: Vec<Witness>,
    pub quorum: usize,
    pub store: Arc<AnchorStore>,
    pub keys: Arc<Vec<Arc<dyn Signer>>>,
    pub origin: String,
    /// `<cursor>.witnesses`: each witness's last cosigned size.
    pub state_file: PathBuf,
    pub max_delay: Duration,
    pub health: Arc<Health>,
    pub stop: Arc<AtomicBool>,
}

/// What the follower learns from the task when it ends.
pub struct WitnessingHandle {
    failure: Arc<OnceLock<Error>>,
    contradiction: Arc<std::sync::Mutex<Option<String>>>,
    cosigned: watch::Receiver<u64>,
}

impl WitnessingHandle {
    /// Waits until a checkpoint of at least `size` is kept cosigned, at most `limit`.
    pub async fn wait_for(&mut self, size: u64, limit: Duration) -> bool {
        tokio::time::timeout(limit, self.cosigned.wait_for(|s| *s >= size))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// The setup error that stopped the follower (a witness that does not
    /// know this log), if any.
    pub fn failure(&self) -> Option<Error> {
        self.failure.get().cloned()
    }

    /// The last time a witness contradicted this log (422, 409 twice, a
    /// size never published), in words: evidence, not a stop.
    pub fn contradiction(&self) -> Option<String> {
        self.contradiction.lock().ok().and_then(|c| c.clone())
    }
}

/// The kinds a witness failure is counted under (`kind` of
/// `chainship_witness_failures_total`).
pub const FAILURE_KINDS: [&str; 8] = [
    "misbehaving",
    "rolled-back",
    "inconsistent",
    "refused",
    "proof",
    "unavailable",
    "conflict",
    "bad-cosignature",
];

/// How one witness answered for one checkpoint.
pub enum Outcome {
    /// Its verified cosignature line(s).
    Cosigned(String),
    /// It has cosigned a larger checkpoint of this log (another publisher got further).
    Ahead(u64),
    Inconsistent {
        old: u64,
        why: String,
    },
    Refused(String),
    Failed {
        kind: &'static str,
        why: String,
    },
}

impl Witnessing {
    pub fn spawn(
        self,
        rt: &tokio::runtime::Handle,
        published: watch::Receiver<Option<PublishedCheckpoint>>,
    ) -> WitnessingHandle {
        // Every witness's failure counters exist from the start, at 0: one that
        // appears only at its first increment hides it from `increase()`.
        for w in &self.witnesses {
            for kind in FAILURE_KINDS {
                counter!(m::WITNESS_FAILURES, "witness" => w.key.name.clone(), "kind" => kind).increment(0);
            }
        }
        let failure = Arc::new(OnceLock::new());
        let contradiction = Arc::new(std::sync::Mutex::new(None));
        let (done, cosigned) = watch::channel(0);
        rt.spawn(self.run(published, Arc::clone(&failure), Arc::clone(&contradiction), done));
        WitnessingHandle {
            failure,
            contradiction,
            cosigned,
        }
    }

    async fn run(
        self,
        mut published: watch::Receiver<Option<PublishedCheckpoint>>,
        failure: Arc<OnceLock<Error>>,
        contradiction: Arc<std::sync::Mutex<Option<String>>>,
        done: watch::Sender<u64>,
    ) {
        // What each witness last said against this log, kept with its size.
        let mut said: BTreeMap<String, String> = BTreeMap::new();
        let contradicted = |said: &mut BTreeMap<String, String>, url: &str, message: String| {
            tracing::error!("{message}");
            self.health.witness_failing(&message);
            said.insert(url.to_owned(), format!("{} {message}", unix_now() as u64));
            if let Ok(mut c) = contradiction.lock() {
                *c = Some(message);
            }
        };
        // Once the follower is done, the newest checkpoint is still asked for
        // until it stops waiting (`--shutdown-grace`).
        let mut closed = false;
        let fail = |e: Error| {
            tracing::error!(error = %e, "witnessing stops the follower");
            self.health.fatal(&e.message);
            let _ = failure.set(e);
            self.stop.store(true, Ordering::Relaxed);
        };
        let client = match witness_http::client() {
            Ok(c) => c,
            Err(e) => return fail(Error::permanent(e)),
        };
        let mut sizes = load_sizes(&self.state_file);
        let verifiers: Vec<VerifierKey> = chainship_anchor::signer::verifiers(&self.keys);
        // Until this life publishes one: the newest kept, which may be uncosigned.
        let mut current = match newest_checkpoint(self.store.as_ref(), &self.origin, &verifiers).await {
            Ok(found) => found.map(|(_, note)| note),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the newest checkpoint; witnessing starts with the next one");
                None
            }
        }
        .and_then(|note| {
            let size = read_checkpoint(note.as_bytes(), &verifiers).ok()?.checkpoint.size;
            Some(PublishedCheckpoint { size, note })
        });
        let mut cosigned: BTreeMap<usize, String> = BTreeMap::new();
        // Already kept cosigned (by an earlier life): nothing to ask for it.
        let mut done_size = match &current {
            Some(cp) => match self
                .store
                .get_object(&self.origin, &chainship_anchor::checkpoint::cosigned_path(cp.size))
                .await
            {
                Ok(Some(_)) => cp.size,
                _ => 0,
            },
            None => 0,
        };
        done.send_replace(done_size);
        let mut backoff = self.backoff();
        let mut waiting_since: Option<Instant> = None;
        loop {
            if let Some(newer) = published.borrow_and_update().clone()
                && current.as_ref().is_none_or(|c| newer.size > c.size)
            {
                current = Some(newer);
                cosigned.clear();
            }
            let Some(cp) = current.clone().filter(|c| c.size > done_size) else {
                if published.changed().await.is_err() {
                    return;
                }
                continue;
            };
            waiting_since.get_or_insert_with(Instant::now);
            let pending: Vec<usize> = (0..self.witnesses.len())
                .filter(|i| !cosigned.contains_key(i))
                .collect();
            let asks = pending.iter().map(|&i| {
                let w = &self.witnesses[i];
                let believed = sizes.get(&w.url).copied().unwrap_or(0);
                submit(self.store.as_ref(), &self.origin, &client, w, &cp, believed)
            });
            let answers = futures::future::join_all(asks).await;
            let mut retry = false;
            for (&i, (outcome, known)) in pending.iter().zip(answers) {
                let w = &self.witnesses[i];
                let label = w.key.name.clone();
                if let Some(size) = known.filter(|&size| size > cp.size) {
                    // Larger than this log's newest checkpoint (the store's): a
                    // size never published here. Kept as what it said, never as its state.
                    counter!(m::WITNESS_FAILURES, "witness" => label.clone(), "kind" => "misbehaving").increment(1);
                    let message = format!(
                        "witness-misbehaving: witness {} ({}) claims to have cosigned checkpoint {size} of origin {:?}, larger than any this log published ({})",
                        w.key.name, w.url, self.origin, cp.size
                    );
                    contradicted(&mut said, &w.url, message);
                } else if let Some(size) = known {
                    let recorded = sizes.get(&w.url).copied().unwrap_or(0);
                    if size < recorded {
                        // It cosigned `recorded` before: its state went back (restored, or another witness at that URL).
                        counter!(m::WITNESS_FAILURES, "witness" => label.clone(), "kind" => "rolled-back").increment(1);
                        tracing::warn!(witness = %w.url, witness_size = size, cosigned_before = recorded, "the witness says it last cosigned a smaller checkpoint than it cosigned for this follower before: its state was rolled back; submitting from its size");
                    }
                    sizes.insert(w.url.clone(), size);
                }
                match outcome {
                    Outcome::Cosigned(lines) => {
                        sizes.insert(w.url.clone(), cp.size);
                        gauge!(m::WITNESS_COSIGNED_SIZE, "witness" => label.clone()).set(cp.size as f64);
                        gauge!(m::WITNESS_LAST_SUCCESS, "witness" => label).set(unix_now());
                        cosigned.insert(i, lines);
                    }
                    Outcome::Ahead(_) => {
                        // Said above (a size larger than any of ours); asked again with the next checkpoint.
                    }
                    Outcome::Inconsistent { old, why } => {
                        counter!(m::WITNESS_FAILURES, "witness" => label, "kind" => "inconsistent").increment(1);
                        let why = if why.trim().is_empty() {
                            "no detail given".to_owned()
                        } else {
                            why
                        };
                        let message = format!(
                            "witness-inconsistent: witness {} ({}) says checkpoint {} of origin {:?} does not extend the checkpoint of size {old} it cosigned: {why}",
                            w.key.name, w.url, cp.size, self.origin
                        );
                        contradicted(&mut said, &w.url, message);
                    }
                    Outcome::Refused(why) => {
                        // Evidence about the witness (or its setup), never a
                        // reason to stop exporting: said, kept, asked again.
                        counter!(m::WITNESS_FAILURES, "witness" => label, "kind" => "refused").increment(1);
                        let message = format!(
                            "witness {} ({}) refuses origin {:?} (does it know the log and its verifier key?): {why}",
                            w.key.name, w.url, self.origin
                        );
                        if said.get(&w.url).is_none_or(|kept| !kept.ends_with(&message)) {
                            tracing::error!(witness = %w.url, "{message}; the export goes on, asking again");
                        }
                        said.insert(w.url.clone(), format!("{} {message}", unix_now() as u64));
                        retry = true;
                    }
                    Outcome::Failed { kind, why } => {
                        counter!(m::WITNESS_FAILURES, "witness" => label, "kind" => kind).increment(1);
                        tracing::warn!(witness = %w.url, size = cp.size, error = %why, "a witness did not cosign; retrying");
                        retry = true;
                    }
                }
            }
            if let Err(e) = write_atomically(&self.state_file, save_sizes(&sizes, &said).as_bytes()) {
                tracing::warn!(file = %self.state_file.display(), error = %e, "cannot keep the witnesses' sizes");
            }
            if cosigned.len() >= self.quorum {
                match self.keep_cosigned(&cp, &cosigned).await {
                    Ok(()) => {
                        gauge!(m::WITNESS_QUORUM_SIZE).set(cp.size as f64);
                        self.health.witness_ok();
                        tracing::debug!(
                            size = cp.size,
                            cosignatures = cosigned.len(),
                            "cosigned checkpoint kept"
                        );
                        done_size = cp.size;
                        done.send_replace(cp.size);
                        waiting_since = None;
                        backoff = self.backoff();
                        // More cosignatures than the quorum are welcome, never waited for.
                        continue;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot keep the cosigned checkpoint; retrying");
                        retry = true;
                    }
                }
            } else if let Some(since) = waiting_since {
                self.health.witness_failing(&format!(
                    "checkpoint {} has {} of {} cosignatures needed (waiting {}s)",
                    cp.size,
                    cosigned.len(),
                    self.quorum,
                    since.elapsed().as_secs()
                ));
            }
            let delay = if retry {
                backoff.next().unwrap_or(self.max_delay)
            } else {
                self.max_delay
            };
            if closed {
                tokio::time::sleep(delay).await;
                continue;
            }
            tokio::select! {
                changed = published.changed() => closed = changed.is_err(),
                _ = tokio::time::sleep(delay) => {}
            }
        }
    }

    fn backoff(&self) -> impl Iterator<Item = Duration> + use<> {
        crate::retry::background_backoff(self.max_delay)
    }

    /// Keeps `cp` with the cosignatures write-once and points `checkpoint` at it.
    async fn keep_cosigned(&self, cp: &PublishedCheckpoint, cosigned: &BTreeMap<usize, String>) -> Result<(), Error> {
        let note: String = format!("{}{}", cp.note, cosigned.values().cloned().collect::<String>());
        let path = chainship_anchor::checkpoint::cosigned_path(cp.size);
        self.store.put_object_new(&self.origin, &path, note.as_bytes()).await?;
        let verifiers: Vec<VerifierKey> = chainship_anchor::signer::verifiers(&self.keys);
        advance_pointer(self.store.as_ref(), &self.origin, &verifiers, cp.size, &note).await
    }
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// `<url> <size>` lines.
fn load_sizes(path: &std::path::Path) -> HashMap<String, u64> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (url, size) = l.rsplit_once(' ')?;
            Some((url.to_owned(), size.parse().ok()?))
        })
        .collect()
}

/// Each witness's size (`URL SIZE`), then what any said against this log
/// (`# URL said: UNIX-SECONDS MESSAGE`).
fn save_sizes(sizes: &HashMap<String, u64>, said: &BTreeMap<String, String>) -> String {
    let mut lines: Vec<String> = sizes.iter().map(|(u, s)| format!("{u} {s}\n")).collect();
    lines.sort();
    lines.extend(
        said.iter()
            .map(|(u, m)| format!("# {u} said: {}\n", m.replace('\n', " "))),
    );
    lines.concat()
}

/// Submits `cp` to witness `w`, from the size it is believed to know,
/// following its `409`s (the consistency proof read from `store`'s tiles).
/// Returns the outcome and the size it said it knows.
pub async fn submit(
    store: &AnchorStore,
    origin: &str,
    client: &HttpsClient,
    w: &Witness,
    cp: &PublishedCheckpoint,
    believed: u64,
) -> (Outcome, Option<u64>) {
    let mut old = believed.min(cp.size);
    let mut known = None;
    // A 409 names the witness's size; one more try from there settles it.
    for _ in 0..3 {
        if old > cp.size {
            return (Outcome::Ahead(old), known);
        }
        let proof = if old == 0 || old == cp.size {
            Vec::new()
        } else {
            let mut reader = TileReader::new(store, origin);
            match reader.run(cp.size, |set| consistency_proof(old, cp.size, set)).await {
                Ok(p) => p,
                Err(e) => {
                    let why = format!("no consistency proof from {old} to {}: {e}", cp.size);
                    return (Outcome::Failed { kind: "proof", why }, known);
                }
            }
        };
        match witness_http::add_checkpoint(client, &w.url, witness_http::body(old, &proof, &cp.note)).await {
            Answer::Cosigned(lines) => return (verify(w, cp, &lines), known),
            Answer::Conflict(size) if Some(size) == known => {
                // The same size twice: at our size, the witness holds another root.
                let why = "it holds another root for that size (409 twice)".into();
                return (Outcome::Inconsistent { old: size, why }, known);
            }
            Answer::Conflict(size) => {
                known = Some(size);
                old = size;
            }
            Answer::Inconsistent(why) => return (Outcome::Inconsistent { old, why }, known),
            Answer::Refused(_, why) => return (Outcome::Refused(why), known),
            Answer::Failed(why) => {
                return (
                    Outcome::Failed {
                        kind: "unavailable",
                        why,
                    },
                    known,
                );
            }
        }
    }
    let why = "the witness kept answering 409".into();
    (Outcome::Failed { kind: "conflict", why }, known)
}

/// The witness's cosignature lines on `cp` that verify with its key.
fn verify(w: &Witness, cp: &PublishedCheckpoint, lines: &str) -> Outcome {
    let prefix = format!("\u{2014} {} ", w.key.name);
    let verifies = |line: &str| {
        SignedNote::parse(format!("{}{line}\n", cp.note).as_bytes())
            .ok()
            .and_then(|note| w.key.check(&note))
            .is_some_and(|r| r.is_ok())
    };
    // One line is enough, and only one that verifies is kept.
    match lines.lines().filter(|l| l.starts_with(&prefix)).find(|l| verifies(l)) {
        Some(line) => Outcome::Cosigned(format!("{line}\n")),
        None => Outcome::Failed {
            kind: "bad-cosignature",
            why: format!("its answer holds no cosignature that verifies with {}", w.key.to_text()),
        },
    }
}

/// What `chainship check` asks each witness: to cosign the newest kept
/// checkpoint of `origin` signed by one of `keys`, as the follower would
/// (from the size it knows, with a consistency proof); a witness passes
/// only if its cosignature verifies with the key given. With no store, or
/// no checkpoint kept yet, nothing can be asked, and each says so. Returns
/// each witness's name and address, and what it did or why it failed (a
/// contradiction is an integrity error, an unreachable witness transient).
pub async fn probe(
    store: Option<&AnchorStore>,
    origin: &str,
    keys: &[VerifierKey],
    witnesses: &[Witness],
) -> Result<Vec<(String, Result<String, Error>)>, Error> {
    let newest = match store {
        Some(store) => newest_checkpoint(store, origin, keys).await?,
        None => None,
    };
    let client = crate::witness_http::client()?;
    let mut out = Vec::new();
    for w in witnesses {
        let what = format!("witness {} ({})", w.key.name, w.url);
        let (Some(store), Some((cp, note))) = (store, &newest) else {
            out.push((
                what,
                Err(Error::permanent(
                    "not asked: no checkpoint signed by the signing key is kept yet (check again after the first one)",
                )),
            ));
            continue;
        };
        let published = PublishedCheckpoint {
            size: cp.size,
            note: note.clone(),
        };
        let (outcome, _) = submit(store, origin, &client, w, &published, 0).await;
        let r = match outcome {
            Outcome::Cosigned(_) => Ok(format!(
                "cosigned checkpoint {} of {origin:?}; its cosignature verifies with the key given",
                cp.size
            )),
            Outcome::Ahead(size) => Err(chainship_chain::integrity!(
                "has cosigned size {size} of {origin:?}, above the newest checkpoint {}: another publisher or another history",
                cp.size
            )),
            Outcome::Inconsistent { old, why } => Err(chainship_chain::integrity!(
                "refuses checkpoint {} as inconsistent with the size {old} it cosigned: {why}",
                cp.size
            )),
            Outcome::Refused(why) => Err(chainship_chain::permanent!(
                "does not know origin {origin:?} or its key: {why}"
            )),
            Outcome::Failed { why, .. } => Err(Error::transient(why)),
        };
        out.push((what, r));
    }
    Ok(out)
}
