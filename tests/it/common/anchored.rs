//! An anchored setup: a database, a file anchor store and a signing key.

use std::path::{Path, PathBuf};

use super::*;

/// What an anchored export starts from: a database of its own
/// (`audit.db`) in a scratch directory, an empty file anchor store
/// (`anchors/`) beside it, and a signing key (`head.key`) with its verifier.
pub struct Anchored {
    pub dir: tempfile::TempDir,
    pub db: PathBuf,
    pub anchors: PathBuf,
    pub key: PathBuf,
    pub verifier: String,
}

impl Anchored {
    /// `events` events, and a key named `key_name`.
    pub fn new(events: u64, key_name: &str) -> Anchored {
        Anchored::generated(events, key_name, &[])
    }

    /// [`Anchored::new`], the database generated with `generate`'s `extra` flags (`--inject`).
    pub fn generated(events: u64, key_name: &str, extra: &[&str]) -> Anchored {
        let dir = tempfile::TempDir::new().unwrap();
        let db = generate_with(dir.path(), "audit.db", events, extra);
        let anchors = dir.path().join("anchors");
        std::fs::create_dir(&anchors).unwrap();
        let (key, verifier) = keygen(dir.path(), key_name, "head.key");
        Anchored {
            dir,
            db,
            anchors,
            key,
            verifier,
        }
    }

    /// The store as `--anchor` takes it.
    pub fn anchor_url(&self) -> String {
        format!("file:{}", path_str(&self.anchors))
    }

    /// The lines of the export a test wrote to `events.jsonl`.
    pub fn lines(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("events.jsonl"))
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

/// Writes a signing key `dir/file` named `name` and returns it with its verifier key.
pub fn keygen(dir: &Path, name: &str, file: &str) -> (PathBuf, String) {
    let key = dir.join(file);
    let out = run(&["keygen", "--name", name, "--out", path_str(&key)]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    (key, stdout(&out).trim().to_owned())
}
