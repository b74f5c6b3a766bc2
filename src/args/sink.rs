//! `--sink` and the flags for the S3 and Kafka sinks: how to reach one
//! (also for reading a copy back) and how to write to it. The S3 ones are
//! separate from the anchor store's S3 settings, which may be another account.

use std::time::Duration;

use chainship_chain::record::RecordFormat;
use chainship_s3::{MIN_PART_SIZE, PartPlan, S3Settings};
use chainship_sinks::SinkConfig;
use chainship_sinks::policy::ObjectBatching;
use chainship_sinks::s3::compression::{Codec, Compression};
use clap::Args;

/// `--sink` and the settings that say how to write to it: `follow`, `check`.
#[derive(Args, Clone, Debug)]
pub struct SinkArgs {
    /// Where to ship: file:PATH, stdout:, s3://BUCKET/PREFIX or kafka://HOST:PORT[,HOST:PORT...]/TOPIC.
    #[arg(long, value_name = "URL")]
    pub sink: SinkConfig,
    #[command(flatten)]
    pub connect: SinkConnectArgs,
    #[command(flatten)]
    pub write: SinkWriteArgs,
}

/// How to reach a sink (read or write): `follow`, `check`, `verify-export`.
#[derive(Args, Clone, Debug)]
pub struct SinkConnectArgs {
    /// S3 endpoint for the sink (MinIO, Ceph, ...); default AWS.
    #[arg(long, value_name = "URL", help_heading = "S3 sink")]
    pub s3_endpoint: Option<String>,
    /// AWS region of the sink's bucket (default: from the AWS config, else us-east-1).
    #[arg(long, value_name = "REGION", help_heading = "S3 sink")]
    pub s3_region: Option<String>,
    /// Path-style addressing (most S3-compatible servers need it).
    #[arg(long, help_heading = "S3 sink")]
    pub s3_path_style: bool,
    /// AWS profile for the sink's credentials (default: the standard AWS chain).
    #[arg(long, value_name = "NAME", help_heading = "S3 sink")]
    pub s3_profile: Option<String>,
    /// Access key id for the sink (default: the standard AWS chain).
    #[arg(long, value_name = "ID", help_heading = "S3 sink")]
    pub s3_access_key_id: Option<String>,
    /// Secret access key for the sink; better set by environment than on the command line.
    #[arg(long, value_name = "SECRET", help_heading = "S3 sink")]
    pub s3_secret_access_key: Option<String>,
    /// A file with the sink's credentials (AWS credentials format), e.g. a systemd credential.
    #[arg(long, value_name = "FILE", help_heading = "S3 sink")]
    pub s3_credentials_file: Option<std::path::PathBuf>,
    /// A librdkafka setting passed through (TLS, SASL, compression...), KEY=VALUE; repeat for more.
    /// Values are never logged.
    #[arg(long = "kafka-opt", value_delimiter = ';', value_name = "KEY=VALUE", value_parser = KafkaOptParser, help_heading = "Kafka sink")]
    pub kafka_opts: Vec<(String, String)>,
    /// Pin the partition (default: a stable hash of the origin); a reader of a copy then reads
    /// only this partition, and says so (by default it reads every partition of the topic).
    #[arg(long, value_name = "N", help_heading = "Kafka sink")]
    pub kafka_partition: Option<i32>,
}

/// How batches are cut, named, compressed and delivered: `follow`, `check`.
#[derive(Args, Clone, Debug)]
pub struct SinkWriteArgs {
    /// The shape of each record: chainship's own, OCSF 1.1.0 API Activity, or Elastic ECS.
    /// Every shape carries the record whole, so a copy in any of them still verifies.
    #[arg(long, default_value = "chainship", value_name = "chainship|ocsf|ecs")]
    pub record_format: RecordFormat,
    /// Events per object, at most (S3 batches are larger: SIEM loaders prefer fewer, larger objects).
    #[arg(long, default_value_t = 50_000, help_heading = "S3 sink")]
    pub s3_batch_events: usize,
    /// Uncompressed bytes per object, at most (a number of bytes, or with a unit: 64MiB).
    #[arg(long, default_value = "64MiB", value_name = "SIZE", value_parser = parse_size, help_heading = "S3 sink")]
    pub s3_batch_bytes: usize,
    /// Upload a partial object once its first event has waited this long.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration, help_heading = "S3 sink")]
    pub s3_batch_age: Duration,
    /// Put objects under dt=YYYY-MM-DD/ (from the first event's `at`).
    #[arg(long, help_heading = "S3 sink")]
    pub s3_date_partition: bool,
    /// How objects are compressed; the name says which (.jsonl.gz, .jsonl.zst).
    #[arg(long, default_value = "gzip", value_name = "gzip|zstd", help_heading = "S3 sink")]
    pub s3_compression: Codec,
    /// Compression level: gzip 1-9 (default 1), zstd 1-19 (default 3).
    #[arg(long, value_name = "N", help_heading = "S3 sink")]
    pub s3_compression_level: Option<i32>,
    /// Objects of at least this many (compressed) bytes go up as a multipart upload.
    #[arg(long, default_value = "8MiB", value_name = "SIZE", value_parser = parse_size, help_heading = "S3 sink")]
    pub s3_multipart_threshold: usize,
    /// Size of each part of a multipart upload (S3 needs at least 5MiB).
    #[arg(long, default_value = "8MiB", value_name = "SIZE", value_parser = parse_part_size, help_heading = "S3 sink")]
    pub s3_part_size: usize,
    /// Do not use a transactional id to fence other followers of this origin
    /// (for brokers without transactions; then run one follower per origin yourself).
    #[arg(long, help_heading = "Kafka sink")]
    pub kafka_no_fence: bool,
}

