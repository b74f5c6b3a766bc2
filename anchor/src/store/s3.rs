//! `s3://BUCKET/PREFIX` — one object per head, `PREFIX/<origin>/<seq, 20
//! digits>.head`, written with `If-None-Match: *` so the server itself
//! refuses an overwrite, and, when the bucket has Object Lock, with
//! COMPLIANCE retention for `retain_days`, so not even the bucket's owner
//! can delete it before then.

use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use aws_sdk_s3::primitives::{ByteStream, DateTime};
use aws_sdk_s3::types::{ChecksumAlgorithm, ObjectLockEnabled, ObjectLockMode};
use chainship_sinks::s3_client::{S3Settings, classify};
use futures::{StreamExt, TryStreamExt};
use tokio::sync::OnceCell;

use super::{AnchorStore, PutOutcome, StoreError, StoredNote, head_name, seq_from_name};

/// Heads fetched at once by `list`.
const FETCHES_IN_FLIGHT: usize = 16;

pub struct S3Store {
    bucket: String,
    prefix: String,
    settings: S3Settings,
    retain_days: u32,
    client: OnceCell<aws_sdk_s3::Client>,
    object_lock: OnceCell<bool>,
}

impl S3Store {
    pub fn new(bucket: &str, prefix: &str, settings: S3Settings, retain_days: u32) -> Self {
        S3Store {
            bucket: bucket.to_owned(),
            prefix: prefix.trim_matches('/').to_owned(),
            settings,
            retain_days,
            client: OnceCell::new(),
            object_lock: OnceCell::new(),
        }
    }

    async fn client(&self) -> &aws_sdk_s3::Client {
        self.client.get_or_init(|| self.settings.client()).await
    }

    fn origin_prefix(&self, origin: &str) -> String {
        if self.prefix.is_empty() {
            format!("{origin}/")
        } else {
            format!("{}/{origin}/", self.prefix)
        }
    }

    fn failure(&self, f: chainship_sinks::s3_client::S3Failure) -> StoreError {
        let message = format!("anchor store {}: {}", self.describe(), f.message);
        if f.transient {
            StoreError::transient(message)
        } else {
            StoreError::permanent(message)
        }
    }

    /// Whether the bucket has Object Lock (asked once; a bucket without a
    /// lock configuration answers 404, which means no).
    async fn object_lock(&self) -> Result<bool, StoreError> {
        self.object_lock
            .get_or_try_init(|| async {
                match self
                    .client()
                    .await
                    .get_object_lock_configuration()
                    .bucket(&self.bucket)
                    .send()
                    .await
                {
                    Ok(out) => Ok(out
                        .object_lock_configuration()
                        .and_then(|c| c.object_lock_enabled())
                        .is_some_and(|e| *e == ObjectLockEnabled::Enabled)),
                    Err(e) => {
                        let f = classify("reading the bucket's Object Lock configuration", &e);
                        if f.transient {
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

    /// The keys of the origin's head objects, in listing order.
    async fn head_keys(&self, origin: &str) -> Result<Vec<String>, StoreError> {
        let prefix = self.origin_prefix(origin);
        let mut keys = Vec::new();
        let mut pages = self
            .client()
            .await
            .list_objects_v2()
            .bucket(&self.bucket)
            .prefix(&prefix)
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| self.failure(classify(&format!("listing {prefix}"), &e)))?;
            keys.extend(
                page.contents()
                    .iter()
                    .filter_map(|o| o.key().map(str::to_owned))
                    .filter(|k| k.ends_with(".head")),
            );
        }
        Ok(keys)
    }

    async fn get(&self, key: &str) -> Result<Vec<u8>, StoreError> {
        let out = self
            .client()
            .await
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .map_err(|e| self.failure(classify(&format!("reading {key}"), &e)))?;
        let body = out
            .body
            .collect()
            .await
            .map_err(|e| StoreError::transient(format!("anchor store {}: reading {key}: {e}", self.describe())))?;
        Ok(body.into_bytes().to_vec())
    }
}

#[async_trait]
impl AnchorStore for S3Store {
    async fn put_new(&self, origin: &str, seq: u64, note: &[u8]) -> Result<PutOutcome, StoreError> {
        let key = format!("{}{}", self.origin_prefix(origin), head_name(seq));
        let locked = self.object_lock().await?;
        let mut put = self
            .client()
            .await
            .put_object()
            .bucket(&self.bucket)
            .key(&key)
            .if_none_match("*")
            .content_type("text/plain; charset=utf-8")
            .checksum_algorithm(ChecksumAlgorithm::Sha256)
            .body(ByteStream::from(note.to_vec()));
        if locked && self.retain_days > 0 {
            let until = SystemTime::now() + Duration::from_secs(u64::from(self.retain_days) * 86_400);
            put = put
                .object_lock_mode(ObjectLockMode::Compliance)
                .object_lock_retain_until_date(DateTime::from(until));
        }
        match put.send().await {
            Ok(_) => Ok(PutOutcome::Created),
            Err(e) => {
                let f = classify(&format!("writing {key}"), &e);
                if f.precondition_failed() {
                    Ok(PutOutcome::AlreadyThere(self.get(&key).await?))
                } else {
                    Err(self.failure(f))
                }
            }
        }
    }

    async fn list(&self, origin: &str) -> Result<Vec<StoredNote>, StoreError> {
        let mut keys = self.head_keys(origin).await?;
        keys.sort();
        // Heads are small and many: fetch several at once, keeping the listing's order.
        futures::stream::iter(keys)
            .map(|key| async move {
                let bytes = self.get(&key).await?;
                Ok(StoredNote {
                    seq_in_name: seq_from_name(&key),
                    name: format!("s3://{}/{key}", self.bucket),
                    bytes,
                })
            })
            .buffered(FETCHES_IN_FLIGHT)
            .try_collect()
            .await
    }

    async fn highest_seq(&self, origin: &str) -> Result<Option<u64>, StoreError> {
        let keys = self.head_keys(origin).await?;
        Ok(keys.iter().filter_map(|k| seq_from_name(k)).max())
    }

    async fn check(&self) -> Result<String, StoreError> {
        let client = self.client().await;
        client
            .head_bucket()
            .bucket(&self.bucket)
            .send()
            .await
            .map_err(|e| self.failure(classify(&format!("HeadBucket {}", self.bucket), &e)))?;
        let locked = self.object_lock().await?;
        let key = format!(
            "{}.chainship-check-{}",
            self.origin_prefix("_check"),
            std::process::id()
        );
        client
            .put_object()
            .bucket(&self.bucket)
            .key(&key)
            .body(ByteStream::from_static(b"chainship check"))
            .send()
            .await
            .map_err(|e| self.failure(classify(&format!("writing a probe {key}"), &e)))?;
        let _ = client.delete_object().bucket(&self.bucket).key(&key).send().await;
        Ok(if locked {
            format!(
                "bucket reachable and writable; Object Lock on: heads kept {} days in COMPLIANCE mode",
                self.retain_days
            )
        } else {
            "bucket reachable and writable; Object Lock OFF: heads can be deleted by whoever holds the bucket".into()
        })
    }

    fn describe(&self) -> String {
        format!("s3://{}/{}", self.bucket, self.prefix)
    }
}
