//! The transparency log of the delivered chain, published with each head.
//!
//! Before a head is published, the RFC 6962 tree of the event hashes is
//! extended to the head's seq (the tree of size N is the chain up to seq
//! N), every full tile and entry bundle completed on the way is written
//! to the anchor store, then the partial tiles and the signed checkpoint of
//! size N (see `chainship_anchor::log_publish`).
//!
//! The entries are the hashes the follower delivered, handed over by the
//! delivery thread ([`crate::hash_feed`], bounded). What the feed does not
//! hold (after a restart, an anchor store outage, a builder that lagged)
//! is read again from the database and re-hashed along the chain up to the
//! delivered head (which the follower checked as it read it): a row changed
//! since delivery cannot lead there, and is an integrity finding. The
//! export path only copies hashes, and an anchor store that is down only
//! delays this work, as it delays the heads.
//!
//! Only the tree's right edge is held (a few tens of KB), and it is kept
//! in `<cursor>.tlog` after each checkpoint: a restart extends the tree
//! from there, reading only the events since. Without that file (the first
//! run with checkpoints, or it was lost) the tree is built from seq 1.
//! Either way, before its first checkpoint this process proves, with a
//! consistency proof read from the store's own tiles, that its tree and the
//! newest checkpoint the store keeps under this key are one tree; if they
//! are not (a database restored from an older backup and grown again,
//! followed from a fresh cursor), nothing is published and the follower
//! stops with `checkpoints-disagree`.
//!
//! A publication is three writes: the partial tiles, the checkpoint, the
//! head. Each kept without the others looks, to a verifier, like what a
//! deletion leaves (a partial tile of a size with no checkpoint, a
//! checkpoint with no head). So the head being published is recorded in
//! `<cursor>.tlog.pending` before the first write and cleared after the
//! last; a publication cut short (a crash, a store that failed halfway) is
//! finished, at its own size, before anything larger is published.

use chainship_chain::{Error, integrity};
use std::path::PathBuf;
use std::sync::Arc;

use chainship_anchor::checkpoint::Checkpoint;
use chainship_anchor::log_publish::{newest_checkpoint, publish_checkpoint, put_tiles};
use chainship_anchor::tile_reader::TileReader;
use chainship_anchor::{AnchorStore, Signer, StoreError, VerifierKey};
use chainship_chain::{ChainCheck, EventDb, Head, OpenOptions};
use chainship_tlog::merkle::{consistency_proof, verify_consistency};
use chainship_tlog::tiles::{Tile, TileBuilder};

use crate::cursor::write_atomically;

/// The head recorded as being published, if the file holds one.
fn read_pending(file: &std::path::Path) -> Option<Head> {
    let text = std::fs::read_to_string(file).ok()?;
    match text.trim().parse::<Head>() {
        Ok(head) => Some(head),
        Err(e) => {
            tracing::warn!(file = %file.display(), error = %e, "ignoring an unreadable pending publication");
            None
        }
    }
}
use crate::hash_feed::HashFeed;
use crate::witnessing::PublishedCheckpoint;

const STATE_FORMAT: &str = "chainship-tlog-edge/v1";
/// Events read and tiled between two writes to the store (bounds memory:
/// 256 tiles and bundles, about 6 MB).
const CHUNK: u64 = 65_536;

/// Builds and publishes the tree; owned by the anchoring task.
pub struct TreeLog {
    store: Arc<AnchorStore>,
    keys: Arc<Vec<Arc<dyn Signer>>>,
    origin: String,
    db: PathBuf,
    open: OpenOptions,
    /// `<cursor>.tlog`: the right edge at the last published checkpoint.
    state_file: PathBuf,
    edge: Option<Edge>,
    /// Whether this process has checked its tree against the store's.
    checked_store: bool,
    /// The size of the newest checkpoint of this publisher's that the store
    /// keeps, as last seen (its tiles are fixed; past it a kept tile that is
    /// not ours vouches for nothing, see `log_publish::put_tiles`).
    vouched: std::sync::atomic::AtomicU64,
    /// The read-only connection, kept between publishes (in a mutex only
    /// so that the task holding `&self` across awaits stays `Send`).
    conn: std::sync::Mutex<Option<EventDb>>,
    /// Delivered hashes, so the database is read only for what the feed lacks.
    feed: Option<Arc<HashFeed>>,
    /// Where each published checkpoint is announced (to the witnesses).
    announce: Option<tokio::sync::watch::Sender<Option<PublishedCheckpoint>>>,
    /// `<cursor>.tlog.pending`: the head whose publication began and has
    /// not ended (see the module doc).
    pending_file: PathBuf,
    pending: Option<Head>,
    /// Whether this process compared the pending publication with the store.
    pending_settled: bool,
}

