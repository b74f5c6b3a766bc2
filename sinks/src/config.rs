//! Which sink, and its settings: a sink URL parsed into a typed
//! [`SinkConfig`], each sink's own settings in its own config. The one list
//! of sinks: parsing, showing, opening, reading back and batching are each
//! one exhaustive match here, an arm per sink naming its module.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use crate::kafka::KafkaConfig;
use crate::policy::BatchPolicy;
use crate::s3::S3Config;
use crate::{OnRecord, ReadReport, Sink, SinkError};

/// A sink and everything it is told.
#[derive(Clone, Debug)]
pub enum SinkConfig {
    /// `file:PATH`: JSON Lines.
    File(PathBuf),
    /// `stdout:`: JSON Lines to standard output.
    Stdout,
    /// `kafka://HOST:PORT[,HOST:PORT...]/TOPIC`.
    Kafka(KafkaConfig),
    /// `s3://BUCKET/PREFIX`.
    S3(S3Config),
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("sink {url:?}: {reason}")]
pub struct SinkUrlError {
    pub url: String,
    pub reason: String,
}

const SCHEMES: &str = "file:PATH, stdout:, s3://BUCKET/PREFIX, kafka://HOST:PORT/TOPIC";

impl FromStr for SinkConfig {
    type Err = SinkUrlError;

    /// Parses a sink URL, with each sink's default settings.
    fn from_str(url: &str) -> Result<Self, Self::Err> {
        let err = |reason: &str| SinkUrlError {
            url: url.to_owned(),
            reason: reason.to_owned(),
        };
        let (scheme, rest) = url
            .split_once(':')
            .ok_or_else(|| err(&format!("expected SCHEME:..., one of {SCHEMES}")))?;
        match scheme {
            "kafka" => KafkaConfig::from_url(url)
                .map(SinkConfig::Kafka)
                .map_err(|e| err(&e.message)),
            "s3" => S3Config::from_url(url).map(SinkConfig::S3).map_err(|e| err(&e.message)),
            "file" => {
                let path = rest.strip_prefix("//").unwrap_or(rest);
                if path.is_empty() {
                    return Err(err("file: needs a path, e.g. file:/var/lib/chainship/events.jsonl"));
                }
                Ok(SinkConfig::File(PathBuf::from(path)))
            }
            "stdout" if rest.is_empty() => Ok(SinkConfig::Stdout),
            "stdout" => Err(err("stdout: takes nothing after the colon")),
            other => Err(err(&format!("unknown scheme {other:?}; supported: {SCHEMES}"))),
        }
    }
}

impl fmt::Display for SinkConfig {
    /// The URL, without settings (they may hold secrets).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SinkConfig::File(p) => write!(f, "file:{}", p.display()),
            SinkConfig::Stdout => f.write_str("stdout:"),
            SinkConfig::S3(c) => c.at.fmt(f),
            SinkConfig::Kafka(c) => f.write_str(&c.url()),
        }
    }
}

impl SinkConfig {
    /// Builds this sink, for records of `origin`.
    pub fn open(&self, origin: &str) -> Box<dyn Sink> {
        match self {
            SinkConfig::File(path) => Box::new(crate::file::FileSink::new(path, origin)),
            SinkConfig::Stdout => Box::new(crate::stdout::StdoutSink),
            SinkConfig::Kafka(c) => Box::new(crate::kafka::KafkaSink::new(c.clone(), origin)),
            SinkConfig::S3(c) => Box::new(crate::s3::S3Sink::new(c.clone(), origin)),
        }
    }

    /// Reads the copy this sink holds back (see [`crate::read_records`]).
    pub async fn read(&self, origin: &str, each: &mut OnRecord<'_>) -> Result<ReadReport, SinkError> {
        match self {
            SinkConfig::File(path) => crate::file::read_records(path, each).map(|()| ReadReport::default()),
            SinkConfig::Stdout => Err(SinkError::permanent(
                "stdout: cannot be read back; verify the file or topic it was piped to",
            )),
            SinkConfig::Kafka(c) => crate::kafka::reader::read_records(c, origin, each),
            SinkConfig::S3(c) => crate::s3::reader::read_records(c, origin, each)
                .await
                .map(|()| ReadReport::default()),
        }
    }

    /// What a shared read of this copy covers (see [`crate::shared`]): for
    /// a topic its partitions and those `shard` takes.
    pub fn shared_shape(&self, shard: Option<crate::Shard>) -> Result<crate::SharedRead, SinkError> {
        match self {
            SinkConfig::Kafka(c) => crate::kafka::reader::shared_shape(c, shard),
            SinkConfig::File(_) | SinkConfig::Stdout | SinkConfig::S3(_) => Ok(crate::SharedRead::default()),
        }
    }

