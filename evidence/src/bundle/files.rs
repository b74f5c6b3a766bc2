//! A bundle's files, read whole from a directory or a tar file, by name.
//! Only the names a bundle has are read; anything else is ignored, and a
//! name that could leave the bundle (`..`, an absolute path) is refused.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use chainship_chain::{Error, permanent};

use super::{
    CHECKPOINT, GAPS, GAPS_PROOF, HEAD, NEWEST, PROOFS_DIR, README_TXT, RECORDS, REDACTIONS_DIR, REPORT_HTML, RUN_JSON,
    TILES_DIR, printable,
};

/// Whether `name` is a file a bundle has: anything else is refused, so
/// nothing unchecked travels inside a bundle (a second page, a script).
fn known(name: &str) -> bool {
    [
        RECORDS,
        CHECKPOINT,
        HEAD,
        NEWEST,
        GAPS,
        GAPS_PROOF,
        RUN_JSON,
        REPORT_HTML,
        README_TXT,
    ]
    .contains(&name)
        || name
            .strip_prefix(PROOFS_DIR)
            .and_then(|n| n.strip_prefix('/'))
            .and_then(|n| n.strip_suffix(".proof"))
            .is_some_and(|seq| !seq.is_empty() && seq.bytes().all(|b| b.is_ascii_digit()))
        || name
            .strip_prefix(REDACTIONS_DIR)
            .and_then(|n| n.strip_prefix('/'))
            .is_some_and(|n| chainship_anchor::redaction::seq_of_name(n).is_some())
        || chainship_tlog::tiles::parse_tile_path(name).is_some_and(|t| t.level.is_some())
}

/// The pax keys a tar bundle may carry: times and owners, which no tool
/// reads as changing what a file is called or holds.
const HARMLESS_PAX_KEYS: [&str; 7] = ["mtime", "atime", "ctime", "uid", "gid", "uname", "gname"];

/// A bundle larger than this is refused (a run of 10,000 events with every
/// gap is a few MiB).
const MAX_BYTES: u64 = 256 << 20;
/// A bundle of more files than this is refused (a proof per event).
const MAX_FILES: usize = 1 << 20;

/// The files of a bundle, by their name in it (`proofs/12.proof`).
#[derive(Debug, Default)]
pub struct BundleFiles {
    files: BTreeMap<String, Vec<u8>>,
    /// Bytes held, summed as files are added.
    bytes: u64,
    /// Where it was read from, for messages.
    pub place: String,
}

impl BundleFiles {
    /// Reads a bundle: a directory, or a tar file.
    pub fn read(path: &Path) -> Result<BundleFiles, Error> {
        let meta =
            std::fs::metadata(path).map_err(|e| Error::from_io(format!("{}: cannot be read", path.display()), &e))?;
        let mut bundle = BundleFiles {
            files: BTreeMap::new(),
            bytes: 0,
            place: path.display().to_string(),
        };
        let read = if meta.is_dir() {
            bundle.read_dir(path)
        } else {
            bundle.read_tar(path)
        };
        read.map_err(|e| e.context(path.display()))?;
        Ok(bundle)
    }

