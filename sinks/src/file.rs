//! `file:PATH` — appends records as JSON Lines, fsynced once per batch.
//!
//! A crash can leave at most a torn last line (a batch written but never
//! acknowledged). On start the sink cuts the file back to its last complete
//! line, then reports that line's seq and hash as what it holds, so the
//! follower resumes right after it: no record twice, none missing.
//! [`read_records`] streams the file back for `verify-export`.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use chainship_chain::record::{Record, RecordFormat};
use chainship_chain::{Head, HeldCheck};

use crate::Sink;
use crate::batch::Batch;
use crate::error::SinkError;
use crate::lines::{OnRecord, read_lines};

pub struct FileSink {
    path: PathBuf,
    origin: String,
    /// Opened (and created if needed) on first use, as the Kafka and S3 sinks
    /// make their clients: building a sink, e.g. for `chainship check`, writes nothing.
    file: Option<File>,
}

impl FileSink {
    pub fn new(path: &Path, origin: &str) -> Self {
        FileSink {
            path: path.to_owned(),
            origin: origin.to_owned(),
            file: None,
        }
    }

    fn io(&self, e: std::io::Error) -> SinkError {
        io_error(&self.path, e)
    }
}

fn io_error(path: &Path, e: std::io::Error) -> SinkError {
    SinkError::from_io(format!("file sink {}", path.display()), &e)
}

/// The open file in `slot`, opening (creating if needed) `path` for appending first.
/// The pid holding a `flock` on `file`, from the kernel's `/proc/locks`
/// (`ID: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE START END`), if it says.
fn lock_holder(file: &File) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let inode = file.metadata().ok()?.ino();
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    locks.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // Lines of a blocked waiter carry "->" after the id.
        let fields = if fields.get(1) == Some(&"->") {
            &fields[1..]
        } else {
            &fields[..]
        };
        let (kind, pid, place) = (fields.get(1)?, fields.get(4)?, fields.get(5)?);
        let ino: u64 = place.rsplit(':').next()?.parse().ok()?;
        (*kind == "FLOCK" && ino == inode).then(|| pid.parse().ok())?
    })
}

fn opened<'a>(slot: &'a mut Option<File>, path: &Path) -> Result<&'a mut File, SinkError> {
    if slot.is_none() {
        let existed = path.exists();
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o640)
            .open(path)
            .map_err(|e| {
                SinkError::permanent(format!(
                    "file sink {}: cannot open: {}",
                    path.display(),
                    chainship_chain::access::explain(path, &e)
                ))
            })?;
        // A device or a FIFO can be neither read back nor made durable
        // (fsync of /dev/null fails every time): refused, not retried forever.
        if !file.metadata().map_err(|e| io_error(path, e))?.is_file() {
            return Err(SinkError::permanent(format!(
                "file sink {}: not a regular file (its records must be read back and made durable)",
                path.display()
            )));
        }
        // Held for the life of the process: two followers appending to one
        // file interleave batches and cut each other's "torn" lines.
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let holder =
                    lock_holder(&file).map_or_else(|| "another process".to_owned(), |pid| format!("pid {pid}"));
                return Err(SinkError::permanent(format!(
                    "file sink {}: {holder} holds it (another follower writing to this file?)",
                    path.display()
                )));
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(SinkError::permanent(format!(
                    "file sink {}: cannot lock: {e}",
                    path.display()
                )));
            }
        }
        if !existed {
            sync_parent(path).map_err(|e| io_error(path, e))?;
        }
        *slot = Some(file);
    }
    Ok(slot.as_mut().expect("opened above"))
}

