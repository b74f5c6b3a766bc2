//! Replacing a small file so that a reader, or a crash, sees the old
//! content or the new, never half: the cursor, the follower's sibling
//! files, an auditor's state file, a metrics textfile.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Writes `content` to `tmp` (created with `mode`, before the umask),
/// syncs it, renames it over `path` and syncs the directory. `tmp` must be
/// in `path`'s directory (a rename does not cross file systems); a failed
/// write removes it. Whatever is at `tmp` beforehand is unlinked and a new
/// file created in its place (`O_EXCL`): a symbolic or hard link planted
/// there is never written through (it could name the audit database).
pub fn replace(path: &Path, tmp: &Path, content: &[u8], mode: u32) -> std::io::Result<()> {
    let mut staged = Staged::create(path, tmp, mode)?;
    staged.file().write_all(content)?;
    staged.commit()
}

/// A replacement of `path` written now, at `tmp`, and put in place later
/// (or never: dropped uncommitted, `tmp` is removed). For content too large
/// to hold in memory until it may replace the file (the follower's run
/// state, written as it is encoded, put in place once the sink holds it).
/// The same care as [`replace`].
#[derive(Debug)]
pub struct Staged {
    file: File,
    path: std::path::PathBuf,
    tmp: std::path::PathBuf,
    done: bool,
}

impl Staged {
    /// Creates `tmp` afresh (see [`replace`]) to write the content in.
    pub fn create(path: &Path, tmp: &Path, mode: u32) -> std::io::Result<Staged> {
        match std::fs::remove_file(tmp) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let file = OpenOptions::new().write(true).create_new(true).mode(mode).open(tmp)?;
        Ok(Staged {
            file,
            path: path.to_owned(),
            tmp: tmp.to_owned(),
            done: false,
        })
    }

    /// Where the content is written.
    pub fn file(&mut self) -> &mut File {
        &mut self.file
    }

    /// Syncs the content, renames it over the file and syncs the directory.
    pub fn commit(mut self) -> std::io::Result<()> {
        self.file.sync_all()?;
        std::fs::rename(&self.tmp, &self.path)?;
        self.done = true;
        let dir = match self.path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        File::open(dir)?.sync_all()
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// [`replace`] through a hidden temporary name of this process
/// (`.NAME.PID.tmp`), for files that overlapping runs may write at once.
pub fn replace_per_process(path: &Path, content: &[u8], mode: u32) -> std::io::Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    replace(path, &tmp, content, mode)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_link_planted_at_the_temporary_name_is_never_written_through() {
        let dir = std::env::temp_dir().join(format!("chainship-atomic-link-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (path, tmp, victim) = (dir.join("state"), dir.join("state.tmp"), dir.join("audit.db"));
        std::fs::write(&victim, b"the audit database").unwrap();
        std::os::unix::fs::symlink(&victim, &tmp).unwrap();
        replace(&path, &tmp, b"state\n", 0o600).unwrap();
        std::fs::hard_link(&victim, &tmp).unwrap();
        replace(&path, &tmp, b"state again\n", 0o600).unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"the audit database");
        assert_eq!(std::fs::read(&path).unwrap(), b"state again\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_staged_replacement_changes_nothing_until_committed_and_dropped_leaves_nothing() {
        let dir = std::env::temp_dir().join(format!("chainship-atomic-staged-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (path, tmp) = (dir.join("state"), dir.join("state.tmp"));
        replace(&path, &tmp, b"old\n", 0o600).unwrap();
        let mut staged = Staged::create(&path, &tmp, 0o600).unwrap();
        staged.file().write_all(b"new\n").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"old\n");
        drop(staged);
        assert_eq!(std::fs::read(&path).unwrap(), b"old\n");
        assert!(!tmp.exists(), "dropped uncommitted, the temporary file is removed");
        let mut staged = Staged::create(&path, &tmp, 0o600).unwrap();
        staged.file().write_all(b"new\n").unwrap();
        staged.commit().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new\n");
        assert!(!tmp.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn replaces_whole_and_leaves_no_temporary_file() {
        let dir = std::env::temp_dir().join(format!("chainship-atomic-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (path, tmp) = (dir.join("state"), dir.join("state.tmp"));
        replace(&path, &tmp, b"one\n", 0o600).unwrap();
        replace(&path, &tmp, b"two\n", 0o600).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two\n");
        assert!(!tmp.exists());
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        // A temporary name that cannot be written fails and leaves the file as it was.
        std::fs::create_dir(&tmp).unwrap();
        assert!(replace(&path, &tmp, b"three\n", 0o600).is_err());
        assert_eq!(std::fs::read(&path).unwrap(), b"two\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
