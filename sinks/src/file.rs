//! `file:PATH` — appends records as JSON Lines, fsynced once per batch.
//!
//! A crash can leave at most a torn last line (a batch written but never
//! acknowledged). On start the sink cuts the file back to its last complete
//! line, then reports that line's seq and hash as what it holds, so the
//! follower resumes right after it: no record twice, none missing.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use chainship_chain::Head;
use chainship_chain::record::Record;

use crate::Sink;
use crate::batch::Batch;
use crate::error::SinkError;

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
fn opened<'a>(slot: &'a mut Option<File>, path: &Path) -> Result<&'a mut File, SinkError> {
    if slot.is_none() {
        let existed = path.exists();
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o640)
            .open(path)
            .map_err(|e| SinkError::permanent(format!("file sink {}: cannot open: {e}", path.display())))?;
        if !existed {
            sync_parent(path).map_err(|e| io_error(path, e))?;
        }
        *slot = Some(file);
    }
    Ok(slot.as_mut().expect("opened above"))
}

/// Cuts a torn last line (no trailing newline) and returns the new length.
fn repair_torn_tail(file: &mut File, path: &Path) -> std::io::Result<u64> {
    let len = file.metadata()?.len();
    if len == 0 || byte_at(file, len - 1)? == b'\n' {
        return Ok(len);
    }
    let keep = match last_newline_before(file, len)? {
        Some(pos) => pos + 1,
        None => 0,
    };
    tracing::warn!(
        file = %path.display(),
        dropped_bytes = len - keep,
        "file sink: cut a torn last line left by a crash (it was never acknowledged and will be sent again)"
    );
    file.set_len(keep)?;
    file.sync_all()?;
    Ok(keep)
}

fn byte_at(file: &mut File, pos: u64) -> std::io::Result<u8> {
    let mut b = [0u8; 1];
    file.seek(SeekFrom::Start(pos))?;
    file.read_exact(&mut b)?;
    Ok(b[0])
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
    async fn held(&mut self) -> Result<Option<Head>, SinkError> {
        let path = &self.path;
        let file = opened(&mut self.file, path)?;
        let len = repair_torn_tail(file, path).map_err(|e| io_error(path, e))?;
        if len == 0 {
            return Ok(None);
        }
        let start = match last_newline_before(file, len - 1).map_err(|e| io_error(path, e))? {
            Some(pos) => pos + 1,
            None => 0,
        };
        let mut line = vec![0u8; (len - 1 - start) as usize];
        file.seek(SeekFrom::Start(start))
            .and_then(|_| file.read_exact(&mut line))
            .map_err(|e| io_error(path, e))?;
        let record = Record::parse(&line).map_err(|e| {
            SinkError::integrity(format!(
                "file sink {}: the last line is not a chainship record ({e}); is this the right file?",
                self.path.display()
            ))
        })?;
        if record.origin != self.origin {
            return Err(SinkError::integrity(format!(
                "file sink {}: holds records of origin {:?}, not {:?}",
                self.path.display(),
                record.origin,
                self.origin
            )));
        }
        Head::from_stored(record.seq, record.hash.as_bytes())
            .map(Some)
            .ok_or_else(|| {
                SinkError::integrity(format!(
                    "file sink {}: the last record (seq {}) has a malformed hash {:?}",
                    self.path.display(),
                    record.seq,
                    record.hash
                ))
            })
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

/// fsyncs the directory holding `path`, so a new entry survives a crash.
pub fn sync_parent(path: &Path) -> std::io::Result<()> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    File::open(parent)?.sync_all()
}
