//! What an S3 sink is told: where (`s3://BUCKET/PREFIX`), as whom, and how
//! objects are named, compressed and uploaded.

use chainship_chain::{Error, permanent};
use chainship_s3::{PartPlan, S3Location, S3Settings};

use super::compression::Compression;

#[derive(Clone, Debug)]
pub struct S3Config {
    pub at: S3Location,
    pub settings: S3Settings,
    /// Put objects under `dt=YYYY-MM-DD/` from the first event's `at`.
    pub date_partition: bool,
    pub compression: Compression,
    /// When a batch goes up in parts.
    pub parts: PartPlan,
    /// How large and how old an object may grow before it goes up.
    pub batching: crate::policy::ObjectBatching,
}

impl S3Config {
    /// `s3://BUCKET/PREFIX` with default settings.
    pub fn from_url(url: &str) -> Result<Self, Error> {
        let rest = url
            .strip_prefix("s3://")
            .ok_or_else(|| permanent!("expected s3://BUCKET/PREFIX"))?;
        Ok(S3Config {
            at: S3Location::parse(rest)?,
            settings: S3Settings::default(),
            date_partition: false,
            compression: Compression::default(),
            parts: PartPlan::default(),
            batching: Default::default(),
        })
    }
}