/// Cuts a torn last line (no trailing newline) and returns the new length:
/// only when it is the start of a record after complete records (or at the
/// very start), which is all a crash mid-batch can leave. Anything else is
/// not this sink's file (a database, someone's notes): it is refused, and
/// not one byte of it is changed.
fn repair_torn_tail(file: &mut File, path: &Path) -> Result<u64, SinkError> {
    let io = |e| io_error(path, e);
    let len = file.metadata().map_err(io)?.len();
    if len == 0 || byte_at(file, len - 1).map_err(io)? == b'\n' {
        return Ok(len);
    }
    let keep = match last_newline_before(file, len).map_err(io)? {
        Some(pos) => pos + 1,
        None => 0,
    };
    // The torn bytes must be how a record line of some format begins.
    let torn = read_at(file, keep, ((len - keep) as usize).min(64)).map_err(io)?;
    let torn_is_a_record_start = RecordFormat::ALL.iter().any(|f| {
        let n = torn.len().min(f.line_start().len());
        torn[..n] == f.line_start()[..n]
    });
    let last_complete_is_a_record = keep == 0 || {
        let start = match keep.checked_sub(1) {
            Some(0) | None => 0,
            Some(end) => last_newline_before(file, end).map_err(io)?.map_or(0, |p| p + 1),
        };
        let line = read_at(file, start, (keep - 1 - start) as usize).map_err(io)?;
        Record::parse(&line).is_ok()
    };
    if !(torn_is_a_record_start && last_complete_is_a_record) {
        return Err(SinkError::integrity(format!(
            "file sink {}: not a chainship JSON Lines file (it does not end in a complete record); refusing to write to it",
            path.display()
        )));
    }
    tracing::warn!(
        file = %path.display(),
        dropped_bytes = len - keep,
        "file sink: cut a torn last line left by a crash (it was never acknowledged and will be sent again)"
    );
    file.set_len(keep).map_err(io)?;
    file.sync_all().map_err(io)?;
    Ok(keep)
}

fn read_at(file: &mut File, pos: u64, len: usize) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    file.seek(SeekFrom::Start(pos))?;
    file.read_exact(&mut buf)?;
    Ok(buf)
}

fn byte_at(file: &mut File, pos: u64) -> std::io::Result<u8> {
    let mut b = [0u8; 1];
    file.seek(SeekFrom::Start(pos))?;
    file.read_exact(&mut b)?;
    Ok(b[0])
}

/// Where the lines past seq `after` begin: found by reading lines back from
/// the end until one holds a seq at or below `after`.
struct LinesFrom {
    offset: u64,
    /// How many lines follow it (messages count lines from the end: a line
    /// number from the start would need the whole file read).
    lines: u64,
}

