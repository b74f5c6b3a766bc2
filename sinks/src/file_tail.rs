//! Following a file copy, or a directory of them, as it grows (`chainship
//! monitor`): each file read from where the last poll stopped, complete
//! lines only. A file copy only grows: one that shrank below what was read,
//! or was replaced by another file, is said (a copy rewritten in place
//! before what was read is the scheduled `verify-export`'s to find).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::error::SinkError;
use serde::{Deserialize, Serialize};

/// What a file did that a growing copy never does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Notice {
    /// It shrank below what was read, or was replaced: read again from its start.
    Rewritten(String),
    /// A line too long to be a record, passed over.
    NotARecord(String),
}

impl Notice {
    pub fn text(&self) -> &str {
        match self {
            Notice::Rewritten(t) | Notice::NotARecord(t) => t,
        }
    }
}

/// Where one file was read to.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct FilePosition {
    pub offset: u64,
    pub inode: u64,
    /// Inside a line longer than [`MAX_LINE`]: what is left of it is passed over.
    #[serde(default)]
    pub skipping: bool,
}

/// A line longer than this is no record (it is named, and passed over):
/// a line still being written is read again at each poll, so this bounds
/// what each poll rereads, and what is held.
pub const MAX_LINE: usize = 16 << 20;

pub struct FileTail {
    root: PathBuf,
    next: BTreeMap<PathBuf, FilePosition>,
}

/// Lines read at most per file and poll, so one busy file does not starve the rest.
const LINES_PER_FILE: usize = 100_000;

impl FileTail {
    /// Follows `root` (a file or a directory) from `saved`, its files named
    /// by their resolved paths (the same file by another path is the same).
    pub fn open(root: &Path, saved: BTreeMap<PathBuf, FilePosition>) -> Self {
        let root = std::fs::canonicalize(root)
            .or_else(|_| std::path::absolute(root))
            .unwrap_or_else(|_| root.to_owned());
        FileTail { root, next: saved }
    }

    /// Hands on the complete lines appended since the last poll;
    /// `notice(path, what)` is told of a file that shrank or was replaced.
    pub fn poll(
        &mut self,
        each: &mut crate::OnSharedRecord<'_>,
        notice: &mut dyn FnMut(&Path, Notice),
    ) -> Result<usize, SinkError> {
        let mut files = Vec::new();
        list(&self.root, 0, &mut files)?;
        self.follow_renames(&files);
        let mut taken = 0;
        for path in files {
            taken += self.read_file(&path, each, notice)?;
        }
        Ok(taken)
    }

    fn read_file(
        &mut self,
        path: &Path,
        each: &mut crate::OnSharedRecord<'_>,
        notice: &mut dyn FnMut(&Path, Notice),
    ) -> Result<usize, SinkError> {
        let fail = |e: std::io::Error| SinkError::transient(format!("{}: {e}", path.display()));
        let file = match std::fs::File::open(path) {
            Ok(f) => f,
            // Gone between the listing and the read: the next poll says so.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(fail(e)),
        };
        let meta = file.metadata().map_err(fail)?;
        let known = self.next.get(path).cloned();
        let mut at = match &known {
            Some(p) if p.inode != meta.ino() => {
                notice(
                    path,
                    Notice::Rewritten(format!(
                        "the file was replaced (inode {} is now {}) after {} bytes were verified: read again from its start",
                        p.inode,
                        meta.ino(),
                        p.offset
                    )),
                );
                0
            }
            Some(p) if meta.len() < p.offset => {
                notice(
                    path,
                    Notice::Rewritten(format!(
                        "the file shrank to {} bytes below the {} already verified: read again from its start",
                        meta.len(),
                        p.offset
                    )),
                );
                0
            }
            Some(p) => p.offset,
            None => 0,
        };
        if known
            .as_ref()
            .is_some_and(|p| p.offset == meta.len() && p.inode == meta.ino())
        {
            return Ok(0);
        }
        let mut skipping = known
            .as_ref()
            .is_some_and(|p| p.skipping && at == p.offset && p.inode == meta.ino());
        let mut reader = BufReader::with_capacity(1 << 16, file);
        reader.seek(SeekFrom::Start(at)).map_err(fail)?;
        let mut line = Vec::new();
        let mut taken = 0;
        while taken < LINES_PER_FILE {
            line.clear();
            let n = (&mut reader)
                .take(MAX_LINE as u64 + 1)
                .read_until(b'\n', &mut line)
                .map_err(fail)?;
            let whole = line.last() == Some(&b'\n');
            if skipping {
                // The rest of a giant line: passed over up to its end.
                at += n as u64;
                if whole {
                    skipping = false;
                    continue;
                }
                if n == 0 {
                    break;
                }
                continue;
            }
            if !whole && n <= MAX_LINE {
                // A line still being written is read once it is whole.
                break;
            }
            let start = at;
            at += n as u64;
            if !whole {
                let place = format!("{} byte {start}", path.display());
                notice(
                    path,
                    Notice::NotARecord(format!(
                        "{place}: a line longer than {MAX_LINE} bytes, no record: passed over to its end"
                    )),
                );
                skipping = true;
                continue;
            }
            let text = &line[..n - 1];
            let text = text.strip_suffix(b"\r").unwrap_or(text);
            if text.is_empty() {
                continue;
            }
            each(text, None, &|| format!("{} byte {start}", path.display()));
            taken += 1;
        }
        self.next.insert(
            path.to_owned(),
            FilePosition {
                offset: at,
                inode: meta.ino(),
                skipping,
            },
        );
        Ok(taken)
    }

