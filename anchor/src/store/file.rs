//! `file:DIR` — one file per head, `DIR/<origin>/<seq, 20 digits>.head`,
//! never overwritten. DIR is meant to be another user's or another host's
//! mount.
//!
//! A head is written whole or not at all: into a temp file in the same
//! directory, fsynced, then hard-linked to its name (the link fails if the
//! name exists, so a kept head is never replaced) and the directory
//! fsynced. A kill at any point leaves either no head or the whole head,
//! plus at most a stray temp file, which listing ignores.
//!
//! Every filesystem call runs on tokio's blocking pool, never on an async
//! worker: a hung mount (NFS gone away) then holds one blocking thread, not
//! a worker the follower's other tasks (the probes, the export) run on.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;

#[cfg(test)]
use super::{AnchorStore, head_name};
use super::{ObjectStore, PutOutcome, StoreError};

/// The write-once probe `check` leaves nothing behind with (it is removed).
const PROBE: &str = ".chainship-check";
/// Temp files older than this are left by a killed writer and are removed.
const STALE_TEMP: Duration = Duration::from_secs(3600);

pub struct FileStore {
    disk: Arc<Disk>,
}

/// The store's directory and what this process remembers of it; its
/// methods do the blocking work [`FileStore`] hands to the blocking pool.
struct Disk {
    dir: PathBuf,
    /// Origin directories already swept of stale temp files by this process.
    swept: Mutex<HashSet<PathBuf>>,
}

impl FileStore {
    /// The store in `dir`, named by its absolute path: a state file records
    /// the store it verified, and `anchors` from one directory is not
    /// `anchors` from another.
    pub fn new(dir: &Path) -> Self {
        FileStore {
            disk: Arc::new(Disk {
                dir: std::path::absolute(dir).unwrap_or_else(|_| dir.to_owned()),
                swept: Mutex::new(HashSet::new()),
            }),
        }
    }

    /// Runs `work` on the blocking pool.
    async fn off_thread<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Disk) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let disk = Arc::clone(&self.disk);
        tokio::task::spawn_blocking(move || work(&disk)).await.map_err(|e| {
            StoreError::transient(format!("anchor store {}: its I/O thread ended: {e}", self.location()))
        })?
    }
}

impl Disk {
    fn location(&self) -> String {
        format!("file:{}", self.dir.display())
    }

    fn io(&self, what: &str, path: &Path, e: std::io::Error) -> StoreError {
        let mut error = StoreError::from_io_on_mount(
            format_args!("anchor store {}: {what} {}", self.location(), path.display()),
            &e,
        );
        // Who runs, who owns what refused (the kind stays the I/O error's).
        if e.kind() == std::io::ErrorKind::PermissionDenied {
            error.message = format!(
                "anchor store {}: {what} {}: {}",
                self.location(),
                path.display(),
                chainship_chain::access::explain(path, &e)
            );
        }
        error
    }

    /// Removes temp files a killed writer left, once per origin directory
    /// and process (they are harmless, only clutter).
    fn sweep_stale_temps(&self, dir: &Path) {
        if !self.swept.lock().is_ok_and(|mut s| s.insert(dir.to_owned())) {
            return;
        }
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.filter_map(Result::ok) {
            let name = entry.file_name().to_string_lossy().into_owned();
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t.elapsed().is_ok_and(|age| age > STALE_TEMP));
            if is_temp_name(&name) && old {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
}

impl Disk {
    /// The store's directory must be there: a missing mount is never
    /// silently replaced by a new, local directory.
    fn require_mount(&self) -> Result<(), StoreError> {
        let why = match std::fs::metadata(&self.dir) {
            Ok(m) if m.is_dir() => return Ok(()),
            Ok(_) => "not a directory",
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => "no such directory",
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => "permission denied",
            Err(_) => "cannot be read",
        };
        Err(StoreError::transient(format!(
            "anchor store {}: {why} (is the mount there? create it, or mount the store)",
            self.location()
        )))
    }

    /// Writes `bytes` as `dir/name` whole or not at all, never replacing.
    fn write_new(&self, dir: &Path, name: &str, bytes: &[u8]) -> Result<PutOutcome, StoreError> {
        let path = dir.join(name);
        let tmp = dir.join(temp_name(name));
        let written = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .and_then(|mut f| f.write_all(bytes).and_then(|_| f.sync_all()));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(self.io("cannot write", &tmp, e));
        }
        // link(2) refuses an existing name: create-new, but of a whole file.
        let linked = std::fs::hard_link(&tmp, &path);
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::AlreadyExists => return self.kept(&path),
            Err(e) => return Err(self.io("cannot link (does the filesystem allow hard links?)", &path, e)),
        }
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| self.io("cannot sync", dir, e))?;
        Ok(PutOutcome::Created)
    }
}