fn start_of_lines_after(file: &mut File, len: u64, after: u64) -> std::io::Result<LinesFrom> {
    let mut end = len;
    let mut from_end = 0u64;
    while end > 0 {
        let start = last_newline_before(file, end - 1)?.map_or(0, |p| p + 1);
        let mut line = vec![0u8; (end - 1 - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut line)?;
        // A line that is not a record is past the boundary: the check names it.
        if Record::parse(&line).is_ok_and(|r| r.seq <= after) {
            break;
        }
        end = start;
        from_end += 1;
    }
    Ok(LinesFrom {
        offset: end,
        lines: from_end,
    })
}

/// The position of the last `\n` before `end`, reading backwards in chunks.
fn last_newline_before(file: &mut File, end: u64) -> std::io::Result<Option<u64>> {
    let mut chunk = vec![0u8; 64 * 1024];
    let mut hi = end;
    while hi > 0 {
        let lo = hi.saturating_sub(chunk.len() as u64);
        let buf = &mut chunk[..(hi - lo) as usize];
        file.seek(SeekFrom::Start(lo))?;
        file.read_exact(buf)?;
        if let Some(i) = buf.iter().rposition(|b| *b == b'\n') {
            return Ok(Some(lo + i as u64));
        }
        hi = lo;
    }
    Ok(None)
}

#[async_trait]
impl Sink for FileSink {
    async fn held(&mut self, after: Option<Head>) -> Result<Option<Head>, SinkError> {
        let path = self.path.clone();
        let file = opened(&mut self.file, &path)?;
        let len = repair_torn_tail(file, &path)?;
        let mut check = HeldCheck::new(&self.origin, after);
        let from = start_of_lines_after(file, len, check.after_seq()).map_err(|e| io_error(&path, e))?;
        file.seek(SeekFrom::Start(from.offset))
            .map_err(|e| io_error(&path, e))?;
        let mut lines = BufReader::new(&*file).take(len - from.offset);
        let mut line = Vec::new();
        let mut from_end = from.lines;
        loop {
            line.clear();
            if lines.read_until(b'\n', &mut line).map_err(|e| io_error(&path, e))? == 0 {
                break;
            }
            let json = line.strip_suffix(b"\n").unwrap_or(&line);
            check
                .feed(json, &|| {
                    format!("file sink {}: line {from_end} from the end", path.display())
                })
                .map_err(|m| SinkError::integrity(format!("{m}; the file holds what the chain does not")))?;
            from_end = from_end.saturating_sub(1);
        }
        Ok(check.head())
    }

    async fn holds(&mut self, head: Head) -> Result<bool, SinkError> {
        let path = self.path.clone();
        let io = |e| io_error(&path, e);
        let file = opened(&mut self.file, &path)?;
        let len = repair_torn_tail(file, &path)?;
        // The last line at or below `head`'s seq must be `head`'s own record.
        let from = start_of_lines_after(file, len, head.seq).map_err(io)?;
        if from.offset == 0 {
            return Ok(false);
        }
        let start = match from.offset.checked_sub(1) {
            Some(0) | None => 0,
            Some(end) => last_newline_before(file, end).map_err(io)?.map_or(0, |p| p + 1),
        };
        let line = read_at(file, start, (from.offset - 1 - start) as usize).map_err(io)?;
        // Another origin's record at that seq is not ours (a follower given
        // another --origin would otherwise append its chain to this one's).
        Ok(Record::parse(&line)
            .is_ok_and(|r| r.origin == self.origin && r.seq == head.seq && r.hash.as_bytes() == &head.hash[..]))
    }

    async fn deliver(&mut self, batch: &Batch) -> Result<(), SinkError> {
        let path = &self.path;
        let file = opened(&mut self.file, path)?;
        let before = file.metadata().map_err(|e| io_error(path, e))?.len();
        let written = file.write_all(&batch.jsonl).and_then(|_| file.sync_data());
        if let Err(e) = written {
            // Never leave half a batch behind a retry: cut back to where it began.
            let _ = file.set_len(before);
            return Err(io_error(path, e));
        }
        Ok(())
    }

    /// Without creating the file: an existing one must open for appending; a
    /// missing one needs a writable directory (proved with a probe file that
    /// is removed again).
    async fn check(&mut self) -> Result<String, SinkError> {
        if self.path.exists() {
            let file = OpenOptions::new()
                .append(true)
                .open(&self.path)
                .map_err(|e| self.io(e))?;
            let len = file.metadata().map_err(|e| self.io(e))?.len();
            return Ok(format!("writable, {len} bytes held"));
        }
        let name = self.path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
        let probe = self
            .path
            .with_file_name(format!(".{name}.chainship-check-{}", std::process::id()));
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&probe)
            .and_then(|_| std::fs::remove_file(&probe))
            .map_err(|e| self.io(e))?;
        Ok("not there yet; its directory is writable (the first batch creates it)".into())
    }

    fn describe(&self) -> String {
        format!("file:{}", self.path.display())
    }
}

/// Calls `each(line, place)` for every line of the file, streamed.
pub fn read_records(path: &Path, each: &mut OnRecord<'_>) -> Result<(), SinkError> {
    let file = File::open(path).map_err(|e| SinkError::permanent(format!("{}: {e}", path.display())))?;
    read_lines(
        BufReader::with_capacity(1 << 20, file),
        &path.display().to_string(),
        each,
    )
}

/// Calls `each(line, None, place)` for every line of a file copy, or of
/// every file under a directory of copies (a fleet's files: read in name
/// order, hidden ones, links to files and subdirectories too, as a
/// collector globbing the directory may ingest them). What cannot be read
/// as lines (a device, a pipe, a link to nothing, a loop of directories
/// deeper than [`MAX_DEPTH`]) is handed on as a line that is no record, at
/// its path, so the check names it instead of passing over it.
pub fn read_shared(path: &Path, each: &mut crate::OnSharedRecord<'_>) -> Result<(), SinkError> {
    if !path.is_dir() {
        return read_records(path, &mut |line, place| each(line, None, place));
    }
    read_dir_shared(path, 0, each)
}