/// The tree's right edge and the head it ends at (`head.seq == size`).
#[derive(Clone, Debug, Default)]
struct Edge {
    builder: TileBuilder,
    head: Option<Head>,
}

impl Edge {
    fn size(&self) -> u64 {
        self.builder.size()
    }

    fn to_text(&self) -> String {
        let head = self.head.map_or("none".to_owned(), |h| h.to_string());
        format!("{STATE_FORMAT}\nhead {head}\n{}", self.builder.to_text())
    }

    fn from_text(text: &str) -> Result<Edge, Error> {
        let rest = text
            .strip_prefix(STATE_FORMAT)
            .and_then(|r| r.strip_prefix('\n'))
            .ok_or_else(|| integrity!("the first line is not {STATE_FORMAT}"))?;
        let (line, rest) = rest.split_once('\n').ok_or_else(|| integrity!("no head line"))?;
        let head = match line.strip_prefix("head ").ok_or_else(|| integrity!("no head line"))? {
            "none" => None,
            h => Some(h.parse::<Head>().map_err(|e| integrity!("{e}"))?),
        };
        let builder = TileBuilder::from_text(rest)?;
        let agrees = match head {
            None => builder.size() == 0,
            Some(h) => h.seq == builder.size() && builder.last_entry().is_none_or(|e| e == h.hash),
        };
        if !agrees {
            return Err(integrity!("its head does not match its tree"));
        }
        Ok(Edge { builder, head })
    }
}

impl TreeLog {
    pub fn new(
        store: Arc<AnchorStore>,
        keys: Arc<Vec<Arc<dyn Signer>>>,
        origin: String,
        db: PathBuf,
        open: OpenOptions,
        state_file: PathBuf,
    ) -> Self {
        let mut pending_file = state_file.clone().into_os_string();
        pending_file.push(".pending");
        let pending_file = PathBuf::from(pending_file);
        let pending = read_pending(&pending_file);
        TreeLog {
            store,
            keys,
            origin,
            db,
            open,
            state_file,
            pending_file,
            pending,
            pending_settled: false,
            edge: None,
            checked_store: false,
            vouched: std::sync::atomic::AtomicU64::new(0),
            conn: std::sync::Mutex::new(None),
            feed: None,
            announce: None,
        }
    }

    /// Announces each published checkpoint on `to` (the witnessing task).
    pub fn with_announce(mut self, to: tokio::sync::watch::Sender<Option<PublishedCheckpoint>>) -> Self {
        self.announce = Some(to);
        self
    }

    /// Takes the delivered events' hashes from `feed` where it holds them.
    pub fn with_feed(mut self, feed: Arc<HashFeed>) -> Self {
        self.feed = Some(feed);
        self
    }

    /// Extends the tree to `head` and publishes its tiles and checkpoint.
    /// On any error the in-memory edge is dropped: the next attempt starts
    /// again from the last persisted one (whatever was written is written
    /// again with the same bytes).
    pub async fn publish(&mut self, head: Head) -> Result<(), StoreError> {
        let result = self.finish_pending(head).await;
        let result = match result.and_then(|()| self.begin(head)) {
            Ok(()) => self.publish_inner(head).await,
            Err(e) => Err(e),
        };
        self.forget_on_error(result)
    }