impl Disk {
    /// What occupies a name a write found taken: its bytes, or none when
    /// something that is not a file was planted there (a directory), so the
    /// caller judges it as it judges any stranger (a head goes beside it).
    fn kept(&self, path: &Path) -> Result<PutOutcome, StoreError> {
        match read_object(path) {
            Ok(bytes) => Ok(PutOutcome::AlreadyThere(bytes)),
            Err(e) if e.kind() == ErrorKind::IsADirectory => Ok(PutOutcome::AlreadyThere(Vec::new())),
            Err(e) => Err(self.io("cannot read", path, e)),
        }
    }
}

/// The most an object is read of: far above any note, tile or bundle, so a
/// planted giant (or a link to /dev/zero) is judged by its first bytes.
const MAX_OBJECT: u64 = 16 << 20;

/// An object's bytes. Only a regular file is an object: opened without
/// following a link and without blocking (a planted FIFO must not hang a
/// reader), anything else reads as no bytes, which every reader judges as
/// the garbage it is; at most [`MAX_OBJECT`] bytes (and one more, so a
/// truncated giant never passes as whole).
fn read_object(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_NOFOLLOW)
        .open(path)
    {
        Ok(f) => f,
        // ELOOP: a symbolic link where an object belongs.
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    if meta.is_dir() {
        return Err(std::io::Error::from(ErrorKind::IsADirectory));
    }
    if !meta.is_file() {
        return Ok(Vec::new());
    }
    // Sized from the metadata: one read fills it, one more sees the end.
    let mut bytes = Vec::with_capacity(meta.len().min(MAX_OBJECT) as usize + 1);
    file.take(MAX_OBJECT + 1).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// `.<head name>.<pid>.<random>.tmp`: unique per writer, never a head name.
fn temp_name(name: &str) -> String {
    let mut random = [0u8; 8];
    // Without randomness the pid and time still make the name unique enough.
    if getrandom::fill(&mut random).is_err() {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        random = nanos.to_le_bytes();
    }
    format!(".{name}.{}.{}.tmp", std::process::id(), hex::encode(random))
}

fn is_temp_name(name: &str) -> bool {
    name.starts_with('.') && name.ends_with(".tmp")
}

/// Makes everything written to the filesystem holding `dir` durable
/// (`syncfs(2)`: one call for a batch of files and their directory entries).
fn sync_filesystem(dir: &Path) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let handle = File::open(dir)?;
    // SAFETY: syncfs only reads the descriptor, which `handle` keeps open.
    if unsafe { libc::syncfs(handle.as_raw_fd()) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The directory and file name of `key` under the store's directory.
fn place(root: &Path, key: &str) -> (PathBuf, String) {
    let full = root.join(key);
    let name = full
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dir = full.parent().map(Path::to_path_buf).unwrap_or_default();
    (dir, name)
}

impl Disk {
    fn create(&self, key: &str, bytes: &[u8]) -> Result<PutOutcome, StoreError> {
        self.require_mount()?;
        let (dir, name) = place(&self.dir, key);
        std::fs::create_dir_all(&dir).map_err(|e| self.io("cannot create", &dir, e))?;
        self.sweep_stale_temps(&dir);
        self.write_new(&dir, &name, bytes)
    }

    /// Tiles come by the hundred: each is written to a temp file, then all
    /// are made durable with one `syncfs`, linked into place (never
    /// replacing), and the links made durable with a second one; two
    /// flushes of the store's filesystem instead of two fsyncs per tile.
    fn create_many(&self, objects: &[(String, Vec<u8>)]) -> Result<Vec<PutOutcome>, StoreError> {
        self.require_mount()?;
        let mut staged: Vec<(PathBuf, PathBuf)> = Vec::with_capacity(objects.len());
        let cleanup = |staged: &[(PathBuf, PathBuf)]| {
            for (tmp, _) in staged {
                let _ = std::fs::remove_file(tmp);
            }
        };
        let mut dirs = HashSet::new();
        for (key, bytes) in objects {
            let (dir, name) = place(&self.dir, key);
            if dirs.insert(dir.clone()) {
                if let Err(e) = std::fs::create_dir_all(&dir) {
                    cleanup(&staged);
                    return Err(self.io("cannot create", &dir, e));
                }
                self.sweep_stale_temps(&dir);
            }
            let tmp = dir.join(temp_name(&name));
            let written = OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&tmp)
                .and_then(|mut f| f.write_all(bytes));
            if let Err(e) = written {
                let _ = std::fs::remove_file(&tmp);
                cleanup(&staged);
                return Err(self.io("cannot write", &tmp, e));
            }
            staged.push((tmp, dir.join(name)));
        }
        if let Err(e) = sync_filesystem(&self.dir) {
            cleanup(&staged);
            return Err(self.io("cannot sync", &self.dir, e));
        }
        let mut outcomes = Vec::with_capacity(staged.len());
        for (i, (tmp, path)) in staged.iter().enumerate() {
            let linked = std::fs::hard_link(tmp, path);
            let _ = std::fs::remove_file(tmp);
            match linked {
                Ok(()) => outcomes.push(PutOutcome::Created),
                Err(e) if e.kind() == ErrorKind::AlreadyExists => match self.kept(path) {
                    Ok(kept) => outcomes.push(kept),
                    Err(e) => {
                        cleanup(&staged[i + 1..]);
                        return Err(e);
                    }
                },
                Err(e) => {
                    cleanup(&staged[i + 1..]);
                    return Err(self.io("cannot link (does the filesystem allow hard links?)", path, e));
                }
            }
        }
        sync_filesystem(&self.dir).map_err(|e| self.io("cannot sync", &self.dir, e))?;
        Ok(outcomes)
    }

    fn replace(&self, key: &str, bytes: &[u8]) -> Result<(), StoreError> {
        self.require_mount()?;
        let (dir, name) = place(&self.dir, key);
        std::fs::create_dir_all(&dir).map_err(|e| self.io("cannot create", &dir, e))?;
        let tmp = dir.join(temp_name(&name));
        let target = dir.join(&name);
        let written = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .and_then(|mut f| f.write_all(bytes).and_then(|_| f.sync_all()))
            .and_then(|_| std::fs::rename(&tmp, &target));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(self.io("cannot replace", &target, e));
        }
        File::open(&dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| self.io("cannot sync", &dir, e))
    }

    fn fetch(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let file = self.dir.join(key);
        match read_object(&file) {
            Ok(bytes) => Ok(Some(bytes)),
            // A directory where an object belongs is no object.
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::NotFound | ErrorKind::NotADirectory | ErrorKind::IsADirectory
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(self.io("cannot read", &file, e)),
        }
    }

    /// A directory has no order to start a listing from: every name is
    /// looked at (and `each` filters), so the answer is always "all".
    fn scan(&self, prefix: &str, deep: bool, each: &mut dyn FnMut(String)) -> Result<(), StoreError> {
        // Reading a store that is not there is a setup error, not a wait.
        if let Err(e) = self.require_mount() {
            return Err(StoreError::permanent(e.message));
        }
        let base = self.dir.join(prefix);
        let mut pending = vec![base.clone()];
        while let Some(at) = pending.pop() {
            let entries = match std::fs::read_dir(&at) {
                Ok(e) => e,
                Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => continue,
                Err(e) => return Err(self.io("cannot list", &at, e)),
            };
            for entry in entries {
                let entry = entry.map_err(|e| self.io("cannot list", &at, e))?;
                let name = entry.file_name().to_string_lossy().into_owned();
                // Temp files of a writer (killed or at work) are not objects.
                if name.starts_with('.') {
                    continue;
                }
                if !deep {
                    each(name);
                    continue;
                }
                let path = entry.path();
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    pending.push(path);
                } else if let Ok(rel) = path.strip_prefix(&base) {
                    each(rel.to_string_lossy().into_owned());
                }
            }
        }
        Ok(())
    }

    fn probe(&self) -> Result<String, StoreError> {
        if !self.dir.is_dir() {
            return Err(StoreError::permanent(format!(
                "anchor store {}: no such directory (is the mount there?)",
                self.location()
            )));
        }
        // One fixed name, removed at once: checks never pile up probes.
        let probe = self.dir.join(PROBE);
        std::fs::write(&probe, b"chainship check").map_err(|e| self.io("cannot write", &probe, e))?;
        let _ = std::fs::remove_file(&probe);
        Ok("directory writable".into())
    }
}

