//! `s3://BUCKET/PREFIX` — one object per head, `PREFIX/<origin segment>/<seq,
//! 20 digits>.head`, written with `If-None-Match: *` so the server itself
//! refuses an overwrite, and, when the bucket has Object Lock, with
//! COMPLIANCE retention for `retain_days`, so not even the bucket's owner
//! can delete it before then.
//!
//! The origin is one percent-encoded key segment (`team/a` → `team%2Fa`,
//! [`origin_segment`]): used raw, `team/a`'s prefix would hold `team/a/b`'s
//! heads. Plain origins keep the key they always had; heads an older
//! version wrote under a raw `team/a/` are refused with a message to copy
//! them, never silently ignored.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use aws_sdk_s3::primitives::{ByteStream, DateTime};
use aws_sdk_s3::types::{ChecksumAlgorithm, ObjectLockEnabled, ObjectLockMode};
use chainship_chain::origin_segment;
use chainship_sinks::s3_client::{S3Settings, classify};
use futures::{StreamExt, TryStreamExt};
use tokio::sync::OnceCell;

use super::{AnchorStore, PutOutcome, StoreError, StoredNote, head_name, note_seq, seq_from_name};

/// Heads fetched at once by `list`.
const FETCHES_IN_FLIGHT: usize = 16;
/// The one probe object `check` ever writes (write-once: in an Object Lock
/// bucket a probe per run could never be deleted).
const PROBE: &str = ".chainship-check";

pub struct S3Store {
    bucket: String,
    prefix: String,
    settings: S3Settings,
    retain_days: u32,
    client: OnceCell<aws_sdk_s3::Client>,
    object_lock: OnceCell<bool>,
    /// Origins whose layout `put_new` has checked (no heads left at the legacy key).
    layout_ok: Mutex<HashSet<String>>,
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
            layout_ok: Mutex::new(HashSet::new()),
        }
    }

    async fn client(&self) -> &aws_sdk_s3::Client {
        self.client.get_or_init(|| self.settings.client()).await
    }

    /// `PREFIX/` (or nothing) followed by `rest`.
    fn key(&self, rest: &str) -> String {
        if self.prefix.is_empty() {
            rest.to_owned()
        } else {
            format!("{}/{rest}", self.prefix)
        }
    }

    fn origin_prefix(&self, origin: &str) -> String {
        self.key(&format!("{}/", origin_segment(origin)))
    }

    /// Where an older version kept this origin's heads, when that differs.
    fn legacy_prefix(&self, origin: &str) -> Option<String> {
        (origin_segment(origin) != origin).then(|| self.key(&format!("{origin}/")))
    }

    /// Refuses an origin whose heads are all still at the legacy key: publishing
    /// afresh beside them, or verifying without them, would hide them.
    async fn refuse_legacy_layout(&self, origin: &str) -> Result<(), StoreError> {
        let Some(legacy) = self.legacy_prefix(origin) else {
            return Ok(());
        };
        if self.head_keys(&legacy, true).await?.is_empty() {
            return Ok(());
        }
        Err(StoreError::permanent(format!(
            "anchor store {}: the heads of origin {origin:?} are under s3://{}/{legacy} (the layout before origins were encoded as one key segment); copy them to s3://{}/{} and run again",
            self.describe(),
            self.bucket,
            self.bucket,
            self.origin_prefix(origin)
        )))
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

    /// The keys of the head objects directly under `prefix` (exact
    /// `<20 digits>.head` names), in listing order; only the first when
    /// `first_only`.
    async fn head_keys(&self, prefix: &str, first_only: bool) -> Result<Vec<String>, StoreError> {
        let mut keys = Vec::new();
        // The delimiter keeps deeper keys (another origin's, in the legacy layout) out.
        let mut pages = self
            .client()
            .await
            .list_objects_v2()
            .bucket(&self.bucket)
            .prefix(prefix)
            .delimiter("/")
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| self.failure(classify(&format!("listing {prefix}"), &e)))?;
            keys.extend(
                page.contents()
                    .iter()
                    .filter_map(|o| o.key())
                    .filter(|k| {
                        k.strip_prefix(prefix)
                            .is_some_and(|n| !n.contains('/') && note_seq(n).is_some())
                    })
                    .map(str::to_owned),
            );
            if first_only && !keys.is_empty() {
                keys.truncate(1);
                break;
            }
        }
        Ok(keys)
    }

    /// The origin's head keys; refuses a legacy layout when there are none.
    async fn origin_head_keys(&self, origin: &str) -> Result<Vec<String>, StoreError> {
        let keys = self.head_keys(&self.origin_prefix(origin), false).await?;
        if keys.is_empty() {
            self.refuse_legacy_layout(origin).await?;
        }
        Ok(keys)
    }

    async fn get(&self, key: &str) -> Result<Vec<u8>, StoreError> {
        self.get_if_there(key)
            .await?
            .ok_or_else(|| StoreError::transient(format!("anchor store {}: {key} vanished", self.describe())))
    }

    /// The object's bytes, or `None` when there is no such key.
    async fn get_if_there(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let out = match self
            .client()
            .await
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(out) => out,
            Err(e) => {
                let f = classify(&format!("reading {key}"), &e);
                return if f.status == Some(404) {
                    Ok(None)
                } else {
                    Err(self.failure(f))
                };
            }
        };
        let body = out
            .body
            .collect()
            .await
            .map_err(|e| StoreError::transient(format!("anchor store {}: reading {key}: {e}", self.describe())))?;
        Ok(Some(body.into_bytes().to_vec()))
    }
}