    /// The head of the checkpoint [`TreeLog::publish`] wrote is kept too:
    /// the publication is whole.
    pub fn head_published(&mut self, head: Head) {
        if self.pending.is_some_and(|p| p.seq <= head.seq) {
            self.pending = None;
            if let Err(e) = std::fs::remove_file(&self.pending_file)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                tracing::warn!(file = %self.pending_file.display(), error = %e, "cannot clear the pending publication");
            }
        }
    }

    /// Records `head` as the publication under way, before its first write.
    fn begin(&mut self, head: Head) -> Result<(), StoreError> {
        if self.pending == Some(head) {
            return Ok(());
        }
        write_atomically(&self.pending_file, format!("{head}\n").as_bytes()).map_err(|e| {
            StoreError::transient(format!(
                "cannot record the publication under way in {}: {e}",
                self.pending_file.display()
            ))
        })?;
        self.pending = Some(head);
        Ok(())
    }

    /// A publication cut short at a smaller size than `head` is finished
    /// first, at its own size: its partial tiles, checkpoint and head.
    async fn finish_pending(&mut self, head: Head) -> Result<(), StoreError> {
        self.settle_pending().await?;
        let Some(pending) = self.pending.filter(|p| p.seq < head.seq) else {
            return Ok(());
        };
        // The edge in memory may be past it (prepared for a later head).
        if self.edge.as_ref().is_some_and(|e| e.size() > pending.seq) {
            self.edge = None;
        }
        tracing::info!(%pending, "finishing a publication that was cut short before publishing a later head");
        self.publish_inner(pending).await?;
        chainship_anchor::publish_head(self.store.as_ref(), &self.keys, &self.origin, pending, true, None).await?;
        self.head_published(pending);
        Ok(())
    }

    /// Extends the tree to `head` and writes the tiles it completes, without
    /// a checkpoint: between heads (`--anchor-interval`), so the tree keeps up
    /// with delivery and the hash feed is drained instead of overflowing into
    /// a re-read of the database when the next head is due.
    pub async fn prepare(&mut self, head: Head) -> Result<(), StoreError> {
        let result = self.prepare_inner(head).await;
        self.forget_on_error(result)
    }

    /// After a failure the edge in memory is not trusted: the next call starts
    /// again from the kept one.
    fn forget_on_error(&mut self, result: Result<(), StoreError>) -> Result<(), StoreError> {
        if result.is_err() {
            self.edge = None;
            self.take_conn();
        }
        result
    }

    /// Once per process: a recorded publication the store has since gone
    /// past (its head kept, or a higher head another follower of this origin
    /// published) is no longer this process's to finish. Publishing its head
    /// now would be a head published after a higher one; what is left of it
    /// (a partial tile) is said, once, for the operator.
    async fn settle_pending(&mut self) -> Result<(), StoreError> {
        let Some(pending) = self.pending.filter(|_| !self.pending_settled) else {
            return Ok(());
        };
        let verifiers = chainship_anchor::signer::verifiers(&self.keys);
        let highest = chainship_anchor::highest_verified_head(self.store.as_ref(), &self.origin, &verifiers).await?;
        self.pending_settled = true;
        match highest {
            Some(kept) if kept.seq == pending.seq => self.head_published(pending),
            Some(kept) if kept.seq > pending.seq => {
                tracing::error!(
                    %pending,
                    kept = %kept,
                    "a publication this follower began was cut short, and the store has since gone past it (another follower of this origin published a higher head): it cannot be finished without publishing a head after a higher one; verifiers will name its partial tiles as checkpoint-missing"
                );
                self.head_published(pending);
            }
            _ => {}
        }
        Ok(())
    }

    async fn prepare_inner(&mut self, head: Head) -> Result<(), StoreError> {
        self.settle_pending().await?;
        // Never past a publication cut short: it is finished at its own size first.
        let head = match self.pending.filter(|p| p.seq < head.seq) {
            Some(pending) if self.edge.as_ref().is_none_or(|e| e.size() <= pending.seq) => pending,
            _ => head,
        };
        let edge = match self.edge.take() {
            Some(edge) if edge.size() <= head.seq => edge,
            _ => self.load(head).await?,
        };
        // Before this process writes anything, its tree must be the store's
        // (again each time while the store's is ahead of it).
        if !self.checked_store {
            self.checked_store = !self.check_against_store(&edge, head).await?;
        }
        self.edge = Some(self.advance(edge, head.seq, Keep::Write).await?);
        Ok(())
    }

    async fn publish_inner(&mut self, head: Head) -> Result<(), StoreError> {
        self.prepare_inner(head).await?;
        let edge = self
            .edge
            .take()
            .ok_or_else(|| StoreError::transient("the tree edge went missing"))?;
        if edge.head != Some(head) {
            return Err(StoreError::integrity(format!(
                "altered: the database's event at seq {} is not the delivered head {head} any more",
                head.seq
            )));
        }
        put_tiles(
            self.store.as_ref(),
            &self.origin,
            &edge.builder.partial_tiles(),
            self.vouched(),
        )
        .await?;
        let checkpoint = Checkpoint {
            origin: self.origin.clone(),
            size: head.seq,
            root: edge.builder.root(),
        };
        let note = publish_checkpoint(self.store.as_ref(), &self.keys, &checkpoint).await?;
        self.vouched
            .fetch_max(checkpoint.size, std::sync::atomic::Ordering::Relaxed);
        if let Some(announce) = &self.announce {
            announce.send_replace(Some(PublishedCheckpoint {
                size: checkpoint.size,
                note,
            }));
        }
        if let Err(e) = write_atomically(&self.state_file, edge.to_text().as_bytes()) {
            // Only costs a longer rebuild after a restart.
            tracing::warn!(file = %self.state_file.display(), error = %e, "cannot keep the tree's edge");
        }
        self.edge = Some(edge);
        Ok(())
    }

    /// Extends `edge` to `through` from the database, a chunk at a time,
    /// writing each completed tile (or, for a dry run, dropping it).
    async fn advance(&self, mut edge: Edge, through: u64, keep: Keep) -> Result<Edge, StoreError> {
        while edge.size() < through {
            let chunk_end = (edge.size() + CHUNK).min(through);
            // What the follower delivered (and checked) since the edge, if the feed has it.
            let mut hashes = Vec::new();
            let fed = match (&self.feed, keep) {
                (Some(feed), Keep::Write) => feed.take(edge.size(), chunk_end, &mut hashes),
                _ => None,
            };
            if let Some(last) = fed {
                let (returned, tiles) = tokio::task::spawn_blocking(move || {
                    let mut edge = edge;
                    let mut out = Vec::new();
                    for hash in &hashes {
                        edge.builder.push(hash, &mut out);
                    }
                    edge.head = Some(last);
                    (edge, out)
                })
                .await
                .map_err(|e| StoreError::transient(format!("the tree builder stopped: {e}")))?;
                edge = returned;
                put_tiles(self.store.as_ref(), &self.origin, &tiles, self.vouched()).await?;
                continue;
            }
            tracing::debug!(
                after = edge.size(),
                through = chunk_end,
                "extending the tree from the database (not in the hash feed)"
            );
            let conn = self.take_conn();
            let (db, open) = (self.db.clone(), self.open.clone());
            let (conn, returned, result) = tokio::task::spawn_blocking(move || {
                let mut edge = edge;
                let mut out = Vec::new();
                let conn = match conn.map_or_else(|| EventDb::open(&db, &open).map_err(|e| integrity!("{e}")), Ok) {
                    Ok(c) => c,
                    Err(e) => return (None, edge, Err(StoreError::transient(e))),
                };
                let result = extend(&conn, &mut edge, chunk_end, &mut out).map(|()| out);
                (Some(conn), edge, result)
            })
            .await
            .map_err(|e| StoreError::transient(format!("the tree builder stopped: {e}")))?;
            if let Ok(mut slot) = self.conn.lock() {
                *slot = conn;
            }
            edge = returned;
            let tiles = result?;
            if keep == Keep::Write {
                put_tiles(self.store.as_ref(), &self.origin, &tiles, self.vouched()).await?;
            }
        }
        Ok(edge)
    }

    fn vouched(&self) -> u64 {
        self.vouched.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn take_conn(&self) -> Option<EventDb> {
        self.conn.lock().ok().and_then(|mut c| c.take())
    }

    /// The persisted edge if it is usable for `head`, else an empty tree.
    async fn load(&mut self, head: Head) -> Result<Edge, StoreError> {
        let text = match std::fs::read_to_string(&self.state_file) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                tracing::info!(file = %self.state_file.display(), "no tree edge kept: building the tree from seq 1");
                return Ok(Edge::default());
            }
            Err(e) => {
                tracing::warn!(file = %self.state_file.display(), error = %e, "cannot read the tree's edge: building the tree from seq 1");
                return Ok(Edge::default());
            }
        };
        let edge = match Edge::from_text(&text) {
            Ok(edge) => edge,
            Err(why) => {
                tracing::warn!(file = %self.state_file.display(), "the tree's edge is unusable ({why}): building the tree from seq 1");
                return Ok(Edge::default());
            }
        };
        let Some(at) = edge.head else {
            return Ok(edge);
        };

        // The edge must end on this database's chain, at or before the head.
        let (db, open) = (self.db.clone(), self.open.clone());
        let stored = tokio::task::spawn_blocking(move || EventDb::open(&db, &open).and_then(|c| c.hash_at(at.seq)))
            .await
            .map_err(|e| StoreError::transient(e.to_string()))?
            .map_err(|e| StoreError::transient(e.to_string()))?;
        if at.seq > head.seq || stored.as_deref() != Some(&at.hash[..]) {
            tracing::warn!(file = %self.state_file.display(), edge = %at, "the tree's edge is not on this database's chain up to the head: building the tree from seq 1");
            return Ok(Edge::default());
        }
        tracing::info!(file = %self.state_file.display(), size = edge.size(), "tree edge resumed: extending the tree from there");
        Ok(edge)
    }

    /// Proves, before anything is written, that this process's tree (the
    /// `edge`, to be extended to `head`) and the newest checkpoint kept for
    /// this origin under this publisher's keys are one tree: equal roots at
    /// the kept size when the tree passes it, else a consistency proof read
    /// from the store's tiles.
    /// Returns whether the store's checkpoint is ahead of `head`: then the
    /// next extension must be checked again before it writes (another
    /// process's tree is the kept one, and this one may still part from it).
    async fn check_against_store(&self, edge: &Edge, head: Head) -> Result<bool, StoreError> {
        let verifiers: Vec<VerifierKey> = chainship_anchor::signer::verifiers(&self.keys);
        let Some((kept, _)) = newest_checkpoint(self.store.as_ref(), &self.origin, &verifiers).await? else {
            return Ok(false);
        };
        self.vouched.fetch_max(kept.size, std::sync::atomic::Ordering::Relaxed);
        let (s, n, k) = (edge.size(), head.seq, kept.size);
        let disagree = |ours: u64, why: String| {
            StoreError::integrity(format!(
                "checkpoints-disagree: {} keeps checkpoint {k} of origin {:?} (root {}), signed by this follower's key, and this database's tree of {ours} is not the same tree: {why}; nothing was published (a database restored from an older backup and grown again, or another log under this origin)",
                self.store.describe(),
                self.origin,
                kept.root_b64(),
            ))
        };
        let differs =
            |ours: u64, root: &chainship_tlog::Hash| disagree(ours, format!("its root at {k} is {}", b64(root)));
        if k == s {
            let root = edge.builder.root();
            return if root == kept.root {
                Ok(false)
            } else {
                Err(differs(s, &root))
            };
        }
        if k < s {
            // The edge is past the kept checkpoint: prove s extends k from the tiles kept for s.
            return self
                .consistent(k, &kept.root, s, &edge.builder.root())
                .await
                .map(|()| false)
                .map_err(|why| disagree(s, why.message));
        }
        // The kept checkpoint is ahead of the edge: build (without writing) up to it, or to the head.
        let probe = self.advance(edge.clone(), n.min(k), Keep::Drop).await?;
        let root = probe.builder.root();
        if k <= n {
            return if root == kept.root {
                Ok(false)
            } else {
                Err(differs(k, &root))
            };
        }
        // The store is ahead of this database (another follower got further): n must be a prefix of k.
        self.consistent(n, &root, k, &kept.root)
            .await
            .map(|()| true)
            .map_err(|why| disagree(n, why.message))
    }

    /// A consistency proof from `old` to `new`, read from the store's tiles of `new`.
    async fn consistent(
        &self,
        old: u64,
        old_root: &chainship_tlog::Hash,
        new: u64,
        new_root: &chainship_tlog::Hash,
    ) -> Result<(), Error> {
        let mut reader = TileReader::new(self.store.as_ref(), &self.origin);
        let proof = reader
            .run(new, |set| consistency_proof(old, new, set))
            .await
            .map_err(|e| integrity!("no consistency proof from {old} to {new}: {e}"))?;
        if verify_consistency(old, new, old_root, new_root, &proof) {
            Ok(())
        } else {
            Err(integrity!("the trees of {old} and {new} are not consistent"))
        }
    }
}

