//! The cursor: a small text file holding the last delivered `SEQ:HASH`.
//!
//! Written only after the sink acknowledged the batch it names, and always
//! atomically (temp file, fsync, rename, fsync of the directory), so after
//! a crash it holds either the old head or the new one, never a mix.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use chainship_chain::Head;

#[derive(Debug, thiserror::Error)]
pub enum CursorError {
    #[error(
        "cursor {path}: corrupt: {reason}; it holds {content:?}, expected SEQ:HASH (fix or remove it knowingly: it is the delivered position)"
    )]
    Corrupt {
        path: PathBuf,
        reason: String,
        content: String,
    },
    #[error("cursor {path}: {}", chainship_chain::access::explain(path, source))]
    Io { path: PathBuf, source: std::io::Error },
    #[error("cursor {path}: another follower holds it ({holder}); two followers of one cursor would deliver twice")]
    Locked { path: PathBuf, holder: String },
    /// A second hard link is a second name a second follower could lock apart.
    #[error(
        "cursor {path}: has {links} hard links; a follower on another of its names would not share this one's lock (keep one name; a symbolic link is fine)"
    )]
    Linked { path: PathBuf, links: u64 },
    /// The lock file was removed or replaced under a running follower, and
    /// another follower holds the new one.
    #[error(
        "cursor {path}: its lock file {lock} was removed or replaced while this follower held it, and another follower now holds it ({holder}); this one stops before delivering again (never delete the lock of a running follower)"
    )]
    LockLost {
        path: PathBuf,
        lock: PathBuf,
        holder: String,
    },
}

/// `path` with every symbolic link resolved, also when the file itself does
/// not exist yet (its directory is resolved, its name kept).
fn real_path(path: &Path) -> Option<PathBuf> {
    if let Ok(real) = std::fs::canonicalize(path) {
        return Some(real);
    }
    let name = path.file_name()?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    // A dangling link: where it points is the cursor that will be written.
    if let Ok(target) = std::fs::read_link(path) {
        return real_path(&dir.join(target));
    }
    Some(std::fs::canonicalize(dir).ok()?.join(name))
}

/// The exclusive hold on a cursor (an advisory lock on `<cursor>.lock`),
/// released when dropped or when the process ends, however it ends.
///
/// An advisory lock holds a file, not a name: a name deleted or replaced
/// under it would let a second follower lock anew. So before each delivery
/// [`CursorLock::reassert`] checks the name is still the file held, and
/// takes the name again when nobody else holds it.
#[derive(Debug)]
pub struct CursorLock {
    file: File,
    held: LockIdentity,
    cursor: FileCursor,
}

impl CursorLock {
    /// `Ok` while this process holds the cursor's lock by its name: the file
    /// it locked, or, when that was removed or replaced, the file now there,
    /// locked again if no other process holds it. Another holder is
    /// [`CursorError::LockLost`].
    pub fn reassert(&mut self) -> Result<(), CursorError> {
        if self.held.names_it() {
            return Ok(());
        }
        match self.cursor.lock_at(&self.held.lock) {
            Ok((file, held)) if held.names_it() => {
                tracing::warn!(lock = %self.held.lock.display(), "the cursor's lock file was removed or replaced under this follower; no other follower held it, so it is taken again");
                self.file = file;
                self.held = held;
                self.file
                    .set_len(0)
                    .and_then(|_| self.file.write_all(holder_text().as_bytes()))
                    .ok();
                Ok(())
            }
            Ok(_) => Err(CursorError::LockLost {
                path: self.cursor.path.clone(),
                lock: self.held.lock.clone(),
                holder: "its name keeps changing".to_owned(),
            }),
            Err(CursorError::Locked { holder, .. }) => Err(CursorError::LockLost {
                path: self.cursor.path.clone(),
                lock: self.held.lock.clone(),
                holder,
            }),
            Err(e) => Err(e),
        }
    }
}

/// The lock file a follower holds, by device and inode.
#[derive(Clone, Debug)]
struct LockIdentity {
    lock: PathBuf,
    dev: u64,
    ino: u64,
}

impl LockIdentity {
    /// Whether the lock's path still names the file this process holds.
    fn names_it(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        std::fs::symlink_metadata(&self.lock).is_ok_and(|m| m.dev() == self.dev && m.ino() == self.ino)
    }
}

/// What a holder writes into the lock (a hint for the refused; the lock is what counts).
fn holder_text() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    format!("pid {} on {}", std::process::id(), host.trim())
}

