//! Flags naming the anchor store and how to reach it, shared by `follow`,
//! `check`, `verify-export`, `anchor verify` and `anchor list`; and the
//! retention only publishers use. The S3 settings are separate from the S3
//! sink's, so the anchor can live in another account.

use std::sync::Arc;

use chainship_anchor::{AnchorStore, AnchorUrl, open_store};
use chainship_s3::S3Settings;
use clap::Args;

use crate::exit::CliError;

/// `--anchor` and how to reach it. Optional here; verifiers make it required.
#[derive(Args, Clone, Debug)]
pub struct AnchorStoreArgs {
    /// The anchor store, in another trust domain: file:DIR or s3://BUCKET/PREFIX.
    #[arg(long, value_name = "URL", value_parser = str::parse::<AnchorUrl>)]
    pub anchor: Option<AnchorUrl>,
    #[command(flatten)]
    pub s3: AnchorS3Args,
}

/// How long published heads are locked: only for commands that publish.
#[derive(Args, Clone, Copy, Debug)]
pub struct AnchorRetainArgs {
    /// With Object Lock on the bucket, keep each head under COMPLIANCE retention this many days.
    #[arg(long, default_value_t = 400, value_name = "DAYS", help_heading = "Anchor store (S3)")]
    pub anchor_retain_days: u32,
}

impl AnchorStoreArgs {
    pub fn url(&self) -> Result<&AnchorUrl, CliError> {
        self.anchor
            .as_ref()
            .ok_or_else(|| CliError::usage("--anchor is required"))
    }

    /// The store, for reading (verifiers) or, with `retain`, for publishing.
    pub fn open(&self, url: &AnchorUrl, retain: Option<AnchorRetainArgs>) -> Arc<AnchorStore> {
        open_store(url, &self.s3.settings(), retain.map_or(0, |r| r.anchor_retain_days))
    }
}

#[derive(Args, Clone, Debug)]
pub struct AnchorS3Args {
    /// S3 endpoint for the anchor store (MinIO, Ceph, ...); default AWS.
    #[arg(long, value_name = "URL", help_heading = "Anchor store (S3)")]
    pub anchor_s3_endpoint: Option<String>,
    /// AWS region of the anchor bucket (default: from the AWS config, else us-east-1).
    #[arg(long, value_name = "REGION", help_heading = "Anchor store (S3)")]
    pub anchor_s3_region: Option<String>,
    /// Path-style addressing (most S3-compatible servers need it).
    #[arg(long, help_heading = "Anchor store (S3)")]
    pub anchor_s3_path_style: bool,
    /// AWS profile for the anchor store's credentials.
    #[arg(long, value_name = "NAME", help_heading = "Anchor store (S3)")]
    pub anchor_s3_profile: Option<String>,
    /// Access key id for the anchor store (default: the standard AWS chain).
    #[arg(long, value_name = "ID", help_heading = "Anchor store (S3)")]
    pub anchor_s3_access_key_id: Option<String>,
    /// Secret access key for the anchor store; better set by environment than on the command line.
    #[arg(long, value_name = "SECRET", help_heading = "Anchor store (S3)")]
    pub anchor_s3_secret_access_key: Option<String>,
    /// A file with the anchor store's credentials (AWS credentials format), e.g. a systemd
    /// credential: `%d/anchor-s3` with `LoadCredential=anchor-s3:/etc/chainship/keys/anchor-s3`.
    #[arg(long, value_name = "FILE", help_heading = "Anchor store (S3)")]
    pub anchor_s3_credentials_file: Option<std::path::PathBuf>,
}

impl AnchorS3Args {
    pub fn settings(&self) -> S3Settings {
        S3Settings {
            endpoint: self.anchor_s3_endpoint.clone(),
            region: self.anchor_s3_region.clone(),
            path_style: self.anchor_s3_path_style,
            profile: self.anchor_s3_profile.clone(),
            access_key_id: self.anchor_s3_access_key_id.clone(),
            secret_access_key: self.anchor_s3_secret_access_key.clone(),
            credentials_file: self
                .anchor_s3_credentials_file
                .clone()
                .filter(|p| !p.as_os_str().is_empty()),
        }
    }
}