    /// A bundle held in memory (tests, and a bundle being built).
    pub fn from_files(files: impl IntoIterator<Item = (String, Vec<u8>)>) -> BundleFiles {
        let files: BTreeMap<String, Vec<u8>> = files.into_iter().collect();
        BundleFiles {
            bytes: files.values().map(|v| v.len() as u64).sum(),
            files,
            place: "(memory)".into(),
        }
    }

    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.files.get(name).map(Vec::as_slice)
    }

    /// Every name in the bundle, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.files.keys().map(String::as_str)
    }

    fn add(&mut self, name: String, bytes: Vec<u8>) -> Result<(), Error> {
        if !known(&name) {
            return Err(permanent!(
                "holds {:?}, which is no file of an evidence bundle",
                printable(&name)
            ));
        }
        self.bytes += bytes.len() as u64;
        if self.bytes > MAX_BYTES || self.files.len() >= MAX_FILES {
            return Err(permanent!(
                "more than {MAX_BYTES} bytes or {MAX_FILES} files: not a bundle"
            ));
        }
        // A name twice (a tar can hold it): the bundle is ambiguous, refused.
        if let Some(old) = self.files.insert(name.clone(), bytes) {
            self.bytes -= old.len() as u64;
            return Err(permanent!("holds {} twice", printable(&name)));
        }
        Ok(())
    }

    fn read_dir(&mut self, dir: &Path) -> Result<(), Error> {
        self.read_under(dir, "")
    }

    /// Reads the files of `dir`, named `prefix` + their name; descends only
    /// into the directories a bundle has (`proofs/`, `redactions/`, and
    /// `tile/`'s levels and index groups), never through a link.
    fn read_under(&mut self, dir: &Path, prefix: &str) -> Result<(), Error> {
        let io = |e: std::io::Error| Error::from_io("cannot be read", &e);
        for entry in std::fs::read_dir(dir).map_err(io)? {
            let entry = entry.map_err(io)?;
            let name = format!("{prefix}{}", entry.file_name().to_string_lossy());
            let kind = entry.file_type().map_err(io)?;
            let descend = match prefix {
                "" => [PROOFS_DIR, REDACTIONS_DIR, TILES_DIR].contains(&name.as_str()),
                // A tile's path is tile/L/[xNNN/...]NNN[.p/W]: at most a few groups deep.
                _ => name.starts_with(TILES_DIR) && name.matches('/').count() < 12,
            };
            if kind.is_dir() && descend {
                self.read_under(&entry.path(), &format!("{name}/"))?;
            } else if kind.is_file() {
                let bytes = read_capped(&entry.path())?;
                self.add(name, bytes)?;
            } else {
                return Err(permanent!("{} is not a regular file", printable(&name)));
            }
        }
        Ok(())
    }

    fn read_tar(&mut self, path: &Path) -> Result<(), Error> {
        let file = std::fs::File::open(path).map_err(|e| Error::from_io("cannot be read", &e))?;
        let mut archive = tar::Archive::new(file);
        let bad = |e: std::io::Error| permanent!("not a tar file: {}", printable(&e.to_string()));
        // Raw: every header as it is, so what is read here is what any tar
        // tool unpacks. Extension headers that name a file (a pax path, a GNU
        // long name) are refused: tools disagree on which name wins, and a
        // bundle's names fit a plain header.
        for entry in archive.entries().map_err(bad)?.raw(true) {
            let mut entry = entry.map_err(bad)?;
            let kind = entry.header().entry_type();
            let raw_name = entry.path_bytes().into_owned();
            let shown = printable(&String::from_utf8_lossy(&raw_name)).into_owned();
            if kind.is_dir() {
                // A directory entry carrying data is read as more files by some tools.
                if entry.size() != 0 {
                    return Err(permanent!("the directory entry {shown:?} carries data: not a bundle"));
                }
                continue;
            }
            if matches!(kind, tar::EntryType::XHeader | tar::EntryType::XGlobalHeader) {
                // Times and owners (what a repacking tool adds) are harmless;
                // anything else (a name, a size) some tools obey and others
                // do not, so the files they unpack would not be these.
                let harmless = entry
                    .pax_extensions()
                    .map_err(bad)?
                    .into_iter()
                    .flatten()
                    .all(|ext| ext.is_ok_and(|e| e.key().is_ok_and(|k| HARMLESS_PAX_KEYS.contains(&k))));
                if harmless {
                    continue;
                }
            }
            if !kind.is_file() {
                let what = match kind {
                    tar::EntryType::XHeader | tar::EntryType::XGlobalHeader => {
                        "a pax extension header with more than times and owners"
                    }
                    tar::EntryType::GNULongName | tar::EntryType::GNULongLink => "a GNU long-name header",
                    _ => "an entry that is not a regular file",
                };
                return Err(permanent!("holds {what} ({shown:?}): not a bundle chainship wrote"));
            }
            if raw_name.ends_with(b"/") || raw_name.ends_with(b"/.") {
                return Err(permanent!("the file {shown:?} is named like a directory: not a bundle"));
            }
            // Some tools join the ustar prefix field to the name whatever the
            // header's magic says; a bundle's names never need it.
            if entry.header().as_bytes()[345..500].iter().any(|b| *b != 0) {
                return Err(permanent!(
                    "the name of {shown:?} is split into a prefix field: not a bundle chainship wrote"
                ));
            }
            let path = entry.path().map_err(bad)?.into_owned();
            // One spelling per name (`./a`, `././a` and `a` are one file), so a second copy is seen.
            let mut parts = Vec::new();
            for part in path.components() {
                match part {
                    std::path::Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
                    std::path::Component::CurDir => {}
                    _ => {
                        return Err(permanent!(
                            "holds {:?}, a path outside the bundle",
                            printable(&path.to_string_lossy())
                        ));
                    }
                }
            }
            let name = parts.join("/");
            if entry.size() > MAX_BYTES {
                return Err(permanent!("{name}: larger than {MAX_BYTES} bytes"));
            }
            let mut bytes = Vec::with_capacity(entry.size() as usize);
            entry.read_to_end(&mut bytes).map_err(bad)?;
            self.add(name, bytes)?;
        }
        Ok(())
    }
}

fn read_capped(path: &Path) -> Result<Vec<u8>, Error> {
    let file = std::fs::File::open(path).map_err(|e| Error::from_io("cannot be read", &e))?;
    let mut bytes = Vec::new();
    file.take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::from_io("cannot be read", &e))?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(permanent!("{}: larger than {MAX_BYTES} bytes", path.display()));
    }
    Ok(bytes)
}

/// Writes the files of directory `dir` (as [`BundleFiles::read`] reads them) into a new
/// tar file at `out`, in name order, with fixed times and modes (the same
/// bundle gives the same bytes). Written beside it under a temporary name and
/// linked into place whole, never over an existing file.
pub fn write_tar(dir: &Path, out: &Path) -> Result<(), Error> {
    let bundle = BundleFiles::read(dir)?;
    let temp = tar_temp_path(out);
    let io = |e: std::io::Error| Error::from_io(format!("{}: cannot be written", out.display()), &e);
    let written = (|| {
        let file = std::fs::File::create(&temp).map_err(io)?;
        let mut tar = tar::Builder::new(std::io::BufWriter::new(file));
        for (name, bytes) in &bundle.files {
            let mut header = tar::Header::new_ustar();
            header.set_size(bytes.len() as u64);
            header.set_mode(0o644);
            header.set_mtime(0);
            header.set_entry_type(tar::EntryType::Regular);
            tar.append_data(&mut header, name, bytes.as_slice()).map_err(io)?;
        }
        let writer = tar.into_inner().map_err(io)?;
        let file = writer.into_inner().map_err(|e| io(e.into_error()))?;
        file.sync_all().map_err(io)?;
        std::fs::hard_link(&temp, out).map_err(|e| Error::from_io(format!("{}: cannot be created", out.display()), &e))
    })();
    let _ = std::fs::remove_file(&temp);
    written
}

/// Where [`write_tar`] writes before the file takes its name.
pub fn tar_temp_path(out: &Path) -> std::path::PathBuf {
    let name = out
        .file_name()
        .map_or("bundle".into(), |n| n.to_string_lossy().into_owned());
    out.with_file_name(format!(".{name}.writing-{}", std::process::id()))
}
