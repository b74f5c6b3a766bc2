//! `s3://BUCKET/PREFIX` — one object per batch, JSON Lines compressed with
//! gzip or zstd, named so a listing sorts in seq order and says what it holds:
//!
//! `PREFIX/<origin>/[dt=YYYY-MM-DD/]<first seq, 20 digits>-<last seq, 20 digits>.jsonl.{gz,zst}`
//!
//! Object metadata carries origin, first and last seq, the last event's
//! hash and the record count. Uploads (single or multipart, see
//! [`crate::s3_upload`]) send SHA-256 checksums and `If-None-Match: *`, so
//! no object is ever overwritten. The listing is the
//! truth (as in Litestream): on start the sink finds the highest last seq
//! already uploaded, and the follower resumes after it, so a re-sent batch
//! never duplicates or overlaps an earlier object.

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_s3::primitives::ByteStream;
use chainship_chain::Head;
use tokio::sync::OnceCell;

use crate::Sink;
use crate::batch::Batch;
use crate::compression::{Codec, Compression};
use crate::error::SinkError;
use crate::s3_client::{S3Failure, S3Settings, classify};
use crate::s3_upload::{NewObject, PartPlan, abort_leftovers, upload_new};

/// How the S3 sink names and compresses objects.
#[derive(Clone, Debug)]
pub struct S3SinkConfig {
    pub bucket: String,
    pub prefix: String,
    pub settings: S3Settings,
    /// Put objects under `dt=YYYY-MM-DD/` from the first event's `at`.
    pub date_partition: bool,
    pub compression: Compression,
    /// When a batch goes up in parts.
    pub parts: PartPlan,
}

pub struct S3Sink {
    cfg: S3SinkConfig,
    origin: String,
    client: OnceCell<aws_sdk_s3::Client>,
}

/// What an object's name says it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObjectRange {
    pub first: u64,
    pub last: u64,
    /// How the object is compressed, from its suffix.
    pub codec: Codec,
}

/// Parses `.../<first>-<last>.jsonl.gz` (or `.jsonl.zst`).
pub fn parse_object_name(key: &str) -> Option<ObjectRange> {
    let (name, codec) = Codec::split_name(key.rsplit('/').next()?)?;
    let (first, last) = name.split_once('-')?;
    if first.len() != 20 || last.len() != 20 {
        return None;
    }
    Some(ObjectRange {
        first: first.parse().ok()?,
        last: last.parse().ok()?,
        codec,
    })
}

/// Where an origin's objects live: `PREFIX/<origin>/` (`<origin>/` without a prefix).
pub fn origin_prefix(prefix: &str, origin: &str) -> String {
    match prefix.trim_matches('/') {
        "" => format!("{origin}/"),
        prefix => format!("{prefix}/{origin}/"),
    }
}

/// Every batch object under `origin_prefix`, with the range its name says it
/// holds; other objects (a `check` probe, foreign files) are left out.
pub async fn list_objects(
    client: &aws_sdk_s3::Client,
    bucket: &str,
    origin_prefix: &str,
) -> Result<Vec<(ObjectRange, String)>, S3Failure> {
    let mut objects = Vec::new();
    let mut pages = client
        .list_objects_v2()
        .bucket(bucket)
        .prefix(origin_prefix)
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| classify(&format!("listing {origin_prefix}"), &e))?;
        for key in page.contents().iter().filter_map(|o| o.key()) {
            if let Some(range) = parse_object_name(key) {
                objects.push((range, key.to_owned()));
            }
        }
    }
    Ok(objects)
}

impl S3Sink {
    pub fn new(cfg: S3SinkConfig, origin: &str) -> Self {
        S3Sink {
            cfg,
            origin: origin.to_owned(),
            client: OnceCell::new(),
        }
    }

    async fn client(&self) -> &aws_sdk_s3::Client {
        self.client.get_or_init(|| self.cfg.settings.client()).await
    }