/// Names sent at a time from a listing on the blocking pool.
const SCAN_CHUNK: usize = 1024;

#[async_trait]
impl ObjectStore for FileStore {
    async fn create(&self, key: &str, bytes: &[u8]) -> Result<PutOutcome, StoreError> {
        let (key, bytes) = (key.to_owned(), bytes.to_vec());
        self.off_thread(move |d| d.create(&key, &bytes)).await
    }

    /// Tiles come by the hundred: each is written to a temp file, then all
    /// are made durable with one `syncfs`, linked into place (never
    /// replacing), and the links made durable with a second one; two
    /// flushes of the store's filesystem instead of two fsyncs per tile.
    async fn create_many(&self, objects: &[(String, &[u8])]) -> Result<Vec<PutOutcome>, StoreError> {
        let objects: Vec<(String, Vec<u8>)> = objects.iter().map(|(k, b)| (k.clone(), b.to_vec())).collect();
        self.off_thread(move |d| d.create_many(&objects)).await
    }

    async fn replace(&self, key: &str, bytes: &[u8]) -> Result<(), StoreError> {
        let (key, bytes) = (key.to_owned(), bytes.to_vec());
        self.off_thread(move |d| d.replace(&key, &bytes)).await
    }

    async fn fetch(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let key = key.to_owned();
        self.off_thread(move |d| d.fetch(&key)).await
    }

