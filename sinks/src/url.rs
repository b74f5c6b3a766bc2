//! Choosing a sink by URL: `file:PATH`, `stdout:`.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use crate::Sink;
use crate::compression::Compression;
use crate::error::SinkError;
use crate::file::FileSink;
use crate::kafka::{KafkaSink, KafkaSinkConfig, parse_kafka_url};
use crate::s3::{S3Sink, S3SinkConfig};
use crate::s3_client::{S3Settings, split_s3_url};
use crate::s3_upload::PartPlan;
use crate::stdout::StdoutSink;

/// A parsed `--sink` value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SinkUrl {
    File(PathBuf),
    Stdout,
    S3 { bucket: String, prefix: String },
    Kafka { brokers: String, topic: String },
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
        let (scheme, rest) = url.split_once(':').ok_or_else(|| {
            err("expected SCHEME:..., one of file:PATH, stdout:, s3://BUCKET/PREFIX, kafka://HOST:PORT/TOPIC")
        })?;
        if url.starts_with("kafka://") {
            let (brokers, topic) = parse_kafka_url(url).map_err(|e| err(&e))?;
            return Ok(SinkUrl::Kafka { brokers, topic });
        }
        if let Some(rest) = url.strip_prefix("s3://") {
            let (bucket, prefix) = split_s3_url(rest).map_err(|e| err(&e))?;
            return Ok(SinkUrl::S3 {
                bucket: bucket.to_owned(),
                prefix: prefix.trim_matches('/').to_owned(),
            });
        }
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
            other => Err(err(&format!(
                "unknown scheme {other:?}; supported: file:PATH, stdout:, s3://BUCKET/PREFIX, kafka://HOST:PORT/TOPIC"
            ))),
        }
    }
}

impl fmt::Display for SinkUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SinkUrl::File(p) => write!(f, "file:{}", p.display()),
            SinkUrl::Stdout => f.write_str("stdout:"),
            SinkUrl::S3 { bucket, prefix } => write!(f, "s3://{bucket}/{prefix}"),
            SinkUrl::Kafka { brokers, topic } => write!(f, "kafka://{brokers}/{topic}"),
        }
    }
}

/// Settings only some sinks use.
#[derive(Clone, Debug, Default)]
pub struct SinkOptions {
    pub s3: S3Settings,
    pub s3_date_partition: bool,
    pub s3_compression: Compression,
    pub s3_parts: PartPlan,
    pub kafka_options: Vec<(String, String)>,
    pub kafka_fence: bool,
    pub kafka_partition: Option<i32>,
}

/// Builds the sink a URL names, for records of `origin`.
pub fn open_sink(url: &SinkUrl, origin: &str, options: &SinkOptions) -> Result<Box<dyn Sink>, SinkError> {
    Ok(match url {
        SinkUrl::File(path) => Box::new(FileSink::new(path, origin)),
        SinkUrl::Stdout => Box::new(StdoutSink),
        SinkUrl::S3 { bucket, prefix } => Box::new(S3Sink::new(
            S3SinkConfig {
                bucket: bucket.clone(),
                prefix: prefix.clone(),
                settings: options.s3.clone(),
                date_partition: options.s3_date_partition,
                compression: options.s3_compression,
                parts: options.s3_parts,
            },
            origin,
        )),
        SinkUrl::Kafka { brokers, topic } => Box::new(KafkaSink::new(
            KafkaSinkConfig {
                brokers: brokers.clone(),
                topic: topic.clone(),
                options: options.kafka_options.clone(),
                fence: options.kafka_fence,
                partition: options.kafka_partition,
            },
            origin,
        )),
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