    fn origin_prefix(&self) -> String {
        origin_prefix(&self.cfg.prefix, &self.origin)
    }

    /// The object key for a batch.
    pub fn key_for(&self, batch: &Batch) -> String {
        let (first, last) = (batch.first_seq().unwrap_or(0), batch.last_head().map_or(0, |h| h.seq));
        let mut key = self.origin_prefix();
        if self.cfg.date_partition
            && let Some(date) = batch.first_at().and_then(date_of)
        {
            key.push_str(&format!("dt={date}/"));
        }
        key.push_str(&format!(
            "{first:020}-{last:020}{}",
            self.cfg.compression.codec().suffix()
        ));
        key
    }

    fn error(&self, f: S3Failure) -> SinkError {
        let message = format!("S3 sink {}: {}", self.describe(), f.message);
        if f.transient {
            SinkError::transient(message)
        } else {
            SinkError::permanent(message)
        }
    }

    /// The metadata of an object, as (last seq, last hash, origin).
    async fn object_head(&self, key: &str) -> Result<(Option<u64>, Option<String>, Option<String>), SinkError> {
        let out = self
            .client()
            .await
            .head_object()
            .bucket(&self.cfg.bucket)
            .key(key)
            .send()
            .await
            .map_err(|e| self.error(classify(&format!("reading {key}"), &e)))?;
        let meta = out.metadata();
        let get = |k: &str| meta.and_then(|m| m.get(k)).cloned();
        Ok((
            get("last-seq").and_then(|s| s.parse().ok()),
            get("last-hash"),
            get("origin"),
        ))
    }
}

/// `YYYY-MM-DD` from an RFC 3339 `at`, if it has that shape.
fn date_of(at: &str) -> Option<&str> {
    let date = at.get(..10)?;
    let b = date.as_bytes();
    (b[4] == b'-'
        && b[7] == b'-'
        && date
            .bytes()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit()))
    .then_some(date)
}