/// How deep [`read_shared`] goes into subdirectories.
pub const MAX_DEPTH: usize = 16;

fn read_dir_shared(dir: &Path, depth: usize, each: &mut crate::OnSharedRecord<'_>) -> Result<(), SinkError> {
    let fail = |e: std::io::Error| SinkError::permanent(format!("{}: {e}", dir.display()));
    let mut entries: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .map_err(fail)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(fail)?;
    entries.sort();
    for entry in entries {
        // Followed through links: a link to a file is read as the file.
        let kind = std::fs::metadata(&entry).map(|m| m.file_type());
        match kind {
            Ok(t) if t.is_file() => read_records(&entry, &mut |line, place| each(line, None, place))?,
            Ok(t) if t.is_dir() && depth < MAX_DEPTH => read_dir_shared(&entry, depth + 1, each)?,
            _ => {
                let why = match kind {
                    Ok(t) if t.is_dir() => format!("a directory deeper than {MAX_DEPTH} levels"),
                    Ok(_) => "not a regular file".to_owned(),
                    Err(e) => e.to_string(),
                };
                let place = format!("{}: {why}, not read as a copy", entry.display());
                each(crate::lines::NOT_A_RECORD, None, &|| place.clone());
            }
        }
    }
    Ok(())
}

/// fsyncs the directory holding `path`, so a new entry survives a crash.
pub fn sync_parent(path: &Path) -> std::io::Result<()> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    File::open(parent)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(path: &Path) -> Result<Option<Head>, SinkError> {
        let mut sink = FileSink::new(path, "o");
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(sink.held(None))
    }

    #[test]
    fn a_file_that_is_not_this_sinks_is_refused_untouched() {
        let dir = tempfile::tempdir().unwrap();
        for (name, bytes) in [
            ("notes.txt", &b"important line\nlast words"[..]),
            ("db", &b"SQLite format 3\0\x10\x00binary"[..]),
            ("record-then-junk", &b"{\"origin\":\"o\",\"seq\":1}\nlast words"[..]),
            ("junk-then-torn", &b"not a record\n{\"origin\":\"o\",\"se"[..]),
        ] {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            let e = held(&path).unwrap_err();
            assert_eq!(e.kind, crate::ErrorKind::Integrity, "{name}: {e}");
            assert!(e.message.contains("not a chainship JSON Lines file"), "{name}: {e}");
            assert_eq!(std::fs::read(&path).unwrap(), bytes, "{name} was changed");
        }
    }

    #[test]
    fn a_device_is_refused_at_once_not_retried() {
        let e = held(Path::new("/dev/null")).unwrap_err();
        assert_eq!(e.kind, crate::ErrorKind::Permanent, "{e}");
        assert!(e.message.contains("not a regular file"), "{e}");
    }

    #[test]
    fn the_cursors_record_counts_only_under_this_sinks_origin() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        let hash = "a".repeat(64);
        let line = serde_json::json!({"origin":"a","seq":1,"run_id":"r","step_id":"","at":"t","type":"k",
            "payload_json":"{}","hash":hash,"prev_hash":""});
        std::fs::write(&path, format!("{line}\n")).unwrap();
        let head = Head::from_stored(1, hash.as_bytes()).unwrap();
        let holds = |origin: &str| {
            let mut sink = FileSink::new(&path, origin);
            tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap()
                .block_on(sink.holds(head))
                .unwrap()
        };
        assert!(holds("a"));
        assert!(!holds("b"), "another origin's record stood in for the cursor's");
    }

    #[test]
    fn a_torn_record_is_cut_whatever_byte_the_crash_left_it_at() {
        let dir = tempfile::tempdir().unwrap();
        for torn in [
            &b"{"[..],
            b"{\"orig",
            b"{\"origin\":\"o\",\"seq\":2,\"run",
            b"{\"activity_id\":99,\"act",
            b"{\"@timest",
        ] {
            let path = dir.path().join("out.jsonl");
            std::fs::write(&path, torn).unwrap();
            assert_eq!(held(&path).unwrap(), None, "{torn:?}");
            assert_eq!(std::fs::read(&path).unwrap(), b"", "{torn:?}");
        }
    }
}