/// A cursor kept in a file.
#[derive(Clone, Debug)]
pub struct FileCursor {
    path: PathBuf,
}

impl FileCursor {
    /// The cursor at `path`, by its real path: a symbolic link to a cursor
    /// (or a path through one) is that cursor, with the same lock and
    /// sibling files, so two followers cannot hold one cursor under two names.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        let path = path.into();
        FileCursor {
            path: real_path(&path).unwrap_or(path),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn io(&self, source: std::io::Error) -> CursorError {
        CursorError::Io {
            path: self.path.clone(),
            source,
        }
    }

    /// A file beside the cursor (used for the pending anchor head).
    pub fn sibling(&self, suffix: &str) -> PathBuf {
        let mut name = self.path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
        name.push(suffix);
        self.path.with_file_name(name)
    }

    /// Every file the follower writes for this cursor: the cursor and its
    /// temp file, the writability probe, the lock, the last anchored head
    /// (`.anchored`) and the run check's state (`.runs`) with their temp
    /// files. None of them may be another file that matters (the audit
    /// database: the CLI refuses that).
    pub fn files(&self) -> Vec<PathBuf> {
        [
            ".tmp",
            ".probe",
            ".lock",
            ".anchored",
            ".anchored.tmp",
            ".runs",
            ".runs.tmp",
        ]
        .into_iter()
        .map(|suffix| self.sibling(suffix))
        .chain(std::iter::once(self.path.clone()))
        .collect()
    }

    /// Takes the cursor for this process: a second follower of the same
    /// cursor (overlapping cron runs, a rolling update) is refused, naming
    /// the holder, instead of racing this one.
    pub fn lock(&self) -> Result<CursorLock, CursorError> {
        use std::os::unix::fs::MetadataExt;
        if let Ok(meta) = std::fs::metadata(&self.path)
            && meta.nlink() > 1
        {
            return Err(CursorError::Linked {
                path: self.path.clone(),
                links: meta.nlink(),
            });
        }
        let path = self.sibling(".lock");
        // A name removed between the open and the lock (a follower stopping,
        // an operator's cleanup) leaves a lock on a file nobody else opens:
        // locked, the name must still be that file, else try again.
        for _ in 0..3 {
            let (mut file, held) = self.lock_at(&path)?;
            if held.names_it() {
                // Only a hint for the message above; the lock itself is what counts.
                let _ = file.set_len(0).and_then(|_| file.write_all(holder_text().as_bytes()));
                return Ok(CursorLock {
                    file,
                    held,
                    cursor: self.clone(),
                });
            }
        }
        Err(CursorError::LockLost {
            path: self.path.clone(),
            lock: path,
            holder: "its name keeps changing".to_owned(),
        })
    }

    /// Opens and locks `path` (never through a link), naming a holder.
    fn lock_at(&self, path: &Path) -> Result<(File, LockIdentity), CursorError> {
        use std::os::unix::fs::MetadataExt;
        // Never through a symbolic link: one planted here would have the
        // holder's name written into whatever it points at.
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
            .map_err(|e| self.io(e))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let holder = std::fs::read_to_string(path).unwrap_or_default();
                let holder = match holder.trim() {
                    "" => "a process that has not said which".to_owned(),
                    h => h.to_owned(),
                };
                return Err(CursorError::Locked {
                    path: self.path.clone(),
                    holder,
                });
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(self.io(e)),
        }
        let meta = file.metadata().map_err(|e| self.io(e))?;
        let held = LockIdentity {
            lock: path.to_owned(),
            dev: meta.dev(),
            ino: meta.ino(),
        };
        Ok((file, held))
    }

    /// Checks, before anything is delivered, that the cursor can be written
    /// where it lives, so a bad path fails at start and not after a batch.
    pub fn check_writable(&self) -> Result<(), CursorError> {
        let probe = self.sibling(".probe");
        // A new file or nothing: a link planted at the probe's name is
        // removed (the link, not its target), never opened and truncated.
        match std::fs::remove_file(&probe) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(self.io(e)),
            _ => {}
        }
        let result = OpenOptions::new().write(true).create_new(true).mode(0o600).open(&probe);
        match result {
            Ok(_) => std::fs::remove_file(&probe).map_err(|e| self.io(e)),
            Err(e) => Err(self.io(e)),
        }
    }

    /// The stored head; `None` when there is no cursor file yet.
    pub fn load(&self) -> Result<Option<Head>, CursorError> {
        read_head_file(&self.path)
    }

    /// Replaces the cursor with `head`, atomically and durably.
    pub fn store(&self, head: Head) -> Result<(), CursorError> {
        write_atomically(&self.path, format!("{head}\n").as_bytes()).map_err(|e| self.io(e))
    }
}