#[async_trait]
impl Sink for S3Sink {
    async fn held(&mut self) -> Result<Option<Head>, SinkError> {
        let prefix = self.origin_prefix();
        let client = self.client().await;
        let objects = list_objects(client, &self.cfg.bucket, &prefix)
            .await
            .map_err(|f| self.error(f))?;
        let best = objects.into_iter().max_by_key(|(range, _)| range.last);
        // Leftovers of a follower killed mid-upload: never visible as objects, but stored and billed.
        match abort_leftovers(client, &self.cfg.bucket, &prefix).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(n, %prefix, "S3 sink: aborted unfinished multipart uploads left by an earlier run"),
            // Housekeeping only: a policy without s3:ListBucketMultipartUploads must not stop the export.
            Err(f) => tracing::warn!(
                "S3 sink: cannot clean up unfinished multipart uploads ({}); add an AbortIncompleteMultipartUpload lifecycle rule instead",
                f.message
            ),
        }
        let Some((range, key)) = best else { return Ok(None) };
        let (last_seq, last_hash, origin) = self.object_head(&key).await?;
        if origin.as_deref() != Some(self.origin.as_str()) || last_seq != Some(range.last) {
            return Err(SinkError::integrity(format!(
                "S3 sink: s3://{}/{key} says origin {origin:?} and last seq {last_seq:?} in its metadata, which its name and this follower's origin {:?} do not match",
                self.cfg.bucket, self.origin
            )));
        }
        let hash = last_hash.unwrap_or_default();
        Head::from_stored(range.last, hash.as_bytes()).map(Some).ok_or_else(|| {
            SinkError::integrity(format!(
                "S3 sink: s3://{}/{key} has no well-formed last-hash in its metadata",
                self.cfg.bucket
            ))
        })
    }

    async fn deliver(&mut self, batch: &Batch) -> Result<(), SinkError> {
        let Some(last) = batch.last_head() else { return Ok(()) };
        let key = self.key_for(batch);
        let codec = self.cfg.compression.codec();
        let body = self
            .cfg
            .compression
            .compress(&batch.jsonl)
            .map_err(|e| SinkError::permanent(format!("{codec}: {e}")))?;
        let object = NewObject {
            bucket: &self.cfg.bucket,
            key: &key,
            content_type: "application/x-ndjson",
            content_encoding: codec.content_encoding(),
            metadata: HashMap::from([
                ("origin".to_owned(), self.origin.clone()),
                ("first-seq".to_owned(), batch.first_seq().unwrap_or(0).to_string()),
                ("last-seq".to_owned(), last.seq.to_string()),
                ("last-hash".to_owned(), last.hash_str().to_owned()),
                ("records".to_owned(), batch.len().to_string()),
            ]),
        };
        match upload_new(self.client().await, &object, body, self.cfg.parts).await {
            Ok(()) => Ok(()),
            Err(f) => {
                if !f.precondition_failed() {
                    return Err(self.error(f));
                }
                // Already there: a batch resent after a crash. Delivered only if it is this batch.
                let (last_seq, last_hash, origin) = self.object_head(&key).await?;
                if last_seq == Some(last.seq)
                    && last_hash.as_deref() == Some(last.hash_str())
                    && origin.as_deref() == Some(&self.origin)
                {
                    tracing::info!(%key, "S3 sink: the object was already uploaded; counted as delivered");
                    Ok(())
                } else {
                    Err(SinkError::integrity(format!(
                        "S3 sink: s3://{}/{key} already exists with another content (last hash {last_hash:?}, not {})",
                        self.cfg.bucket,
                        last.hash_str()
                    )))
                }
            }
        }
    }

    async fn check(&mut self) -> Result<String, SinkError> {
        let client = self.client().await.clone();
        client
            .head_bucket()
            .bucket(&self.cfg.bucket)
            .send()
            .await
            .map_err(|e| self.error(classify(&format!("HeadBucket {}", self.cfg.bucket), &e)))?;
        // Prove write permission under the prefix with a probe that no listing takes for a batch.
        let key = format!("{}.chainship-check-{}", self.origin_prefix(), std::process::id());
        client
            .put_object()
            .bucket(&self.cfg.bucket)
            .key(&key)
            .body(ByteStream::from_static(b"chainship check"))
            .send()
            .await
            .map_err(|e| self.error(classify(&format!("writing a probe {key}"), &e)))?;
        let _ = client.delete_object().bucket(&self.cfg.bucket).key(&key).send().await;
        Ok(format!(
            "bucket reachable, write permission under {}",
            self.origin_prefix()
        ))
    }

    fn describe(&self) -> String {
        format!("s3://{}/{}", self.cfg.bucket, self.cfg.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_names_sort_by_seq_and_parse_back() {
        let key = format!("p/o/dt=2026-08-17/{:020}-{:020}.jsonl.gz", 1, 500);
        let range = |codec| {
            Some(ObjectRange {
                first: 1,
                last: 500,
                codec,
            })
        };
        assert_eq!(parse_object_name(&key), range(Codec::Gzip));
        assert_eq!(parse_object_name(&key.replace(".gz", ".zst")), range(Codec::Zstd));
        assert_eq!(parse_object_name(&key.replace(".gz", ".bz2")), None);
        assert!(format!("{:020}", 99) < format!("{:020}", 100));
        assert_eq!(parse_object_name("p/o/1-2.jsonl.gz"), None);
        assert_eq!(date_of("2026-08-17T08:00:00Z"), Some("2026-08-17"));
        // The writer and every reader agree on where an origin lives, whatever slashes the URL has.
        for prefix in ["exports", "/exports/", "exports/"] {
            assert_eq!(origin_prefix(prefix, "prod/agentrt"), "exports/prod/agentrt/");
        }
        assert_eq!(origin_prefix("", "o"), "o/");
        assert_eq!(date_of("yesterday"), None);
    }
}
