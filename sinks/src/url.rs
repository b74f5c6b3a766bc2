//! Choosing a sink by URL: `file:PATH`, `stdout:`.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use crate::Sink;
use crate::error::SinkError;
use crate::file::FileSink;
use crate::stdout::StdoutSink;

/// A parsed `--sink` value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SinkUrl {
    File(PathBuf),
    Stdout,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("sink {url:?}: {reason}")]
pub struct SinkUrlError {
    pub url: String,
    pub reason: String,
}

impl FromStr for SinkUrl {
    type Err = SinkUrlError;

    fn from_str(url: &str) -> Result<Self, Self::Err> {
        let err = |reason: &str| SinkUrlError {
            url: url.to_owned(),
            reason: reason.to_owned(),
        };
        let (scheme, rest) = url
            .split_once(':')
            .ok_or_else(|| err("expected SCHEME:..., one of file:PATH or stdout:"))?;
        match scheme {
            "file" => {
                let path = rest.strip_prefix("//").unwrap_or(rest);
                if path.is_empty() {
                    return Err(err("file: needs a path, e.g. file:/var/lib/chainship/events.jsonl"));
                }
                Ok(SinkUrl::File(PathBuf::from(path)))
            }
            "stdout" if rest.is_empty() => Ok(SinkUrl::Stdout),
            "stdout" => Err(err("stdout: takes nothing after the colon")),
            other => Err(err(&format!("unknown scheme {other:?}; supported: file:PATH, stdout:"))),
        }
    }
}

impl fmt::Display for SinkUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SinkUrl::File(p) => write!(f, "file:{}", p.display()),
            SinkUrl::Stdout => f.write_str("stdout:"),
        }
    }
}

/// Builds the sink a URL names, for records of `origin`.
pub fn open_sink(url: &SinkUrl, origin: &str) -> Result<Box<dyn Sink>, SinkError> {
    Ok(match url {
        SinkUrl::File(path) => Box::new(FileSink::open(path, origin)?),
        SinkUrl::Stdout => Box::new(StdoutSink),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_known_schemes() {
        assert_eq!(
            "file:/a/b.jsonl".parse::<SinkUrl>().unwrap(),
            SinkUrl::File("/a/b.jsonl".into())
        );
        assert_eq!(
            "file:///a/b.jsonl".parse::<SinkUrl>().unwrap(),
            SinkUrl::File("/a/b.jsonl".into())
        );
        assert_eq!(
            "file:rel.jsonl".parse::<SinkUrl>().unwrap(),
            SinkUrl::File("rel.jsonl".into())
        );
        assert_eq!("stdout:".parse::<SinkUrl>().unwrap(), SinkUrl::Stdout);
    }

    #[test]
    fn refuses_unknown_or_empty() {
        assert!(
            "ftp://x"
                .parse::<SinkUrl>()
                .unwrap_err()
                .reason
                .contains("unknown scheme \"ftp\"")
        );
        assert!("file:".parse::<SinkUrl>().is_err());
        assert!("/just/a/path".parse::<SinkUrl>().is_err());
    }
}
