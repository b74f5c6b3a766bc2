//! `file:DIR` — one file per head, `DIR/<origin>/<seq, 20 digits>.head`,
//! created with create-new (never overwritten) and fsynced with its
//! directory. DIR is meant to be another user's or another host's mount.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use async_trait::async_trait;

use super::{AnchorStore, PutOutcome, StoreError, StoredNote, head_name, seq_from_name};

pub struct FileStore {
    dir: PathBuf,
}

impl FileStore {
    pub fn new(dir: &Path) -> Self {
        FileStore { dir: dir.to_owned() }
    }

    fn origin_dir(&self, origin: &str) -> PathBuf {
        self.dir.join(origin)
    }

    fn io(&self, what: &str, path: &Path, e: std::io::Error) -> StoreError {
        let message = format!("anchor store {}: {what} {}: {e}", self.describe(), path.display());
        match e.kind() {
            ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem | ErrorKind::NotADirectory => {
                StoreError::permanent(message)
            }
            _ => StoreError::transient(message),
        }
    }
}

#[async_trait]
impl AnchorStore for FileStore {
    async fn put_new(&self, origin: &str, seq: u64, note: &[u8]) -> Result<PutOutcome, StoreError> {
        let dir = self.origin_dir(origin);
        if !self.dir.is_dir() {
            return Err(StoreError::transient(format!(
                "anchor store {}: not a directory (is the mount there?)",
                self.describe()
            )));
        }
        std::fs::create_dir_all(&dir).map_err(|e| self.io("cannot create", &dir, e))?;
        let path = dir.join(head_name(seq));
        let mut file = match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                let bytes = std::fs::read(&path).map_err(|e| self.io("cannot read", &path, e))?;
                return Ok(PutOutcome::AlreadyThere(bytes));
            }
            Err(e) => return Err(self.io("cannot create", &path, e)),
        };
        let written = file.write_all(note).and_then(|_| file.sync_all());
        if let Err(e) = written {
            // A half-written head would block this seq forever; remove it.
            let _ = std::fs::remove_file(&path);
            return Err(self.io("cannot write", &path, e));
        }
        File::open(&dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| self.io("cannot sync", &dir, e))?;
        Ok(PutOutcome::Created)
    }

    async fn list(&self, origin: &str) -> Result<Vec<StoredNote>, StoreError> {
        if !self.dir.is_dir() {
            return Err(StoreError::permanent(format!(
                "anchor store {}: no such directory",
                self.describe()
            )));
        }
        let dir = self.origin_dir(origin);
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(self.io("cannot list", &dir, e)),
        };
        let mut notes = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| self.io("cannot list", &dir, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.ends_with(".head") {
                continue;
            }
            let path = entry.path();
            let bytes = std::fs::read(&path).map_err(|e| self.io("cannot read", &path, e))?;
            notes.push(StoredNote {
                seq_in_name: seq_from_name(&name),
                name: path.display().to_string(),
                bytes,
            });
        }
        notes.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(notes)
    }

    async fn highest_seq(&self, origin: &str) -> Result<Option<u64>, StoreError> {
        let dir = self.origin_dir(origin);
        match std::fs::read_dir(&dir) {
            Ok(entries) => Ok(entries
                .filter_map(|e| e.ok())
                .filter_map(|e| seq_from_name(&e.file_name().to_string_lossy()))
                .max()),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.io("cannot list", &dir, e)),
        }
    }

    async fn check(&self) -> Result<String, StoreError> {
        if !self.dir.is_dir() {
            return Err(StoreError::permanent(format!(
                "anchor store {}: no such directory (is the mount there?)",
                self.describe()
            )));
        }
        let probe = self.dir.join(format!(".chainship-check-{}", std::process::id()));
        std::fs::write(&probe, b"chainship check").map_err(|e| self.io("cannot write", &probe, e))?;
        let _ = std::fs::remove_file(&probe);
        Ok("directory writable".into())
    }

    fn describe(&self) -> String {
        format!("file:{}", self.dir.display())
    }
}
