//! Choosing an anchor store by URL: `file:DIR` or `s3://BUCKET/PREFIX`.

use chainship_chain::{Error, permanent};
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use chainship_s3::{S3Location, S3Settings};

use crate::store::AnchorStore;
use crate::store::file::FileStore;
use crate::store::s3::S3Store;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AnchorUrl {
    File(PathBuf),
    S3(S3Location),
}

impl FromStr for AnchorUrl {
    type Err = Error;

    fn from_str(url: &str) -> Result<Self, Error> {
        let err = |why: &str| permanent!("anchor {url:?}: {why}");
        if let Some(rest) = url.strip_prefix("s3://") {
            return S3Location::parse(rest).map(AnchorUrl::S3).map_err(|e| err(&e.message));
        }
        if let Some(rest) = url.strip_prefix("file:") {
            let path = rest.strip_prefix("//").unwrap_or(rest);
            if path.is_empty() {
                return Err(err("file: needs a directory"));
            }
            return Ok(AnchorUrl::File(PathBuf::from(path)));
        }
        Err(err("expected file:DIR or s3://BUCKET/PREFIX"))
    }
}

impl std::fmt::Display for AnchorUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AnchorUrl::File(p) => write!(f, "file:{}", p.display()),
            AnchorUrl::S3(at) => at.fmt(f),
        }
    }
}

/// Builds the store a URL names. `s3` and `retain_days` apply to S3 only.
pub fn open_store(url: &AnchorUrl, s3: &S3Settings, retain_days: u32) -> Arc<AnchorStore> {
    match url {
        AnchorUrl::File(dir) => Arc::new(AnchorStore::new(FileStore::new(dir))),
        AnchorUrl::S3(at) => Arc::new(AnchorStore::new(S3Store::new(at.clone(), s3.clone(), retain_days))),
    }
}