    /// Read in a few runs on the blocking pool rather than one task per
    /// file: for a cached store a file's read costs less than handing it
    /// to a thread and back.
    async fn fetch_many(&self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        const RUNS: usize = 4;
        let runs = keys.chunks(keys.len().div_ceil(RUNS).max(1)).map(|run| {
            let run = run.to_vec();
            self.off_thread(move |d| run.iter().map(|key| d.fetch(key)).collect::<Result<Vec<_>, _>>())
        });
        let read = futures::future::try_join_all(runs).await?;
        Ok(read.into_iter().flatten().collect())
    }

    /// A directory has no order to start a listing from: every name is
    /// looked at (and `each` filters), so the answer is always "all". The
    /// names come from the blocking pool in chunks, so a listing of a
    /// million heads never sits in memory whole.
    async fn scan(
        &self,
        prefix: &str,
        deep: bool,
        _start_after: Option<&str>,
        each: &mut (dyn for<'n> FnMut(&'n str) + Send),
    ) -> Result<bool, StoreError> {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<String>>(2);
        let prefix = prefix.to_owned();
        let listing = self.off_thread(move |d| {
            let mut chunk = Vec::with_capacity(SCAN_CHUNK);
            let mut receiver_gone = false;
            d.scan(&prefix, deep, &mut |name| {
                if receiver_gone {
                    return;
                }
                chunk.push(name);
                if chunk.len() == SCAN_CHUNK {
                    receiver_gone = tx.blocking_send(std::mem::take(&mut chunk)).is_err();
                }
            })?;
            if !chunk.is_empty() {
                let _ = tx.blocking_send(chunk);
            }
            Ok(())
        });
        let names = async {
            while let Some(chunk) = rx.recv().await {
                chunk.iter().for_each(|n| each(n));
            }
        };
        let (listed, ()) = tokio::join!(listing, names);
        listed.map(|()| true)
    }

    async fn probe(&self) -> Result<String, StoreError> {
        self.off_thread(|d| d.probe()).await
    }

    fn location(&self) -> String {
        self.disk.location()
    }

    fn locate(&self, key: &str) -> String {
        self.disk.dir.join(key).display().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_run as run;

    #[test]
    fn only_a_regular_file_is_an_object_read_without_blocking_and_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        assert_eq!(
            unsafe { libc::mkfifo(std::ffi::CString::new(fifo.to_str().unwrap()).unwrap().as_ptr(), 0o600) },
            0
        );
        assert_eq!(
            read_object(&fifo).unwrap(),
            Vec::<u8>::new(),
            "a FIFO is no object, and no hang"
        );
        let link = dir.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        assert_eq!(read_object(&link).unwrap(), Vec::<u8>::new(), "a link is no object");
        let big = dir.path().join("big");
        std::fs::write(&big, vec![b'x'; (MAX_OBJECT + 10) as usize]).unwrap();
        assert_eq!(read_object(&big).unwrap().len() as u64, MAX_OBJECT + 1);
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        assert_eq!(read_object(&sub).unwrap_err().kind(), ErrorKind::IsADirectory);
    }

    #[test]
    fn a_kept_head_is_never_replaced_and_is_returned() {
        let dir = tempfile::TempDir::new().unwrap();
        let store = AnchorStore::new(FileStore::new(dir.path()));
        assert!(matches!(
            run(store.put_new("o", &head_name(7), b"first")).unwrap(),
            PutOutcome::Created
        ));
        match run(store.put_new("o", &head_name(7), b"second")).unwrap() {
            PutOutcome::AlreadyThere(bytes) => assert_eq!(bytes, b"first"),
            other => panic!("expected AlreadyThere, got {other:?}"),
        }
        let path = dir.path().join("o").join(head_name(7));
        assert_eq!(std::fs::read(path).unwrap(), b"first");
        // No temp file is left behind by either write.
        let names: Vec<String> = std::fs::read_dir(dir.path().join("o"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec![head_name(7)]);
    }

    #[test]
    fn temp_files_and_odd_names_are_not_heads() {
        let dir = tempfile::TempDir::new().unwrap();
        let store = AnchorStore::new(FileStore::new(dir.path()));
        run(store.put_new("o", &head_name(3), b"three")).unwrap();
        let origin = dir.path().join("o");
        // What a writer killed before its link leaves, and other clutter.
        std::fs::write(origin.join(temp_name(&head_name(9))), b"").unwrap();
        std::fs::write(origin.join(format!(".{}.1.ab.tmp", head_name(10))), b"torn").unwrap();
        std::fs::write(origin.join("x.head"), b"x").unwrap();
        std::fs::write(origin.join("99999999999999999999.head"), b"past u64").unwrap();
        assert_eq!(run(store.head_seqs("o")).unwrap(), vec![3]);
        let notes = run(store.list("o")).unwrap();
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert_eq!((notes[0].seq_in_name, &notes[0].bytes[..]), (Some(3), &b"three"[..]));
        assert!(run(store.get_head("o", 9)).unwrap().is_none());
    }

    #[test]
    fn stale_temp_files_are_swept_fresh_ones_kept() {
        let dir = tempfile::TempDir::new().unwrap();
        let origin = dir.path().join("o");
        std::fs::create_dir(&origin).unwrap();
        let (stale, fresh) = (
            origin.join(temp_name(&head_name(1))),
            origin.join(temp_name(&head_name(2))),
        );
        std::fs::write(&stale, b"").unwrap();
        std::fs::write(&fresh, b"").unwrap();
        let two_hours_ago = std::time::SystemTime::now() - Duration::from_secs(7200);
        File::options()
            .write(true)
            .open(&stale)
            .unwrap()
            .set_modified(two_hours_ago)
            .unwrap();
        run(AnchorStore::new(FileStore::new(dir.path())).put_new("o", &head_name(5), b"five")).unwrap();
        assert!(!stale.exists(), "a temp file older than an hour is removed");
        assert!(fresh.exists(), "a temp file another writer may be using is kept");
    }

    #[test]
    fn an_origin_does_not_see_the_heads_of_an_origin_below_it() {
        let dir = tempfile::TempDir::new().unwrap();
        let store = AnchorStore::new(FileStore::new(dir.path()));
        run(store.put_new("team/a", &head_name(1), b"a1")).unwrap();
        run(store.put_new("team/a/b", &head_name(2), b"b2")).unwrap();
        let a = run(store.list("team/a")).unwrap();
        assert_eq!(a.len(), 1, "{a:?}");
        assert_eq!(a[0].bytes, b"a1");
        assert_eq!(run(store.head_seqs("team/a")).unwrap(), vec![1]);
        assert_eq!(run(store.head_seqs("team/a/b")).unwrap(), vec![2]);
    }

    #[test]
    fn check_leaves_no_probe() {
        let dir = tempfile::TempDir::new().unwrap();
        let store = AnchorStore::new(FileStore::new(dir.path()));
        for _ in 0..3 {
            run(store.check()).unwrap();
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
