//! The run check's saved state, kept beside the cursor (`<cursor>.runs`),
//! so a restart reads only what came after it instead of the whole log.
//!
//! The file says which log and which event it describes (the origin and
//! the `seq:hash` of the last event fed) and ends with the CRC-32 of all
//! before it. It is written like the cursor (temp file, fsync, rename,
//! fsync of the directory), the check's bytes streamed into the temp file
//! as they are encoded (a large state is never held twice in memory), and
//! put in place only once the sink has acknowledged the event it
//! describes, so it never runs ahead of what was delivered. A
//! start uses it only when its checksum holds, it is this origin's, and the
//! database still holds its `seq:hash` at or below the resume point;
//! anything else is said and the open runs are rebuilt from the start.
//!
//! Layout: `chainship-run-state/3\n`, then the origin and the head
//! (`SEQ:HASH`), each as a big-endian u32 length and the bytes, then the
//! check's own bytes up to the big-endian CRC-32 (IEEE) of all before it,
//! which ends the file. The CRC finds damage
//! (a torn write, a flipped bit); it is not a seal: whoever can write here
//! can write the cursor too, and the state is only used when the database
//! holds its `seq:hash`. It replaced a SHA-256, which was most of the time
//! a restart spent reading a large state.

use std::path::{Path, PathBuf};

use chainship_chain::{Error, Head};

const MAGIC: &[u8] = b"chainship-run-state/3\n";

/// Larger saved states are not written (nor read): the check's own caps
/// keep real ones far below this; a restart then rebuilds from the log.
pub const MAX_BYTES: usize = 64 << 20;

/// The run state file of one cursor, for one origin.
#[derive(Clone, Debug)]
pub struct RunStateFile {
    path: PathBuf,
    origin: String,
}

/// A state written beside the file, put in place by [`StagedState::commit`]
/// once the sink holds its head; dropped before that, it is removed.
#[derive(Debug)]
pub struct StagedState {
    staged: chainship_chain::atomic_file::Staged,
    /// The last event the state has seen.
    pub head: Head,
}

impl StagedState {
    /// Replaces the state file with this one, durably.
    pub fn commit(self) -> std::io::Result<()> {
        self.staged.commit()
    }
}

/// Why a state was not staged.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    #[error("the state is larger than {} MiB", MAX_BYTES >> 20)]
    TooLarge,
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Writes through, summing the CRC-32 of what passes and refusing to pass
/// [`MAX_BYTES`].
struct Sealing<W> {
    out: W,
    crc: crc32fast::Hasher,
    written: usize,
}

impl<W: std::io::Write> std::io::Write for Sealing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.written + buf.len() > MAX_BYTES - 4 {
            return Err(std::io::ErrorKind::FileTooLarge.into());
        }
        let n = self.out.write(buf)?;
        self.crc.update(&buf[..n]);
        self.written += n;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// A state that was read whole and holds together (the tests' view; a start
/// streams it, see [`RunStateFile::load_with`]).
#[cfg(test)]
#[derive(Debug)]
pub struct SavedState {
    /// The last event the state has seen.
    pub head: Head,
    /// [`chainship_runs::RunCheck::save`]'s bytes.
    pub check: Vec<u8>,
}

