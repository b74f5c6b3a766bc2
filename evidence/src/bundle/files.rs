//! A bundle's files, read whole from a directory or a tar file, by name.
//! Only the names a bundle has are read; anything else is ignored, and a
//! name that could leave the bundle (`..`, an absolute path) is refused.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use chainship_chain::{Error, permanent};

use super::PROOFS_DIR;

/// A bundle larger than this is refused (a run of 10,000 events with every
/// gap is a few MiB).
const MAX_BYTES: u64 = 1 << 30;

/// The files of a bundle, by their name in it (`proofs/12.proof`).
#[derive(Debug, Default)]
pub struct BundleFiles {
    files: BTreeMap<String, Vec<u8>>,
    /// Where it was read from, for messages.
    pub place: String,
}

impl BundleFiles {
    /// Reads a bundle: a directory, or a tar file.
    pub fn read(path: &Path) -> Result<BundleFiles, Error> {
        let meta = std::fs::metadata(path).map_err(|e| Error::from_io("cannot be read", &e))?;
        let mut bundle = BundleFiles {
            files: BTreeMap::new(),
            place: path.display().to_string(),
        };
        if meta.is_dir() {
            bundle.read_dir(path)?;
        } else {
            bundle.read_tar(path)?;
        }
        Ok(bundle)
    }

    /// A bundle held in memory (tests, and a bundle being built).
    pub fn from_files(files: impl IntoIterator<Item = (String, Vec<u8>)>) -> BundleFiles {
        BundleFiles {
            files: files.into_iter().collect(),
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
        let total: u64 = self.files.values().map(|v| v.len() as u64).sum::<u64>() + bytes.len() as u64;
        if total > MAX_BYTES {
            return Err(permanent!("larger than {MAX_BYTES} bytes: not a bundle"));
        }
        self.files.insert(name, bytes);
        Ok(())
    }

    fn read_dir(&mut self, dir: &Path) -> Result<(), Error> {
        let io = |e: std::io::Error| Error::from_io("cannot be read", &e);
        for entry in std::fs::read_dir(dir).map_err(io)? {
            let entry = entry.map_err(io)?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let kind = entry.file_type().map_err(io)?;
            if kind.is_file() {
                let bytes = read_capped(&entry.path())?;
                self.add(name, bytes)?;
            } else if kind.is_dir() && name == PROOFS_DIR {
                for proof in std::fs::read_dir(entry.path()).map_err(io)? {
                    let proof = proof.map_err(io)?;
                    if proof.file_type().map_err(io)?.is_file() {
                        let name = format!("{PROOFS_DIR}/{}", proof.file_name().to_string_lossy());
                        let bytes = read_capped(&proof.path())?;
                        self.add(name, bytes)?;
                    }
                }
            }
        }
        Ok(())
    }

    fn read_tar(&mut self, path: &Path) -> Result<(), Error> {
        let file = std::fs::File::open(path).map_err(|e| Error::from_io("cannot be read", &e))?;
        let mut archive = tar::Archive::new(file);
        let bad = |e: std::io::Error| permanent!("not a tar file: {e}");
        for entry in archive.entries().map_err(bad)? {
            let mut entry = entry.map_err(bad)?;
            if !entry.header().entry_type().is_file() {
                continue;
            }
            let name = entry.path().map_err(bad)?.to_string_lossy().into_owned();
            let name = name.strip_prefix("./").unwrap_or(&name).to_owned();
            if name.starts_with('/') || name.split('/').any(|p| p == "..") {
                return Err(permanent!("holds {name:?}, a path outside the bundle"));
            }
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

/// Writes the files of directory `dir` (top level and `proofs/`) into a new
/// tar file at `out`, in name order, with fixed times and modes (the same
/// bundle gives the same bytes).
pub fn write_tar(dir: &Path, out: &Path) -> Result<(), Error> {
    let bundle = BundleFiles::read(dir)?;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(out)
        .map_err(|e| Error::from_io("cannot be created", &e))?;
    let mut tar = tar::Builder::new(std::io::BufWriter::new(file));
    let io = |e: std::io::Error| Error::from_io("cannot be written", &e);
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
    file.sync_all().map_err(io)
}
