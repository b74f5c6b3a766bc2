//! Putting a tombstone in a copy in place of one record whose payload must
//! go (`chainship redact --from`): each sink the way it can hold it.
//!
//! - A file is rewritten whole, as a stream, into a temp file beside it that
//!   replaces it by rename: a reader or a crash sees the old file or the
//!   new, never half. The file's lock is taken first, so a follower
//!   appending to it is never cut off (it is refused while one runs).
//! - An S3 object that holds the record is written again with the
//!   tombstone in its line, the same name and compression. A versioned
//!   bucket would keep the original as an older version: those versions are
//!   deleted; a bucket with Object Lock, which forbids that, is refused
//!   before anything is written.
//! - A Kafka topic cannot change a record: the tombstone is appended to the
//!   origin's partition with the origin as its key, and the original stays
//!   until the topic's retention removes it.
//!
//! Only a record of the origin, at the seq, with the hash the statement
//! names is replaced; the tombstone line is the caller's (its payload is
//! already gone).

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;

use chainship_chain::record::Record;

use crate::SinkError;
use crate::config::SinkConfig;

/// What was done to the copy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Placed {
    /// The file, and how many lines were replaced.
    File { path: String, lines: u64 },
    /// The object rewritten, and the older versions deleted.
    S3 { key: String, versions_deleted: u64 },
    /// The tombstone appended at this partition and offset.
    Kafka { partition: i32, offset: i64 },
}

impl std::fmt::Display for Placed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Placed::File { path, lines } => write!(f, "{path}: {lines} line(s) replaced by the tombstone"),
            Placed::S3 { key, versions_deleted } => write!(
                f,
                "{key}: rewritten with the tombstone{}",
                match versions_deleted {
                    0 => String::new(),
                    n => format!(", {n} older version(s) holding the original deleted"),
                }
            ),
            Placed::Kafka { partition, offset } => write!(
                f,
                "the tombstone appended to partition {partition} at offset {offset}; the original stays until the topic's retention removes it"
            ),
        }
    }
}

/// Puts `tombstone` (one record line, no newline) in place of `origin`'s
/// record at `seq` with hash `hash` in the copy `cfg` (see the module doc).
pub async fn put(cfg: &SinkConfig, origin: &str, seq: u64, hash: &str, tombstone: &[u8]) -> Result<Placed, SinkError> {
    match cfg {
        SinkConfig::File(path) => replace_in_file(path, origin, seq, hash, tombstone),
        SinkConfig::S3(s3) => crate::s3::tombstone::replace(s3, origin, seq, hash, tombstone).await,
        SinkConfig::Kafka(kafka) => crate::kafka::tombstone::append(kafka, origin, seq, hash, tombstone).await,
        SinkConfig::Stdout => Err(SinkError::permanent(
            "stdout: keeps nothing to redact; name the copy with --from",
        )),
    }
}

/// Whether `line` is `origin`'s record of `seq` with `hash` (in any format).
pub fn is_the_record(line: &[u8], origin: &str, seq: u64, hash: &str) -> bool {
    let parsed = Record::parse(line);
    let record = match &parsed {
        Ok(r) => r,
        Err(e) => match e.carried() {
            Some(r) => r,
            None => return false,
        },
    };
    record.origin == origin && record.seq == seq && record.hash == hash
}

/// Rewrites `lines`, each record of `origin` at `seq` with `hash` replaced
/// by `tombstone`, into `out`; how many were replaced.
pub fn rewrite_lines(
    lines: impl BufRead,
    out: &mut dyn Write,
    origin: &str,
    seq: u64,
    hash: &str,
    tombstone: &[u8],
) -> std::io::Result<u64> {
    let (mut replaced, mut lines, mut line) = (0, lines, Vec::new());
    loop {
        line.clear();
        if lines.read_until(b'\n', &mut line)? == 0 {
            return Ok(replaced);
        }
        // A last line with no newline (torn) is kept as it is.
        let (body, ended) = match line.strip_suffix(b"\n") {
            Some(body) => (body, true),
            None => (&line[..], false),
        };
        if ended && is_the_record(body, origin, seq, hash) {
            out.write_all(tombstone)?;
            out.write_all(b"\n")?;
            replaced += 1;
        } else {
            out.write_all(&line)?;
        }
    }
}

