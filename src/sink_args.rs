//! Flags for the S3 and Kafka sinks. The S3 ones are separate from the
//! anchor store's S3 settings, which may be another account.

use std::time::Duration;

use chainship_sinks::SinkOptions;
use chainship_sinks::s3_client::S3Settings;
use clap::Args;

#[derive(Args, Clone, Debug)]
pub struct SinkS3Args {
    /// S3 endpoint for the sink (MinIO, Ceph, ...); default AWS.
    #[arg(long, env = "CHAINSHIP_S3_ENDPOINT", value_name = "URL", help_heading = "S3 sink")]
    pub s3_endpoint: Option<String>,
    #[arg(long, env = "CHAINSHIP_S3_REGION", value_name = "REGION", help_heading = "S3 sink")]
    pub s3_region: Option<String>,
    /// Path-style addressing (most S3-compatible servers need it).
    #[arg(long, env = "CHAINSHIP_S3_PATH_STYLE", help_heading = "S3 sink")]
    pub s3_path_style: bool,
    /// AWS profile for the sink's credentials (default: the standard AWS chain).
    #[arg(long, env = "CHAINSHIP_S3_PROFILE", value_name = "NAME", help_heading = "S3 sink")]
    pub s3_profile: Option<String>,
    #[arg(
        long,
        env = "CHAINSHIP_S3_ACCESS_KEY_ID",
        value_name = "ID",
        help_heading = "S3 sink"
    )]
    pub s3_access_key_id: Option<String>,
    /// Better set by environment than on the command line.
    #[arg(
        long,
        env = "CHAINSHIP_S3_SECRET_ACCESS_KEY",
        value_name = "SECRET",
        hide_env_values = true,
        help_heading = "S3 sink"
    )]
    pub s3_secret_access_key: Option<String>,
    /// Events per object, at most (S3 batches are larger: SIEM loaders prefer fewer, larger objects).
    #[arg(
        long,
        env = "CHAINSHIP_S3_BATCH_EVENTS",
        default_value_t = 50_000,
        help_heading = "S3 sink"
    )]
    pub s3_batch_events: usize,
    /// Uncompressed bytes per object, at most.
    #[arg(long, env = "CHAINSHIP_S3_BATCH_BYTES", default_value_t = 64 << 20, help_heading = "S3 sink")]
    pub s3_batch_bytes: usize,
    /// Upload a partial object once its first event has waited this long.
    #[arg(long, env = "CHAINSHIP_S3_BATCH_AGE", default_value = "60s", value_parser = humantime::parse_duration, help_heading = "S3 sink")]
    pub s3_batch_age: Duration,
    /// Put objects under dt=YYYY-MM-DD/ (from the first event's `at`).
    #[arg(long, env = "CHAINSHIP_S3_DATE_PARTITION", help_heading = "S3 sink")]
    pub s3_date_partition: bool,
    /// gzip level, 1 (fast) to 9 (small).
    #[arg(long, env = "CHAINSHIP_S3_GZIP_LEVEL", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=9), help_heading = "S3 sink")]
    pub s3_gzip_level: u32,
    /// A librdkafka setting passed through (TLS, SASL, compression...), KEY=VALUE; repeat for more.
    /// Values are never logged.
    #[arg(long = "kafka-opt", env = "CHAINSHIP_KAFKA_OPTS", value_delimiter = ';', value_name = "KEY=VALUE", value_parser = parse_kafka_opt, hide_env_values = true, help_heading = "Kafka sink")]
    pub kafka_opts: Vec<(String, String)>,
    /// Do not use a transactional id to fence other followers of this origin
    /// (for brokers without transactions; then run one follower per origin yourself).
    #[arg(long, env = "CHAINSHIP_KAFKA_NO_FENCE", help_heading = "Kafka sink")]
    pub kafka_no_fence: bool,
    /// Pin the partition (default: a stable hash of the origin).
    #[arg(
        long,
        env = "CHAINSHIP_KAFKA_PARTITION",
        value_name = "N",
        help_heading = "Kafka sink"
    )]
    pub kafka_partition: Option<i32>,
}

fn parse_kafka_opt(text: &str) -> Result<(String, String), String> {
    let (key, value) = text.split_once('=').ok_or_else(|| {
        format!(
            "--kafka-opt {:?}: expected KEY=VALUE",
            text.split('=').next().unwrap_or("")
        )
    })?;
    const OWNED: [&str; 4] = ["enable.idempotence", "acks", "transactional.id", "bootstrap.servers"];
    if OWNED.contains(&key.trim()) {
        return Err(format!(
            "--kafka-opt {key}: chainship sets this itself (exactly-once delivery depends on it)"
        ));
    }
    Ok((key.trim().to_owned(), value.to_owned()))
}

impl SinkS3Args {
    pub fn options(&self) -> SinkOptions {
        SinkOptions {
            s3: S3Settings {
                endpoint: self.s3_endpoint.clone(),
                region: self.s3_region.clone(),
                path_style: self.s3_path_style,
                profile: self.s3_profile.clone(),
                access_key_id: self.s3_access_key_id.clone(),
                secret_access_key: self.s3_secret_access_key.clone(),
            },
            s3_date_partition: self.s3_date_partition,
            s3_gzip_level: self.s3_gzip_level,
            kafka_options: self.kafka_opts.clone(),
            kafka_fence: !self.kafka_no_fence,
            kafka_partition: self.kafka_partition,
        }
    }
}