    /// A file renamed (rotated: `a.jsonl` to `a.jsonl.1`, a new `a.jsonl`)
    /// goes on where it was read to under its old name; the new file at the
    /// old name is a new file.
    fn follow_renames(&mut self, files: &[PathBuf]) {
        use std::collections::HashMap;
        let inodes: HashMap<u64, &PathBuf> = files
            .iter()
            .filter_map(|p| std::fs::metadata(p).ok().map(|m| (m.ino(), p)))
            .collect();
        let moved: Vec<(PathBuf, PathBuf)> = self
            .next
            .iter()
            .filter_map(|(old, pos)| {
                let now = inodes.get(&pos.inode)?;
                (*now != old && !self.next.contains_key(*now)).then(|| (old.clone(), (*now).clone()))
            })
            .collect();
        for (old, now) in moved {
            if let Some(pos) = self.next.remove(&old) {
                self.next.insert(now, pos);
            }
        }
    }

    pub fn positions(&self) -> &BTreeMap<PathBuf, FilePosition> {
        &self.next
    }
}

/// The regular files under `root` (or `root` itself), in name order.
fn list(root: &Path, depth: usize, out: &mut Vec<PathBuf>) -> Result<(), SinkError> {
    let fail = |e: std::io::Error| SinkError::transient(format!("{}: {e}", root.display()));
    let meta = std::fs::metadata(root).map_err(fail)?;
    if meta.is_file() {
        out.push(root.to_owned());
        return Ok(());
    }
    if !meta.is_dir() || depth > crate::file::MAX_DEPTH {
        return Ok(());
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(root)
        .map_err(fail)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for entry in entries {
        list(&entry, depth + 1, out)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn poll(t: &mut FileTail) -> (Vec<String>, Vec<String>) {
        let (mut lines, mut notices) = (Vec::new(), Vec::new());
        t.poll(
            &mut |l, _, _| lines.push(String::from_utf8_lossy(l).into_owned()),
            &mut |_, n| notices.push(n.text().to_owned()),
        )
        .unwrap();
        (lines, notices)
    }

    #[test]
    fn reads_what_was_appended_whole_lines_only_and_says_when_a_file_shrank() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.jsonl");
        std::fs::write(&path, "one\ntwo\nthr").unwrap();
        let mut t = FileTail::open(dir.path(), BTreeMap::new());
        assert_eq!(poll(&mut t).0, vec!["one", "two"]);
        assert_eq!(poll(&mut t).0, Vec::<String>::new());
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"ee\nfour\n")
            .unwrap();
        std::fs::write(dir.path().join("b.jsonl"), "b1\n").unwrap();
        assert_eq!(poll(&mut t).0, vec!["three", "four", "b1"]);
        // Resumed from the saved positions: nothing read again.
        let mut again = FileTail::open(dir.path(), t.positions().clone());
        assert_eq!(poll(&mut again).0, Vec::<String>::new());
        std::fs::write(&path, "x\n").unwrap();
        let (lines, notices) = poll(&mut again);
        assert_eq!(lines, vec!["x"]);
        assert!(notices[0].contains("shrank"), "{notices:?}");
    }

    #[test]
    fn a_rotated_file_goes_on_where_it_was_read_to() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.jsonl");
        std::fs::write(&path, "one\ntwo\n").unwrap();
        let mut t = FileTail::open(dir.path(), BTreeMap::new());
        assert_eq!(poll(&mut t).0, vec!["one", "two"]);
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"three\n")
            .unwrap();
        std::fs::rename(&path, dir.path().join("a.jsonl.1")).unwrap();
        std::fs::write(&path, "four\n").unwrap();
        assert_eq!(poll(&mut t), (vec!["four".to_owned(), "three".to_owned()], vec![]));
        // The same directory by another path is the same copy.
        let relative = FileTail::open(&dir.path().join(".").join(""), t.positions().clone());
        let mut relative = relative;
        assert_eq!(poll(&mut relative), (vec![], vec![]));
    }

    #[test]
    fn a_giant_line_is_named_once_and_passed_over_to_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.jsonl");
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(b"one\n").unwrap();
        f.write_all(&vec![b'A'; MAX_LINE + 100]).unwrap();
        let mut t = FileTail::open(dir.path(), BTreeMap::new());
        let (lines, notices) = poll(&mut t);
        assert_eq!(lines, vec!["one"]);
        assert_eq!(notices.len(), 1, "{notices:?}");
        // Still unterminated: nothing more, and not named again.
        f.write_all(&vec![b'A'; 1000]).unwrap();
        assert_eq!(poll(&mut t), (vec![], vec![]));
        f.write_all(b"AAA\ntwo\n").unwrap();
        assert_eq!(poll(&mut t), (vec!["two".to_owned()], vec![]));
    }
}