/// Reads a file holding one `SEQ:HASH` line; `None` when it does not exist.
pub fn read_head_file(path: &Path) -> Result<Option<Head>, CursorError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(CursorError::Io {
                path: path.to_owned(),
                source,
            });
        }
    };
    let corrupt = |reason: String| CursorError::Corrupt {
        path: path.to_owned(),
        reason,
        content: String::from_utf8_lossy(&bytes[..bytes.len().min(100)]).into_owned(),
    };
    let text = std::str::from_utf8(&bytes).map_err(|_| corrupt("not text".into()))?;
    let line = text.strip_suffix('\n').unwrap_or(text);
    line.parse::<Head>().map(Some).map_err(|e| corrupt(e.to_string()))
}

/// Replaces `path` whole, through its `.tmp` sibling (mode 0600).
pub fn write_atomically(path: &Path, content: &[u8]) -> std::io::Result<()> {
    chainship_chain::atomic_file::replace(path, &temp_beside(path), content, 0o600)
}

/// Where a follower's file is written before it is renamed in place: `NAME.tmp` beside it.
pub fn temp_beside(path: &Path) -> std::path::PathBuf {
    let mut tmp_name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    tmp_name.push(".tmp");
    path.with_file_name(tmp_name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const H: &str = "2d17715bc635406807722f1764c509105f5ac15ad430729545bc4d87055da291";

    #[test]
    fn stores_and_loads_with_mode_0600() {
        let dir = tempfile::tempdir().unwrap();
        let cursor = FileCursor::new(dir.path().join("cursor"));
        assert_eq!(cursor.load().unwrap(), None);
        let head: Head = format!("2:{H}").parse().unwrap();
        cursor.store(head).unwrap();
        assert_eq!(cursor.load().unwrap(), Some(head));
        assert_eq!(std::fs::read_to_string(cursor.path()).unwrap(), format!("2:{H}\n"));
        let mode = std::fs::metadata(cursor.path()).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert!(!cursor.sibling(".tmp").exists());
    }

    #[test]
    fn a_corrupt_cursor_is_an_error_not_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let cursor = FileCursor::new(dir.path().join("cursor"));
        for bad in ["", "12", "x:y", &format!("2:{}", &H[..10]), "\u{0}\u{1}"] {
            std::fs::write(cursor.path(), bad).unwrap();
            let err = cursor.load().unwrap_err();
            assert!(matches!(err, CursorError::Corrupt { .. }), "{bad:?}: {err}");
            assert!(err.to_string().contains("corrupt"));
        }
    }

    #[test]
    fn a_second_holder_is_refused_and_named() {
        let dir = tempfile::tempdir().unwrap();
        let cursor = FileCursor::new(dir.path().join("cursor"));
        let held = cursor.lock().unwrap();
        // The same cursor through a symbolic link is the same lock.
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(cursor.path(), &link).unwrap();
        let through_link = FileCursor::new(&link).lock().unwrap_err();
        assert!(
            through_link.to_string().contains("another follower holds it"),
            "{through_link}"
        );
        let err = cursor.lock().unwrap_err();
        assert!(matches!(err, CursorError::Locked { .. }), "{err}");
        assert!(
            err.to_string().contains(&format!("pid {}", std::process::id())),
            "{err}"
        );
        drop(held);
        cursor.lock().unwrap();
    }

    #[test]
    fn links_planted_at_the_lock_or_the_probe_are_never_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let cursor = FileCursor::new(dir.path().join("cursor"));
        let target = dir.path().join("precious");
        std::fs::write(&target, b"keep me").unwrap();
        std::os::unix::fs::symlink(&target, dir.path().join("cursor.probe")).unwrap();
        cursor.check_writable().unwrap();
        std::os::unix::fs::symlink(&target, dir.path().join("cursor.lock")).unwrap();
        assert!(cursor.lock().is_err(), "a lock taken through a link");
        assert_eq!(std::fs::read(&target).unwrap(), b"keep me");
    }

    #[test]
    fn an_unwritable_directory_is_found_before_delivery() {
        let cursor = FileCursor::new("/nonexistent-dir-for-chainship/cursor");
        assert!(cursor.check_writable().is_err());
    }
}
