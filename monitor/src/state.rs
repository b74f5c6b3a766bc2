//! The monitor's state in `--state DIR`: `monitor.json` holds, for one copy
//! and one store, where the copy was read to and each origin's watch (see
//! `chainship_verify::watch`), saved together so they always agree;
//! `store/<origin>.json` is each origin's `anchor verify --state` file (the
//! last verified head and checkpoint). Every file is replaced atomically. A
//! state of another copy, store or origin is refused and named, never
//! silently rebuilt.

use std::path::{Path, PathBuf};

use chainship_chain::{Error, permanent};
use chainship_sinks::tail::TailPositions;
use chainship_verify::watch::WatchState;
use serde::{Deserialize, Serialize};

const FORMAT: &str = "chainship-monitor-state/1";

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Saved {
    pub format: String,
    /// The copy's URL and the store's description it was made for.
    pub copy: String,
    pub store: String,
    pub positions: TailPositions,
    pub watches: Vec<WatchState>,
    /// Each origin's run check (its saved bytes, base64), with `--rules`.
    #[serde(default)]
    pub runs: std::collections::BTreeMap<String, String>,
}

/// A copy's or store's name as the state records it: a `file:` path
/// resolved (the same file by another relative path is the same copy; the
/// same relative path from another directory is not).
pub fn identity(url: &str) -> String {
    let Some(path) = url.strip_prefix("file:") else {
        return url.to_owned();
    };
    let path = Path::new(path.strip_prefix("//").unwrap_or(path));
    match std::fs::canonicalize(path).or_else(|_| std::path::absolute(path)) {
        Ok(resolved) => format!("file:{}", resolved.display()),
        Err(_) => url.to_owned(),
    }
}

/// A watch's verified head must be one its origin's store state verified
/// (that state is saved before a head is handed to the watch): a
/// `monitor.json` claiming more is not this store's, or was edited.
pub fn agrees_with_store(dir: &Path, watch: &chainship_verify::watch::CopyWatch, store: &str) -> Result<(), Error> {
    let Some(verified) = watch.state().verified else {
        return Ok(());
    };
    let origin = watch.origin();
    let path = store_file(dir, origin);
    let since = chainship_verify::state::load(&path, origin, store)?;
    let ok = since.as_ref().is_some_and(|s| {
        verified
            .parse::<chainship_chain::Head>()
            .is_ok_and(|v| v.seq < s.head.seq || v == s.head)
    });
    if ok {
        return Ok(());
    }
    Err(permanent!(
        "{}: origin {origin}'s copy is verified through {verified}, which its store state {} never verified: not this store's state, or edited",
        file(dir).display(),
        path.display()
    ))
}

pub fn file(dir: &Path) -> PathBuf {
    dir.join("monitor.json")
}

/// The store state file of `origin` (its segment, as the store names it).
pub fn store_file(dir: &Path, origin: &str) -> PathBuf {
    dir.join("store")
        .join(format!("{}.json", chainship_core::origin_segment(origin)))
}

/// Reads the state: `None` before the first save; a state of another copy
/// or store, or one that does not parse, is an error naming the file.
pub fn load(dir: &Path, copy: &str, store: &str) -> Result<Option<Saved>, Error> {
    let path = file(dir);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(permanent!("{}: {e}", path.display())),
    };
    let saved: Saved =
        serde_json::from_str(&text).map_err(|e| permanent!("{}: not a monitor state ({e})", path.display()))?;
    if saved.format != FORMAT {
        return Err(permanent!(
            "{}: not a monitor state (format is not {FORMAT})",
            path.display()
        ));
    }
    if saved.copy != copy || saved.store != store {
        return Err(permanent!(
            "{}: it is the state of copy {} and store {}, not {copy} and {store}: one state directory per copy and store",
            path.display(),
            saved.copy,
            saved.store
        ));
    }
    Ok(Some(saved))
}

pub fn save(dir: &Path, mut saved: Saved) -> Result<(), Error> {
    saved.format = FORMAT.to_owned();
    let path = file(dir);
    let text = serde_json::to_vec(&saved).map_err(|e| permanent!("{}: {e}", path.display()))?;
    chainship_chain::atomic_file::replace_per_process(&path, &text, 0o644).map_err(|e| {
        permanent!(
            "{}: cannot write it: {}",
            path.display(),
            chainship_chain::access::explain(&path, &e)
        )
    })
}

/// The origins with a store state file: what the store kept when last verified.
pub fn store_origins(dir: &Path) -> Result<Vec<String>, Error> {
    let at = dir.join("store");
    let entries = std::fs::read_dir(&at).map_err(|e| permanent!("{}: {e}", at.display()))?;
    Ok(entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            chainship_core::origin_from_segment(name.strip_suffix(".json")?)
        })
        .collect())
}

pub fn prepare(dir: &Path) -> Result<(), Error> {
    std::fs::create_dir_all(dir.join("store"))
        .map_err(|e| permanent!("{}: cannot create the state directory: {e}", dir.display()))
}
