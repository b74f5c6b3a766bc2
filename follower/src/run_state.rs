//! The run check's saved state, kept beside the cursor (`<cursor>.runs`),
//! so a restart reads only what came after it instead of the whole log.
//!
//! The file says which log and which event it describes (the origin and
//! the `seq:hash` of the last event fed) and ends with the CRC-32 of all
//! before it. It is written like the cursor (temp file, fsync, rename,
//! fsync of the directory), and only once the sink has acknowledged the
//! event it describes, so it never runs ahead of what was delivered. A
//! start uses it only when its checksum holds, it is this origin's, and the
//! database still holds its `seq:hash` at or below the resume point;
//! anything else is said and the open runs are rebuilt from the start.
//!
//! Layout: `chainship-run-state/1\n`, then the origin, the head (`SEQ:HASH`)
//! and the check's own bytes, each as a big-endian u32 length and the bytes,
//! then the big-endian CRC-32 (IEEE) of all before it. The CRC finds damage
//! (a torn write, a flipped bit); it is not a seal: whoever can write here
//! can write the cursor too, and the state is only used when the database
//! holds its `seq:hash`. It replaced a SHA-256, which was most of the time
//! a restart spent reading a large state.

use std::path::{Path, PathBuf};

use chainship_chain::Head;

const MAGIC: &[u8] = b"chainship-run-state/2\n";

/// Larger saved states are not written (nor read): the check's own caps
/// keep real ones far below this; a restart then rebuilds from the log.
pub const MAX_BYTES: usize = 64 << 20;

/// The run state file of one cursor, for one origin.
#[derive(Clone, Debug)]
pub struct RunStateFile {
    path: PathBuf,
    origin: String,
}

/// A state that was read and holds together (checksum, origin).
#[derive(Debug)]
pub struct SavedState {
    /// The last event the state has seen.
    pub head: Head,
    /// [`chainship_runs::RunCheck::save`]'s bytes.
    pub check: Vec<u8>,
}