    /// Reads a copy many origins share once, for all of them: a topic (the
    /// partitions `shape` reads), a file or a directory of files. An S3
    /// prefix keeps a folder per origin, read one origin at a time
    /// ([`Self::origins`]).
    pub fn read_shared(
        &self,
        shape: &crate::SharedRead,
        each: &mut crate::OnSharedRecord<'_>,
    ) -> Result<(), SinkError> {
        match self {
            SinkConfig::File(path) => crate::file::read_shared(path, each),
            SinkConfig::Kafka(c) => crate::kafka::reader::read_shared(c, shape, each),
            SinkConfig::Stdout | SinkConfig::S3(_) => Err(SinkError::permanent(format!(
                "{self}: is not read as one shared copy (an S3 prefix is read one origin's folder at a time)"
            ))),
        }
    }

    /// The origins an S3 copy keeps a folder for, with the first few keys
    /// under none and their count; `None` for a copy whose origins are known
    /// only by reading every record ([`Self::read_shared`]).
    pub async fn origins(&self) -> Result<Option<(Vec<String>, Vec<String>, u64)>, SinkError> {
        match self {
            SinkConfig::S3(c) => crate::s3::reader::origins(c).await.map(Some),
            SinkConfig::File(_) | SinkConfig::Kafka(_) | SinkConfig::Stdout => Ok(None),
        }
    }

    /// Events per batch when `--batch-size` is not given. Kafka's is large:
    /// each batch is a transaction (begin, produce, commit with its
    /// round trips), so small ones leave the broker idle between them;
    /// with group commit a trickle still goes at once, in small batches.
    pub fn default_batch_events(&self) -> usize {
        match self {
            SinkConfig::Kafka(_) => 10_000,
            SinkConfig::File(_) | SinkConfig::Stdout | SinkConfig::S3(_) => 500,
        }
    }

    /// The batches this sink takes: its own policy, or for a stream-like
    /// sink (file, stdout, Kafka) the follower's `general` limits with group
    /// commit.
    pub fn batch_policy(&self, general: BatchPolicy) -> BatchPolicy {
        let policy = match self {
            SinkConfig::S3(c) => BatchPolicy {
                max_events: c.batching.max_events,
                max_bytes: c.batching.max_bytes,
                linger: c.batching.max_age,
                group_commit: false,
                compression: Some(c.compression),
            },
            SinkConfig::File(_) | SinkConfig::Stdout | SinkConfig::Kafka(_) => BatchPolicy {
                group_commit: true,
                compression: None,
                ..general
            },
        };
        BatchPolicy {
            max_events: policy.max_events.max(1),
            max_bytes: policy.max_bytes.max(1),
            ..policy
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(url: &str) -> Result<SinkConfig, SinkUrlError> {
        url.parse()
    }

    #[test]
    fn kafka_batches_are_transactions_so_its_default_batch_is_large() {
        assert_eq!(parse("kafka://a:9092/t").unwrap().default_batch_events(), 10_000);
        assert_eq!(parse("file:/a/b.jsonl").unwrap().default_batch_events(), 500);
        assert_eq!(parse("stdout:").unwrap().default_batch_events(), 500);
    }

    #[test]
    fn parses_known_schemes() {
        for (url, shown) in [
            ("file:/a/b.jsonl", "file:/a/b.jsonl"),
            ("file:///a/b.jsonl", "file:/a/b.jsonl"),
            ("file:rel.jsonl", "file:rel.jsonl"),
            ("stdout:", "stdout:"),
            ("s3://bkt/exports/", "s3://bkt/exports"),
            ("kafka://a:9092/t", "kafka://a:9092/t"),
        ] {
            assert_eq!(parse(url).unwrap().to_string(), shown);
        }
        assert!(matches!(parse("kafka://a:9092/t"), Ok(SinkConfig::Kafka(k)) if k.fence));
    }

    #[test]
    fn refuses_unknown_or_empty() {
        assert!(parse("ftp://x").unwrap_err().reason.contains("unknown scheme \"ftp\""));
        assert!(parse("file:").is_err());
        assert!(parse("/just/a/path").is_err());
        assert!(parse("s3://Bad_Bucket/x").is_err());
        assert!(parse("kafka://a:9092").is_err());
    }
}