/// A byte size: a plain number of bytes, or with a unit (8MiB, 64MB).
pub fn parse_size(text: &str) -> Result<usize, String> {
    let size: bytesize::ByteSize = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a size (e.g. 8MiB, 64MB, 1048576)"))?;
    usize::try_from(size.as_u64()).map_err(|_| format!("{text:?} is too large"))
}

fn parse_part_size(text: &str) -> Result<usize, String> {
    let size = parse_size(text)?;
    if size < MIN_PART_SIZE {
        return Err(format!("{text:?}: S3 parts are at least 5MiB"));
    }
    Ok(size)
}

/// `--kafka-opt KEY=VALUE`, parsed so that no error can show the value: it
/// may be a password (`sasl.password`), and clap's own "invalid value '...'"
/// message would print the whole argument, so errors are raw one-liners.
#[derive(Clone, Copy, Debug)]
pub struct KafkaOptParser;

impl clap::builder::TypedValueParser for KafkaOptParser {
    type Value = (String, String);

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        _arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<Self::Value, clap::Error> {
        value
            .to_str()
            .ok_or_else(|| "--kafka-opt: not UTF-8".to_owned())
            .and_then(|text| chainship_sinks::kafka::parse_option(text).map_err(|e| e.message))
            .map_err(|message| clap::Error::raw(clap::error::ErrorKind::ValueValidation, message).with_cmd(cmd))
    }
}

impl SinkConnectArgs {
    /// `url` with these connection settings (for reading a copy back).
    pub fn apply(&self, url: &SinkConfig) -> SinkConfig {
        let mut cfg = url.clone();
        match &mut cfg {
            SinkConfig::S3(c) => {
                c.settings = S3Settings {
                    endpoint: self.s3_endpoint.clone(),
                    region: self.s3_region.clone(),
                    path_style: self.s3_path_style,
                    profile: self.s3_profile.clone(),
                    access_key_id: self.s3_access_key_id.clone(),
                    secret_access_key: self.s3_secret_access_key.clone(),
                    credentials_file: self.s3_credentials_file.clone().filter(|p| !p.as_os_str().is_empty()),
                };
            }
            SinkConfig::Kafka(c) => {
                c.options = self.kafka_opts.clone();
                c.partition = self.kafka_partition;
            }
            SinkConfig::File(_) | SinkConfig::Stdout => {}
        }
        cfg
    }
}

impl SinkWriteArgs {
    /// The objects' compression; a level the codec does not accept is refused.
    pub fn compression(&self) -> Result<Compression, String> {
        Compression::new(self.s3_compression, self.s3_compression_level)
            .map_err(|e| format!("--s3-compression-level: {e}"))
    }
}

impl SinkArgs {
    /// The sink with every setting these flags give it.
    pub fn config(&self) -> Result<SinkConfig, String> {
        let compression = self.write.compression()?;
        let mut cfg = self.connect.apply(&self.sink);
        match &mut cfg {
            SinkConfig::S3(c) => {
                c.date_partition = self.write.s3_date_partition;
                c.compression = compression;
                c.parts = PartPlan {
                    threshold: self.write.s3_multipart_threshold,
                    part_size: self.write.s3_part_size,
                };
                c.batching = ObjectBatching {
                    max_events: self.write.s3_batch_events,
                    max_bytes: self.write.s3_batch_bytes,
                    max_age: self.write.s3_batch_age,
                };
            }
            SinkConfig::Kafka(c) => c.fence = !self.write.kafka_no_fence,
            SinkConfig::File(_) | SinkConfig::Stdout => {}
        }
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_units_and_parts_take_s3s_minimum() {
        assert_eq!(parse_size("8MiB"), Ok(8 << 20));
        assert_eq!(parse_size("1048576"), Ok(1 << 20));
        assert_eq!(parse_size("64MB"), Ok(64_000_000));
        assert!(parse_size("lots").unwrap_err().contains("\"lots\" is not a size"));
        assert!(parse_part_size("4MiB").unwrap_err().contains("at least 5MiB"));
        assert_eq!(parse_part_size("5MiB"), Ok(MIN_PART_SIZE));
    }
}
