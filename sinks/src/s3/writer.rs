//! The S3 sink: one object per batch, JSON Lines compressed with gzip or
//! zstd, named so a listing sorts in seq order and says what it holds (see
//! [`super::objects`]).
//!
//! Object metadata carries origin, first and last seq, the last event's
//! hash and the record count. Uploads (single or multipart) send SHA-256
//! checksums and `If-None-Match: *`, so no object is ever overwritten. The
//! listing is the truth (as in Litestream): on start the sink reads back
//! every object past the trusted head and proves its records, and the
//! follower resumes after them, so a re-sent batch never duplicates or
//! overlaps an earlier object.

use std::collections::HashMap;

use async_trait::async_trait;
use chainship_chain::record::Record;
use chainship_chain::{Head, HeldCheck, Setting};
use chainship_s3::{NewObject, S3Failure, abort_leftovers, classify, upload_new};
use tokio::sync::OnceCell;

use super::compression::{Codec, same_bytes};
use super::config::S3Config;
use super::objects::{PROBE_NAME, batch_object_lines, date_of, fetch_object, list_origin, object_lines, stray_message};
use crate::Sink;
use crate::batch::Batch;
use crate::error::SinkError;

pub struct S3Sink {
    cfg: S3Config,
    origin: String,
    client: OnceCell<aws_sdk_s3::Client>,
}

impl S3Sink {
    pub fn new(cfg: S3Config, origin: &str) -> Self {
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
        self.cfg.at.origin_prefix(&self.origin)
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
        f.error(format_args!("S3 sink {}", self.describe()))
    }

    /// Whether the object at `key` holds exactly this batch's records (read
    /// and compared, never taken from its metadata, which anyone can set).
    async fn holds_exactly(&self, key: &str, codec: Codec, body: &[u8]) -> Result<bool, SinkError> {
        let client = self.client().await.clone();
        let held = fetch_object(&client, &self.cfg.at.bucket, key)
            .await
            .map_err(|f| self.error(f))?;
        if held[..] == *body {
            return Ok(true);
        }
        // Compressed another way (another version), perhaps: compare what they hold.
        match (codec.decoder(&held[..]), codec.decoder(body)) {
            (Ok(theirs), Ok(ours)) => Ok(same_bytes(theirs, ours).unwrap_or(false)),
            _ => Ok(false),
        }
    }
}

impl S3Sink {
    /// The credentials resolve, or one error naming the setting they come from.
    async fn require_credentials(&self) -> Result<(), SinkError> {
        self.cfg.settings.check_credentials().await.map_err(|f| {
            let setting = match self.cfg.settings.uses_credentials_file() {
                true => Setting::SinkS3CredentialsFile,
                false => Setting::SinkS3Profile,
            };
            self.error(f).with_setting(setting)
        })
    }
}