#[async_trait]
impl AnchorStore for S3Store {
    async fn put_new(&self, origin: &str, name: &str, note: &[u8]) -> Result<PutOutcome, StoreError> {
        let checked = self.layout_ok.lock().is_ok_and(|ok| ok.contains(origin));
        if !checked && self.legacy_prefix(origin).is_some() {
            if self.head_keys(&self.origin_prefix(origin), true).await?.is_empty() {
                self.refuse_legacy_layout(origin).await?;
            }
            if let Ok(mut ok) = self.layout_ok.lock() {
                ok.insert(origin.to_owned());
            }
        }
        if note_seq(name).is_none() || name.contains('/') {
            return Err(StoreError::permanent(format!(
                "anchor store: {name:?} is not a head's name"
            )));
        }
        let key = format!("{}{name}", self.origin_prefix(origin));
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
        let mut keys = self.origin_head_keys(origin).await?;
        keys.sort();
        // Heads are small and many: fetch several at once, keeping the listing's order.
        futures::stream::iter(keys)
            .map(|key| async move {
                let bytes = self.get(&key).await?;
                Ok(StoredNote {
                    seq_in_name: note_seq(&key),
                    name: format!("s3://{}/{key}", self.bucket),
                    bytes,
                })
            })
            .buffered(FETCHES_IN_FLIGHT)
            .try_collect()
            .await
    }

    async fn head_seqs(&self, origin: &str) -> Result<Vec<u64>, StoreError> {
        let keys = self.origin_head_keys(origin).await?;
        let mut seqs: Vec<u64> = keys.iter().filter_map(|k| seq_from_name(k)).collect();
        seqs.sort_unstable();
        Ok(seqs)
    }

    async fn get_head(&self, origin: &str, seq: u64) -> Result<Option<StoredNote>, StoreError> {
        let key = format!("{}{}", self.origin_prefix(origin), head_name(seq));
        Ok(self.get_if_there(&key).await?.map(|bytes| StoredNote {
            name: format!("s3://{}/{key}", self.bucket),
            seq_in_name: Some(seq),
            bytes,
        }))
    }

    async fn check(&self) -> Result<String, StoreError> {
        self.settings.check_credentials().await.map_err(|f| self.failure(f))?;
        let client = self.client().await;
        client
            .head_bucket()
            .bucket(&self.bucket)
            .send()
            .await
            .map_err(|e| self.failure(classify(&format!("HeadBucket {}", self.bucket), &e)))?;
        let locked = self.object_lock().await?;
        // Written once ever and never deleted: S3 checks the permission before
        // the precondition, so the 412 of every later run proves write access too.
        let key = self.key(PROBE);
        let put = client
            .put_object()
            .bucket(&self.bucket)
            .key(&key)
            .if_none_match("*")
            .checksum_algorithm(ChecksumAlgorithm::Sha256)
            .body(ByteStream::from_static(
                b"chainship check: proves the anchor store is writable\n",
            ))
            .send()
            .await;
        if let Err(e) = put {
            let f = classify(&format!("writing the probe {key}"), &e);
            if !f.precondition_failed() {
                return Err(self.failure(f));
            }
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

    fn describe(&self) -> String {
        format!("s3://{}/{}", self.bucket, self.prefix)
    }
}