fn replace_in_file(path: &Path, origin: &str, seq: u64, hash: &str, tombstone: &[u8]) -> Result<Placed, SinkError> {
    let shown = path.display().to_string();
    let io = |what: &str, e: std::io::Error| SinkError::permanent(format!("{shown}: {what}: {e}"));
    // A symbolic link: the file it names is the copy (replacing the link
    // would leave the secret there).
    let real = std::fs::canonicalize(path).map_err(|e| io("cannot open", e))?;
    let path = real.as_path();
    let file = File::open(path).map_err(|e| io("cannot open", e))?;
    let meta = file.metadata().map_err(|e| io("cannot read", e))?;
    if !meta.is_file() {
        return Err(SinkError::permanent(format!(
            "{shown}: not a regular file (name the file that holds the record)"
        )));
    }
    // Another hard link would keep the original after the rename.
    let links = std::os::unix::fs::MetadataExt::nlink(&meta);
    if links > 1 {
        return Err(SinkError::permanent(format!(
            "{shown}: has {links} hard links: the others would keep the record; remove them first (nothing was changed)"
        )));
    }
    // The follower's file sink holds this lock while it runs: a rename
    // under it would send its next batches to the file taken away.
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            return Err(SinkError::permanent(format!(
                "{shown}: a follower is writing to it (it holds its lock): stop it for the redaction, it resumes where it was"
            )));
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(io("cannot lock", e)),
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.redact.tmp"));
    let mode = std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o7777;
    let mut staged = chainship_chain::atomic_file::Staged::create(path, &tmp, mode)
        .map_err(|e| io("cannot create the replacement beside it", e))?;
    let lines = {
        let mut out = std::io::BufWriter::new(staged.file());
        let n = rewrite_lines(BufReader::new(&file), &mut out, origin, seq, hash, tombstone)
            .map_err(|e| io("cannot rewrite", e))?;
        out.flush().map_err(|e| io("cannot write the replacement", e))?;
        n
    };
    if lines == 0 {
        // Dropped uncommitted: the temp file goes, the copy is untouched.
        return Err(SinkError::permanent(format!(
            "{shown}: holds no record of origin {origin:?} at seq {seq} with hash {hash}"
        )));
    }
    staged
        .commit()
        .map_err(|e| io("cannot put the replacement in place", e))?;
    Ok(Placed::File {
        path: path.display().to_string(),
        lines,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_named_record_is_replaced() {
        let a = r#"{"origin":"o","seq":1,"run_id":"r","step_id":"","at":"t","type":"k","payload_json":"{}","hash":"h1","prev_hash":""}"#;
        let b = r#"{"origin":"o","seq":2,"run_id":"r","step_id":"","at":"t","type":"k","payload_json":"{\"s\":1}","hash":"h2","prev_hash":"h1"}"#;
        let other = b.replace(r#""origin":"o""#, r#""origin":"p""#);
        let input = format!("{a}\n{b}\n{other}\nnot json\n{b}\n{b}");
        let mut out = Vec::new();
        let n = rewrite_lines(input.as_bytes(), &mut out, "o", 2, "h2", b"TOMB").unwrap();
        assert_eq!(n, 2);
        // The torn last line stays as it was (the follower cuts it on start).
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!("{a}\nTOMB\n{other}\nnot json\nTOMB\n{b}")
        );
        let mut out = Vec::new();
        assert_eq!(
            rewrite_lines(input.as_bytes(), &mut out, "o", 2, "h9", b"T").unwrap(),
            0
        );
    }

    #[test]
    fn a_file_is_replaced_whole_and_a_locked_one_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("copy.jsonl");
        let b = r#"{"origin":"o","seq":2,"run_id":"r","step_id":"","at":"t","type":"k","payload_json":"{\"secret\":1}","hash":"h2","prev_hash":"h1"}"#;
        std::fs::write(&path, format!("{b}\n")).unwrap();
        let placed = replace_in_file(&path, "o", 2, "h2", b"TOMB").unwrap();
        assert_eq!(
            placed,
            Placed::File {
                path: path.display().to_string(),
                lines: 1
            }
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "TOMB\n");
        assert!(!dir.path().join(".copy.jsonl.redact.tmp").exists());
        // Nothing of the seq: refused, the file untouched.
        assert!(replace_in_file(&path, "o", 3, "h3", b"X").is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "TOMB\n");
        // Through a symbolic link: the file it names is rewritten.
        std::fs::write(&path, format!("{b}\n")).unwrap();
        let link = dir.path().join("link.jsonl");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        replace_in_file(&link, "o", 2, "h2", b"TOMB").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "TOMB\n");
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        // A second hard link: refused, nothing changed.
        std::fs::write(&path, format!("{b}\n")).unwrap();
        let hard = dir.path().join("hard.jsonl");
        std::fs::hard_link(&path, &hard).unwrap();
        let e = replace_in_file(&path, "o", 2, "h2", b"TOMB").unwrap_err();
        assert!(e.to_string().contains("hard links"), "{e}");
        assert!(std::fs::read_to_string(&hard).unwrap().contains("secret"));
        std::fs::remove_file(&hard).unwrap();
        // A follower's lock: refused.
        std::fs::write(&path, format!("{b}\n")).unwrap();
        let held = File::open(&path).unwrap();
        held.lock().unwrap();
        let e = replace_in_file(&path, "o", 2, "h2", b"TOMB").unwrap_err();
        assert!(e.to_string().contains("follower"), "{e}");
        assert!(std::fs::read_to_string(&path).unwrap().contains("secret"));
    }
}