impl RunStateFile {
    pub fn new(path: PathBuf, origin: &str) -> Self {
        RunStateFile {
            path,
            origin: origin.to_owned(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The saved state; `Ok(None)` when there is none, `Err` saying why a
    /// file that is there cannot be used.
    pub fn load(&self) -> Result<Option<SavedState>, String> {
        use std::io::Read;
        use std::os::unix::fs::OpenOptionsExt;
        // Non-blocking: a FIFO planted here must not hang the start. Not
        // through a symbolic link: the follower writes this file, never a link.
        let file = match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
            .open(&self.path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err("a symbolic link".into()),
            Err(e) => return Err(e.to_string()),
        };
        let meta = file.metadata().map_err(|e| e.to_string())?;
        if !meta.is_file() {
            return Err("not a regular file".into());
        }
        if meta.len() > MAX_BYTES as u64 {
            return Err(format!("larger than {} MiB", MAX_BYTES >> 20));
        }
        // The magic first: a large file that is something else is not read whole.
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        bytes.resize(MAGIC.len(), 0);
        let mut file = file.take(MAX_BYTES as u64 + 1);
        file.read_exact(&mut bytes)
            .map_err(|_| "not a chainship run state (or another version of one)".to_owned())?;
        if bytes != MAGIC {
            return Err("not a chainship run state (or another version of one)".into());
        }
        file.read_to_end(&mut bytes).map_err(|e| e.to_string())?;
        if bytes.len() > MAX_BYTES {
            return Err(format!("larger than {} MiB", MAX_BYTES >> 20));
        }
        let (head, check) = self.decode(&bytes)?;
        // The check's bytes are most of the file: cut down to them, not copied.
        bytes.truncate(check.end);
        bytes.drain(..check.start);
        Ok(Some(SavedState { head, check: bytes }))
    }

    /// The head and where the check's bytes are.
    fn decode(&self, bytes: &[u8]) -> Result<(Head, std::ops::Range<usize>), String> {
        let body = bytes
            .strip_prefix(MAGIC)
            .ok_or("not a chainship run state (or another version of one)")?;
        let (fields, digest) = body
            .split_at_checked(body.len().saturating_sub(4))
            .filter(|(_, d)| d.len() == 4)
            .ok_or("cut short")?;
        if crc32fast::hash(&bytes[..bytes.len() - 4]).to_be_bytes() != digest {
            return Err("its checksum does not hold (damaged or cut short)".into());
        }
        let mut rest = fields;
        let mut field = || -> Result<&[u8], String> {
            let (len, tail) = rest.split_at_checked(4).ok_or("cut short")?;
            let len = u32::from_be_bytes(len.try_into().expect("4 bytes")) as usize;
            let (value, tail) = tail.split_at_checked(len).ok_or("cut short")?;
            rest = tail;
            Ok(value)
        };
        let origin = field()?;
        if origin != self.origin.as_bytes() {
            // Shown shortened: the file is not trusted to keep a log line short.
            let shown: String = String::from_utf8_lossy(origin).chars().take(200).collect();
            return Err(format!(
                "saved for origin {:?}{}, not this follower's",
                shown.escape_debug().to_string(),
                if origin.len() > shown.len() { " (shortened)" } else { "" }
            ));
        }
        let head = std::str::from_utf8(field()?)
            .ok()
            .and_then(|h| h.parse::<Head>().ok())
            .ok_or("its head is not SEQ:HASH")?;
        let check = field()?;
        if !rest.is_empty() {
            return Err(format!("{} bytes after its fields", rest.len()));
        }
        let start = check.as_ptr() as usize - bytes.as_ptr() as usize;
        Ok((head, start..start + check.len()))
    }

    /// Replaces the file with `check` as of `head`, atomically and durably.
    pub fn store(&self, head: Head, check: &[u8]) -> std::io::Result<()> {
        let head = head.to_string();
        let mut bytes = Vec::with_capacity(MAGIC.len() + 12 + self.origin.len() + head.len() + check.len() + 4);
        bytes.extend_from_slice(MAGIC);
        for value in [self.origin.as_bytes(), head.as_bytes(), check] {
            let len = u32::try_from(value.len()).map_err(|_| std::io::Error::other("too large"))?;
            bytes.extend_from_slice(&len.to_be_bytes());
            bytes.extend_from_slice(value);
        }
        let crc = crc32fast::hash(&bytes);
        bytes.extend_from_slice(&crc.to_be_bytes());
        crate::cursor::write_atomically(&self.path, &bytes)
    }

    /// Removes the file (a state that cannot be used is not read again).
    pub fn remove(&self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: &str = "2d17715bc635406807722f1764c509105f5ac15ad430729545bc4d87055da291";

    #[test]
    fn a_state_reads_back_only_whole_and_for_its_own_origin() {
        let dir = tempfile::tempdir().unwrap();
        let file = RunStateFile::new(dir.path().join("cursor.runs"), "example.com/log");
        assert!(file.load().unwrap().is_none());
        let head: Head = format!("42:{H}").parse().unwrap();
        file.store(head, b"the check's bytes").unwrap();
        let saved = file.load().unwrap().unwrap();
        assert_eq!(saved.head, head);
        assert_eq!(saved.check, b"the check's bytes");

        let other = RunStateFile::new(file.path().to_owned(), "example.com/other");
        assert!(other.load().unwrap_err().contains("not this follower's"));

        let bytes = std::fs::read(file.path()).unwrap();
        for cut in [0, 5, MAGIC.len(), MAGIC.len() + 3, bytes.len() - 5, bytes.len() - 1] {
            std::fs::write(file.path(), &bytes[..cut]).unwrap();
            assert!(file.load().is_err(), "cut at {cut}");
        }
        // Not a regular file, or something else that is large: refused at once, not read whole.
        std::fs::remove_file(file.path()).unwrap();
        let path = std::ffi::CString::new(file.path().as_os_str().as_encoded_bytes()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
        assert!(file.load().unwrap_err().contains("not a regular file"));
        std::fs::remove_file(file.path()).unwrap();
        std::fs::write(file.path(), vec![0u8; 1 << 20]).unwrap();
        assert!(file.load().unwrap_err().contains("not a chainship run state"));
        // A link, even to a state that would do, is refused (and said), not followed.
        let real = dir.path().join("elsewhere.runs");
        std::fs::write(&real, &bytes).unwrap();
        std::fs::remove_file(file.path()).unwrap();
        std::os::unix::fs::symlink(&real, file.path()).unwrap();
        assert_eq!(file.load().unwrap_err(), "a symbolic link");
        std::fs::remove_file(file.path()).unwrap();
        std::os::unix::fs::symlink(dir.path().join("nowhere"), file.path()).unwrap();
        assert_eq!(file.load().unwrap_err(), "a symbolic link");
        std::fs::remove_file(file.path()).unwrap();
        // Bytes after the fields, with a checksum that holds over them.
        let mut padded = bytes[..bytes.len() - 4].to_vec();
        padded.extend_from_slice(b"junk");
        let crc = crc32fast::hash(&padded);
        padded.extend_from_slice(&crc.to_be_bytes());
        std::fs::write(file.path(), &padded).unwrap();
        assert!(file.load().unwrap_err().contains("after its fields"));
        for flip in [MAGIC.len() + 2, MAGIC.len() + 20, bytes.len() - 6, bytes.len() - 3] {
            let mut damaged = bytes.clone();
            damaged[flip] ^= 1;
            std::fs::write(file.path(), &damaged).unwrap();
            assert!(file.load().is_err(), "bit flipped at {flip}");
        }
    }
}