use chainship_tlog::hash_b64 as b64;

/// Whether a pass over the database writes the tiles it completes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Keep {
    Write,
    Drop,
}

/// Reads the events after the edge through `through`, checks each along
/// the chain and appends its hash; full tiles go to `out`.
fn extend(db: &EventDb, edge: &mut Edge, through: u64, out: &mut Vec<Tile>) -> Result<(), StoreError> {
    let mut check = match edge.head {
        None => ChainCheck::from_start(),
        Some(h) => ChainCheck::after(h),
    };
    let mut broken = None;
    db.scan(edge.size(), through, &mut |event| match check.check(event) {
        Ok(_) => {
            edge.builder.push(event.hash, out);
            true
        }
        Err(b) => {
            broken = Some(b);
            false
        }
    })
    .map_err(|e| StoreError::transient(e.to_string()))?;
    edge.head = check.last_good().filter(|h| h.seq == edge.size()).or(edge.head);
    if let Some(b) = broken {
        return Err(StoreError::integrity(format!(
            "altered: seq {}: the database changed after it was delivered ({})",
            b.seq,
            b.reason()
        )));
    }
    if edge.size() < through {
        return Err(StoreError::integrity(format!(
            "cut: the database ends at seq {} before the delivered seq {through}",
            edge.size()
        )));
    }
    Ok(())
}
