//! `s3://BUCKET/PREFIX` — one object per head, `PREFIX/<origin segment>/<seq,
//! 20 digits>.head`, written with `If-None-Match: *` so the server itself
//! refuses an overwrite, and, when the bucket has Object Lock, with
//! COMPLIANCE retention for `retain_days`, so not even the bucket's owner
//! can delete it before then.
//!
//! The origin is one percent-encoded key segment (`team/a` → `team%2Fa`):
//! used raw, `team/a`'s prefix would hold `team/a/b`'s heads.

use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use aws_sdk_s3::types::ObjectLockEnabled;
use chainship_chain::Setting;
use chainship_s3::{
    NewObject, PartPlan, S3Failure, S3Location, S3Settings, classify, get_object, put_replacing, upload_new, visit_keys,
};
use futures::{StreamExt, TryStreamExt};
use tokio::sync::OnceCell;

use super::{ObjectStore, PutOutcome, StoreError};

/// Tiles and bundles are bytes; checkpoints are signed notes (text).
/// `key` is `<origin segment>/<path>`.
fn content_type(key: &str) -> &'static str {
    if key.split_once('/').is_some_and(|(_, path)| path.starts_with("tile/")) {
        "application/octet-stream"
    } else {
        "text/plain; charset=utf-8"
    }
}

/// Objects written at once by `create_many`.
const FETCHES_IN_FLIGHT: usize = 16;
/// The one probe object `check` ever writes (write-once: in an Object Lock
/// bucket a probe per run could never be deleted).
const PROBE: &str = ".chainship-check";

pub struct S3Store {
    at: S3Location,
    settings: S3Settings,
    retain_days: u32,
    client: OnceCell<aws_sdk_s3::Client>,
    object_lock: OnceCell<bool>,
}

impl S3Store {
    pub fn new(at: S3Location, settings: S3Settings, retain_days: u32) -> Self {
        S3Store {
            at,
            settings,
            retain_days,
            client: OnceCell::new(),
            object_lock: OnceCell::new(),
        }
    }

    /// The client, once the credentials resolve: without any, every call
    /// would fail as "cannot reach the server" after a round of lookups.
    async fn client(&self) -> Result<&aws_sdk_s3::Client, StoreError> {
        self.client
            .get_or_try_init(|| async {
                self.settings.check_credentials().await.map_err(|f| {
                    self.failure(f)
                        .with_setting(match self.settings.uses_credentials_file() {
                            true => Setting::AnchorS3CredentialsFile,
                            false => Setting::AnchorS3Profile,
                        })
                })?;
                Ok(self.settings.client().await)
            })
            .await
    }

    /// Until when a new object is kept in COMPLIANCE mode (None: no Object Lock).
    async fn retain_until(&self) -> Result<Option<SystemTime>, StoreError> {
        let locked = self.object_lock().await?;
        Ok((locked && self.retain_days > 0)
            .then(|| SystemTime::now() + Duration::from_secs(u64::from(self.retain_days) * 86_400)))
    }

    /// Writes a new object unless the key exists (then its bytes).
    async fn write_new(&self, key: &str, content_type: &'static str, bytes: &[u8]) -> Result<PutOutcome, StoreError> {
        let object = NewObject {
            bucket: &self.at.bucket,
            key,
            content_type,
            content_encoding: None,
            metadata: Default::default(),
            retain_until: self.retain_until().await?,
        };
        match upload_new(self.client().await?, &object, bytes.to_vec(), PartPlan::default()).await {
            Ok(()) => Ok(PutOutcome::Created),
            Err(f) if f.precondition_failed() => match self.fetch_full(key).await? {
                Some(kept) => Ok(PutOutcome::AlreadyThere(kept)),
                None => Err(StoreError::transient(format!(
                    "anchor store {}: {key} was refused as existing, then vanished",
                    self.location()
                ))),
            },
            Err(f) => Err(self.failure(f)),
        }
    }

    fn failure(&self, f: S3Failure) -> StoreError {
        f.error(format_args!("anchor store {}", self.location()))
    }

    /// The object at a full key (with the prefix), if there is one.
    async fn fetch_full(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let body = get_object(self.client().await?, &self.at.bucket, key)
            .await
            .map_err(|f| self.failure(f))?;
        Ok(body.map(|b| b.to_vec()))
    }

