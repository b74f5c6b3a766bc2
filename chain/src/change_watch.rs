//! Waking a tailing reader when the database changes, instead of at the
//! next poll.
//!
//! A commit writes the `-wal` file (or, without WAL, the database file or
//! its `-journal`); the kernel reports those writes (inotify, through the
//! `notify` crate), and each report moves a generation counter and wakes
//! the waiters. A reader takes the generation before it reads, and after
//! reading nothing waits only until the generation moves past it, so a
//! commit landing between its read and its wait is never slept through.
//! Where the filesystem reports nothing (NFS, some FUSE mounts), the poll
//! interval stays the bound: the watch only ever shortens a wait.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use notify::{EventKind, RecursiveMode, Watcher};

/// A watch on one database's files.
pub struct ChangeWatch {
    _watcher: notify::RecommendedWatcher,
    shared: Arc<(Mutex<u64>, Condvar)>,
}

impl ChangeWatch {
    /// Watches the directory holding `db` for writes to the database, its
    /// `-wal` or its `-journal`. `None` when the platform or filesystem
    /// cannot watch it (the reader then polls only).
    pub fn start(db: &Path) -> Option<ChangeWatch> {
        let dir = db
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let name = db.file_name()?.to_os_string();
        let watched: Vec<PathBuf> = ["", "-wal", "-journal"]
            .iter()
            .map(|suffix| {
                let mut n = name.clone();
                n.push(suffix);
                PathBuf::from(n)
            })
            .collect();
        let shared = Arc::new((Mutex::new(0u64), Condvar::new()));
        let notify_shared = Arc::clone(&shared);
        let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            let Ok(event) = event else { return };
            if matches!(event.kind, EventKind::Access(_)) {
                return;
            }
            let ours = event.paths.iter().any(|p| {
                p.file_name()
                    .is_some_and(|f| watched.iter().any(|w| w.as_os_str() == f))
            });
            if ours {
                let (generation, wake) = &*notify_shared;
                if let Ok(mut g) = generation.lock() {
                    *g += 1;
                    wake.notify_all();
                }
            }
        })
        .ok()?;
        if let Err(e) = watcher.watch(dir, RecursiveMode::NonRecursive) {
            tracing::info!(dir = %dir.display(), error = %e, "cannot watch the database's directory; polling only");
            return None;
        }
        Some(ChangeWatch {
            _watcher: watcher,
            shared,
        })
    }

    /// The current generation: take it before reading.
    pub fn generation(&self) -> u64 {
        self.shared.0.lock().map_or(0, |g| *g)
    }

    /// Waits until the generation moves past `seen` or `limit` passes;
    /// returns the generation then.
    pub fn wait_past(&self, seen: u64, limit: Duration) -> u64 {
        let (generation, wake) = &*self.shared;
        let deadline = Instant::now() + limit;
        let Ok(mut g) = generation.lock() else {
            std::thread::sleep(limit);
            return seen;
        };
        while *g == seen {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            g = match wake.wait_timeout(g, left) {
                Ok((g, _)) => g,
                Err(_) => return seen,
            };
        }
        *g
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_to_the_wal_wakes_a_waiter_at_once() {
        let dir = tempfile::TempDir::new().unwrap();
        let db = dir.path().join("audit.db");
        std::fs::write(&db, b"").unwrap();
        let watch = ChangeWatch::start(&db).expect("inotify on a local filesystem");
        let seen = watch.generation();
        let wal = dir.path().join("audit.db-wal");
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            std::fs::write(wal, b"frame").unwrap();
        });
        let started = Instant::now();
        let now = watch.wait_past(seen, Duration::from_secs(10));
        assert!(now > seen, "woken by the write");
        assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
        writer.join().unwrap();
        // Another file in the directory wakes nobody (once the write's own
        // events, creation and data, have all come in).
        std::thread::sleep(Duration::from_millis(300));
        let seen = watch.generation();
        std::fs::write(dir.path().join("other.txt"), b"x").unwrap();
        assert_eq!(watch.wait_past(seen, Duration::from_millis(200)), seen);
    }
}