/// Why a saved state on disk cannot be used (the check is then rebuilt).
fn unusable(why: impl std::fmt::Display) -> Error {
    Error::integrity(why)
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

    /// The saved state, read whole; `Ok(None)` when there is none.
    #[cfg(test)]
    pub fn load(&self) -> Result<Option<SavedState>, Error> {
        let loaded = self.load_with(|_, input| {
            let mut check = Vec::new();
            input.read_to_end(&mut check).map_err(unusable)?;
            Ok(check)
        })?;
        Ok(loaded.map(|(head, check)| SavedState { head, check }))
    }

    /// The origin the state was saved for, when there is a state and it names
    /// another one than this follower's: read from its first field alone,
    /// unchecked, and shortened. Only a hint for a message: a cursor given to
    /// the wrong follower carries its origin's run state beside it.
    pub fn other_origin(&self) -> Option<String> {
        use std::io::Read;
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
            .open(&self.path)
            .ok()
            .filter(|f| f.metadata().is_ok_and(|m| m.is_file()))?;
        let mut head = Vec::with_capacity(MAGIC.len() + 4 + 200);
        file.take((MAGIC.len() + 4 + 200) as u64).read_to_end(&mut head).ok()?;
        let rest = head.strip_prefix(MAGIC)?;
        let len = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize;
        // A field the file does not hold whole (as far as it is read) is no origin.
        let origin = rest.get(4..4 + len.min(200))?;
        (origin != self.origin.as_bytes()).then(|| {
            // At most 200 characters shown, escapes included, and said when cut.
            let escaped = String::from_utf8_lossy(origin).escape_debug().to_string();
            let shown: String = escaped.chars().take(200).collect();
            if shown.len() < escaped.len() || len > origin.len() {
                format!("{shown}...")
            } else {
                shown
            }
        })
    }

    /// The saved state's head, and what `read` makes of it and the check's
    /// bytes, handed over as a stream once the whole file's checksum held
    /// (the file is read twice, never held whole in memory). `Ok(None)` when
    /// there is none; `Err` saying why a file that is there cannot be used.
    pub fn load_with<T>(
        &self,
        read: impl FnOnce(Head, &mut dyn std::io::Read) -> Result<T, Error>,
    ) -> Result<Option<(Head, T)>, Error> {
        use std::io::{Read, Seek};
        use std::os::unix::fs::OpenOptionsExt;
        let not_a_state = || unusable("not a chainship run state (or another version of one)");
        // Non-blocking: a FIFO planted here must not hang the start. Not
        // through a symbolic link: the follower writes this file, never a link.
        let mut file = match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
            .open(&self.path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err(unusable("a symbolic link")),
            Err(e) => return Err(unusable(e)),
        };
        let meta = file.metadata().map_err(unusable)?;
        if !meta.is_file() {
            return Err(unusable("not a regular file"));
        }
        if meta.len() > MAX_BYTES as u64 {
            return Err(unusable(format!("larger than {} MiB", MAX_BYTES >> 20)));
        }
        // The magic first: a large file that is something else is not read.
        let mut magic = vec![0u8; MAGIC.len()];
        if file.read_exact(&mut magic).is_err() || magic != MAGIC {
            return Err(not_a_state());
        }
        let body = meta
            .len()
            .checked_sub(4)
            .filter(|b| *b >= MAGIC.len() as u64)
            .ok_or_else(|| unusable("cut short"))?;
        let mut crc = crc32fast::Hasher::new();
        crc.update(MAGIC);
        let mut rest = (&mut file).take(body - MAGIC.len() as u64);
        let mut chunk = vec![0u8; 64 << 10];
        loop {
            match rest.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => crc.update(&chunk[..n]),
                Err(e) => return Err(unusable(e)),
            }
        }
        let mut digest = [0u8; 4];
        file.read_exact(&mut digest).map_err(|_| unusable("cut short"))?;
        if crc.finalize().to_be_bytes() != digest {
            return Err(unusable("its checksum does not hold (damaged or cut short)"));
        }
        file.seek(std::io::SeekFrom::Start(MAGIC.len() as u64))
            .map_err(unusable)?;
        let mut fields = std::io::BufReader::with_capacity(64 << 10, file.take(body - MAGIC.len() as u64));
        // A field's first `longest` bytes (no more are read) and its length.
        let mut field = |longest: usize| -> Result<(Vec<u8>, usize), Error> {
            let mut len = [0u8; 4];
            fields.read_exact(&mut len).map_err(|_| unusable("cut short"))?;
            let len = u32::from_be_bytes(len) as usize;
            let mut value = vec![0u8; len.min(longest)];
            fields.read_exact(&mut value).map_err(|_| unusable("cut short"))?;
            Ok((value, len))
        };
        // Longer than this one's, it is another's: shown shortened (the
        // file is not trusted to keep a log line short).
        let (origin, origin_len) = field(self.origin.len().max(200))?;
        if origin_len != origin.len() || origin != self.origin.as_bytes() {
            let shown: String = String::from_utf8_lossy(&origin).chars().take(200).collect();
            return Err(unusable(format!(
                "saved for origin {:?}{}, not this follower's",
                shown.escape_debug().to_string(),
                if origin_len > shown.len() { " (shortened)" } else { "" }
            )));
        }
        let (head, head_len) = field(100)?;
        let head = std::str::from_utf8(&head)
            .ok()
            .filter(|_| head_len == head.len())
            .and_then(|h| h.parse::<Head>().ok())
            .ok_or_else(|| unusable("its head is not SEQ:HASH"))?;
        let check = read(head, &mut fields)?;
        Ok(Some((head, check)))
    }

    /// Writes the state as of `head` beside the file, the check's bytes
    /// as `check` writes them; [`StagedState::commit`] puts it in place.
    pub fn stage(
        &self,
        head: Head,
        check: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
    ) -> Result<StagedState, StageError> {
        let tmp = crate::cursor::temp_beside(&self.path);
        let mut staged = chainship_chain::atomic_file::Staged::create(&self.path, &tmp, 0o600)?;
        self.write_staged(staged.file(), head, check)?;
        Ok(StagedState { staged, head })
    }

    /// The file's content, the check's bytes as `check` writes them.
    fn write_staged(
        &self,
        file: &mut std::fs::File,
        head: Head,
        check: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
    ) -> Result<(), StageError> {
        use std::io::Write;
        let too_large = |e: std::io::Error| match e.kind() {
            std::io::ErrorKind::FileTooLarge => StageError::TooLarge,
            _ => StageError::Io(e),
        };
        let mut out = Sealing {
            out: std::io::BufWriter::with_capacity(64 << 10, file),
            crc: crc32fast::Hasher::new(),
            written: 0,
        };
        out.write_all(MAGIC)?;
        let head_text = head.to_string();
        for value in [self.origin.as_bytes(), head_text.as_bytes()] {
            let len = u32::try_from(value.len()).map_err(|_| StageError::TooLarge)?;
            out.write_all(&len.to_be_bytes()).map_err(too_large)?;
            out.write_all(value).map_err(too_large)?;
        }
        check(&mut out).map_err(too_large)?;
        let Sealing { out: mut file, crc, .. } = out;
        file.write_all(&crc.finalize().to_be_bytes())?;
        file.flush()?;
        Ok(())
    }

    /// Replaces the file with `check` as of `head`, atomically and durably.
    #[cfg(test)]
    pub fn store(&self, head: Head, check: &[u8]) -> Result<(), StageError> {
        self.stage(head, |out| out.write_all(check))?.commit()?;
        Ok(())
    }

    /// Removes the file (a state that cannot be used is not read again).
    pub fn remove(&self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A state is written as it is encoded, beside the file: the file
    /// changes only when it is committed, and a state past the limit is
    /// refused part-way (never written whole, never in place).
    #[test]
    fn a_staged_state_replaces_the_file_only_when_committed() {
        let dir = tempfile::tempdir().unwrap();
        let file = RunStateFile::new(dir.path().join("cursor.runs"), "example.com/log");
        let (one, two): (Head, Head) = (format!("1:{H}").parse().unwrap(), format!("2:{H}").parse().unwrap());
        file.store(one, b"first").unwrap();
        let staged = file
            .stage(two, |out| {
                out.write_all(b"sec")?;
                out.write_all(b"ond")
            })
            .unwrap();
        assert!(dir.path().join("cursor.runs.tmp").is_file(), "written beside the file");
        assert_eq!(file.load().unwrap().unwrap().check, b"first", "not committed yet");
        drop(staged);
        assert!(!dir.path().join("cursor.runs.tmp").exists(), "dropped, it is removed");
        assert_eq!(file.load().unwrap().unwrap().check, b"first");
        file.stage(two, |out| out.write_all(b"second"))
            .unwrap()
            .commit()
            .unwrap();
        let saved = file.load().unwrap().unwrap();
        assert_eq!((saved.head, saved.check.as_slice()), (two, &b"second"[..]));
        let chunk = vec![7u8; 1 << 20];
        let err = file
            .stage(one, |out| {
                for _ in 0..=MAX_BYTES >> 20 {
                    out.write_all(&chunk)?;
                }
                Ok(())
            })
            .unwrap_err();
        assert!(matches!(err, StageError::TooLarge), "{err}");
        assert!(!dir.path().join("cursor.runs.tmp").exists());
        assert_eq!(file.load().unwrap().unwrap().check, b"second");
    }

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
        assert!(other.load().unwrap_err().message.contains("not this follower's"));

        let bytes = std::fs::read(file.path()).unwrap();
        for cut in [0, 5, MAGIC.len(), MAGIC.len() + 3, bytes.len() - 5, bytes.len() - 1] {
            std::fs::write(file.path(), &bytes[..cut]).unwrap();
            assert!(file.load().is_err(), "cut at {cut}");
        }
        // Not a regular file, or something else that is large: refused at once, not read whole.
        std::fs::remove_file(file.path()).unwrap();
        let path = std::ffi::CString::new(file.path().as_os_str().as_encoded_bytes()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
        assert!(file.load().unwrap_err().message.contains("not a regular file"));
        std::fs::remove_file(file.path()).unwrap();
        std::fs::write(file.path(), vec![0u8; 1 << 20]).unwrap();
        assert!(file.load().unwrap_err().message.contains("not a chainship run state"));
        // A link, even to a state that would do, is refused (and said), not followed.
        let real = dir.path().join("elsewhere.runs");
        std::fs::write(&real, &bytes).unwrap();
        std::fs::remove_file(file.path()).unwrap();
        std::os::unix::fs::symlink(&real, file.path()).unwrap();
        assert_eq!(file.load().unwrap_err().message, "a symbolic link");
        std::fs::remove_file(file.path()).unwrap();
        std::os::unix::fs::symlink(dir.path().join("nowhere"), file.path()).unwrap();
        assert_eq!(file.load().unwrap_err().message, "a symbolic link");
        std::fs::remove_file(file.path()).unwrap();
        // Bytes added after the check's, with a checksum that holds over
        // them, are read as the check's (whose own decoding refuses them).
        let mut padded = bytes[..bytes.len() - 4].to_vec();
        padded.extend_from_slice(b"junk");
        let crc = crc32fast::hash(&padded);
        padded.extend_from_slice(&crc.to_be_bytes());
        std::fs::write(file.path(), &padded).unwrap();
        assert_eq!(file.load().unwrap().unwrap().check, b"the check's bytesjunk");
        for flip in [MAGIC.len() + 2, MAGIC.len() + 20, bytes.len() - 6, bytes.len() - 3] {
            let mut damaged = bytes.clone();
            damaged[flip] ^= 1;
            std::fs::write(file.path(), &damaged).unwrap();
            assert!(file.load().is_err(), "bit flipped at {flip}");
        }
    }
}