#[async_trait]
impl Sink for S3Sink {
    async fn held(&mut self, after: Option<Head>) -> Result<Option<Head>, SinkError> {
        self.require_credentials().await?;
        let prefix = self.origin_prefix();
        let client = self.client().await.clone();
        let bucket = self.cfg.at.bucket.clone();
        let listing = list_origin(&client, &bucket, &prefix)
            .await
            .map_err(|f| self.error(f))?;
        if let Some(key) = listing.strays.first() {
            return Err(SinkError::integrity(format!(
                "S3 sink: {}: remove it",
                stray_message(&bucket, key)
            )));
        }
        let mut objects = listing.objects;
        // Leftovers of a follower killed mid-upload: never visible as objects, but stored and billed.
        match abort_leftovers(&client, &bucket, &prefix).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(n, %prefix, "S3 sink: aborted unfinished multipart uploads left by an earlier run"),
            // Housekeeping only: a policy without s3:ListBucketMultipartUploads must not stop the export.
            Err(f) => tracing::warn!(
                "S3 sink: cannot clean up unfinished multipart uploads ({}); add an AbortIncompleteMultipartUpload lifecycle rule instead",
                f.message
            ),
        }
        // Names and metadata are claims anyone with write access can plant:
        // every object past the trusted head is read and its records proven.
        objects.sort_by_key(|(range, _)| (range.first, range.last));
        let mut check = HeldCheck::new(&self.origin, after);
        for (range, key) in objects.into_iter().filter(|(r, _)| r.last > after.map_or(0, |h| h.seq)) {
            let name = format!("s3://{bucket}/{key}");
            let body = fetch_object(&client, &bucket, &key).await.map_err(|f| self.error(f))?;
            let mut failure = None;
            let whole = batch_object_lines(&body, &range, &name, &mut |line, place| {
                if failure.is_none()
                    && let Err(m) = check.feed(line, place)
                {
                    failure = Some(m.message);
                }
            });
            // A record that does not fit, or an object that is not what its name says.
            if let Some(m) = failure.or(whole) {
                return Err(SinkError::integrity(format!("S3 sink: {m}")));
            }
        }
        Ok(check.head())
    }

    async fn holds(&mut self, head: Head) -> Result<bool, SinkError> {
        // A name is a claim: the object covering the cursor is read and must
        // hold the cursor's record itself (the seq and the delivered hash).
        let client = self.client().await.clone();
        let bucket = self.cfg.at.bucket.clone();
        let listing = list_origin(&client, &bucket, &self.origin_prefix())
            .await
            .map_err(|f| self.error(f))?;
        for (range, key) in listing
            .objects
            .iter()
            .filter(|(range, _)| range.first <= head.seq && head.seq <= range.last)
        {
            let body = fetch_object(&client, &bucket, key).await.map_err(|f| self.error(f))?;
            let mut found = false;
            // An object that does not decode holds nothing.
            let read = object_lines(&body, range.codec, key, &mut |line, _| {
                found |= Record::parse(line)
                    .is_ok_and(|r| r.origin == self.origin && r.seq == head.seq && r.hash.as_bytes() == &head.hash[..]);
            });
            if read.is_ok() && found {
                return Ok(true);
            }
        }
        Ok(false)
    }

    async fn deliver(&mut self, batch: &Batch) -> Result<(), SinkError> {
        let Some(last) = batch.last_head() else { return Ok(()) };
        let key = self.key_for(batch);
        let codec = self.cfg.compression.codec();
        // Compressed as it was built (the follower's batches), or here.
        let body: bytes::Bytes = match (batch.body(), batch.compression()) {
            (Some(body), Some(c)) if c == self.cfg.compression => body,
            (Some(_), _) => {
                return Err(SinkError::permanent(format!(
                    "S3 sink: the batch was compressed otherwise than {codec} at the sink's level"
                )));
            }
            (None, _) => self
                .cfg
                .compression
                .compress(&batch.jsonl)
                .map_err(|e| SinkError::permanent(format!("{codec}: {e}")))?
                .into(),
        };
        let object = NewObject {
            bucket: &self.cfg.at.bucket,
            key: &key,
            content_type: "application/x-ndjson",
            content_encoding: Some(codec.content_encoding()),
            metadata: HashMap::from([
                ("origin".to_owned(), self.origin.clone()),
                ("first-seq".to_owned(), batch.first_seq().unwrap_or(0).to_string()),
                ("last-seq".to_owned(), last.seq.to_string()),
                ("last-hash".to_owned(), last.hash_str().to_owned()),
                ("records".to_owned(), batch.len().to_string()),
            ]),
            retain_until: None,
        };
        let sent = upload_new(self.client().await, &object, body.clone(), self.cfg.parts).await;
        match sent {
            Ok(()) => Ok(()),
            Err(f) => {
                if !f.precondition_failed() {
                    return Err(self.error(f));
                }
                // Already there: a batch resent after a crash. Delivered only if it is this batch.
                if self.holds_exactly(&key, codec, &body).await? {
                    tracing::info!(%key, "S3 sink: the object was already uploaded; counted as delivered");
                    Ok(())
                } else {
                    Err(SinkError::integrity(format!(
                        "S3 sink: s3://{}/{key} already exists and does not hold this batch (seqs {} to {})",
                        self.cfg.at.bucket,
                        batch.first_seq().unwrap_or(0),
                        last.seq
                    )))
                }
            }
        }
    }

    async fn check(&mut self) -> Result<String, SinkError> {
        self.require_credentials().await?;
        let client = self.client().await.clone();
        client
            .head_bucket()
            .bucket(&self.cfg.at.bucket)
            .send()
            .await
            .map_err(|e| self.error(classify(&format!("HeadBucket {}", self.cfg.at.bucket), &e)))?;
        // Prove write permission with one probe object, written once ever: a
        // second PUT is refused by its precondition (412), and S3 checks
        // permission before preconditions, so either answer proves it. No
        // delete: in a versioned or locked bucket that would pile up versions.
        let key = self.cfg.at.key(PROBE_NAME);
        let probe = NewObject {
            bucket: &self.cfg.at.bucket,
            key: &key,
            content_type: "text/plain; charset=utf-8",
            content_encoding: None,
            metadata: HashMap::new(),
            retain_until: None,
        };
        let body = b"chainship check: proves write permission; written once".to_vec();
        match upload_new(&client, &probe, body, Default::default()).await {
            Ok(()) => {}
            Err(f) if f.precondition_failed() => {}
            Err(f) => return Err(self.error(f)),
        }
        Ok(format!(
            "bucket reachable, write permission under {}",
            self.origin_prefix()
        ))
    }

    fn describe(&self) -> String {
        self.cfg.at.to_string()
    }
}