    /// Whether the bucket has Object Lock (asked once; a bucket without a
    /// lock configuration answers 404, which means no).
    async fn object_lock(&self) -> Result<bool, StoreError> {
        self.object_lock
            .get_or_try_init(|| async {
                match self
                    .client()
                    .await?
                    .get_object_lock_configuration()
                    .bucket(&self.at.bucket)
                    .send()
                    .await
                {
                    Ok(out) => Ok(out
                        .object_lock_configuration()
                        .and_then(|c| c.object_lock_enabled())
                        .is_some_and(|e| *e == ObjectLockEnabled::Enabled)),
                    Err(e) => {
                        let f = classify("reading the bucket's Object Lock configuration", &e);
                        if f.is_transient() {
                            Err(self.failure(f))
                        } else if f.status == Some(404) {
                            Ok(false)
                        } else {
                            Err(self.failure(f))
                        }
                    }
                }
            })
            .await
            .copied()
    }
}

#[async_trait]
impl ObjectStore for S3Store {
    /// The credentials resolve (once): none anywhere is said at start, not
    /// at the first publication after the export began.
    async fn ready(&self) -> Result<(), StoreError> {
        self.client().await.map(|_| ())
    }

    async fn create(&self, key: &str, bytes: &[u8]) -> Result<PutOutcome, StoreError> {
        self.write_new(&self.at.key(key), content_type(key), bytes).await
    }

    async fn create_many(&self, objects: &[(String, &[u8])]) -> Result<Vec<PutOutcome>, StoreError> {
        // Small objects, many: several requests at once, outcomes in order.
        let puts: Vec<_> = objects.iter().map(|(key, bytes)| self.create(key, bytes)).collect();
        futures::stream::iter(puts)
            .buffered(FETCHES_IN_FLIGHT)
            .try_collect()
            .await
    }

    async fn replace(&self, key: &str, bytes: &[u8]) -> Result<(), StoreError> {
        let full = self.at.key(key);
        let object = NewObject {
            bucket: &self.at.bucket,
            key: &full,
            content_type: content_type(key),
            content_encoding: None,
            metadata: Default::default(),
            retain_until: self.retain_until().await?,
        };
        put_replacing(self.client().await?, &object, bytes.to_vec())
            .await
            .map_err(|f| self.failure(f))
    }

    async fn fetch(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let body = get_object(self.client().await?, &self.at.bucket, &self.at.key(key))
            .await
            .map_err(|f| self.failure(f))?;
        Ok(body.map(|b| b.to_vec()))
    }

    async fn scan(
        &self,
        prefix: &str,
        deep: bool,
        start_after: Option<&str>,
        each: &mut (dyn for<'n> FnMut(&'n str) + Send),
    ) -> Result<bool, StoreError> {
        let full = self.at.key(prefix);
        let start_after = start_after.map(|s| self.at.key(s));
        // The delimiter keeps deeper keys out of a listing of one level.
        let delimiter = (!deep).then_some("/");
        let mut visit = |key: &str| {
            if let Some(rel) = key.strip_prefix(full.as_str()) {
                each(rel);
            }
        };
        visit_keys(
            self.client().await?,
            &self.at.bucket,
            &full,
            delimiter,
            start_after.as_deref(),
            &mut visit,
        )
        .await
        .map_err(|f| self.failure(f))?;
        Ok(start_after.is_none())
    }

    async fn probe(&self) -> Result<String, StoreError> {
        let client = self.client().await?;
        client
            .head_bucket()
            .bucket(&self.at.bucket)
            .send()
            .await
            .map_err(|e| self.failure(classify(&format!("HeadBucket {}", self.at.bucket), &e)))?;
        let locked = self.object_lock().await?;
        // Written once ever and never deleted: S3 checks the permission before
        // the precondition, so the 412 of every later run proves write access too.
        let key = self.at.key(PROBE);
        let probe = NewObject {
            bucket: &self.at.bucket,
            key: &key,
            content_type: "text/plain; charset=utf-8",
            content_encoding: None,
            metadata: Default::default(),
            retain_until: None,
        };
        let body = b"chainship check: proves the anchor store is writable\n".to_vec();
        match upload_new(client, &probe, body, PartPlan::default()).await {
            Ok(()) => {}
            Err(f) if f.precondition_failed() => {}
            Err(f) => return Err(self.failure(f)),
        }
        Ok(if locked {
            format!(
                "bucket reachable and writable; Object Lock on: heads kept {} days in COMPLIANCE mode",
                self.retain_days
            )
        } else {
            "bucket reachable and writable; Object Lock OFF: heads can be deleted by whoever holds the bucket".into()
        })
    }

    fn location(&self) -> String {
        self.at.to_string()
    }

    /// One percent-encoded key segment (see the module doc).
    fn origin_prefix(&self, origin: &str) -> String {
        chainship_s3::origin_prefix("", origin)
    }

    fn split_origin<'k>(&self, key: &'k str) -> Option<(String, &'k str)> {
        let (segment, rest) = key.split_once('/')?;
        Some((chainship_chain::origin_from_segment(segment)?, rest))
    }

    fn locate(&self, key: &str) -> String {
        format!("s3://{}/{}", self.at.bucket, self.at.key(key))
    }
}
