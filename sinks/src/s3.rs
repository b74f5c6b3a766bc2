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

use std::io::BufReader;

use async_trait::async_trait;
use aws_sdk_s3::primitives::ByteStream;
use chainship_chain::record::Record;
use chainship_chain::{Head, HeldCheck, origin_segment};
use tokio::sync::OnceCell;

use crate::Sink;
use crate::batch::Batch;
use crate::compression::{Codec, Compression};
use crate::error::SinkError;
use crate::read_back::{OnRecord, read_lines};
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

/// Where an origin's objects live: `PREFIX/<origin segment>/` (see
/// [`chainship_chain::origin_segment`]: `team/a` → `team%2Fa`, so one
/// origin's prefix never holds another's objects).
pub fn origin_prefix(prefix: &str, origin: &str) -> String {
    join_prefix(prefix, &origin_segment(origin))
}

/// Where releases before the origin was encoded kept an origin's objects:
/// `PREFIX/<origin>/` as written.
pub fn legacy_origin_prefix(prefix: &str, origin: &str) -> String {
    join_prefix(prefix, origin)
}

fn join_prefix(prefix: &str, segment: &str) -> String {
    match prefix.trim_matches('/') {
        "" => format!("{segment}/"),
        prefix => format!("{prefix}/{segment}/"),
    }
}

/// Refuses to start an origin afresh whose objects sit under the legacy
/// layout: resuming from nothing there would export everything again
/// beside them. Only origins with `/`, `:` or `@` moved.
pub async fn refuse_legacy_layout(
    client: &aws_sdk_s3::Client,
    bucket: &str,
    prefix: &str,
    origin: &str,
) -> Result<(), SinkError> {
    let (new, old) = (origin_prefix(prefix, origin), legacy_origin_prefix(prefix, origin));
    if new == old {
        return Ok(());
    }
    let legacy = list_objects(client, bucket, &old).await.map_err(|f| {
        let message = format!("s3://{bucket}/{old}: {}", f.message);
        if f.transient {
            SinkError::transient(message)
        } else {
            SinkError::permanent(message)
        }
    })?;
    if let Some((_, key)) = legacy.first() {
        return Err(SinkError::permanent(format!(
            "S3: origin {origin:?} has objects under the old layout s3://{bucket}/{old} (e.g. {key}); \
             objects now live under s3://{bucket}/{new}: copy them there (see the README, \"S3 layout\"), then start again"
        )));
    }
    Ok(())
}

/// What an origin's prefix holds: its batch objects, with the range each
/// name says it holds, and every other key under it ("strays": a planted
/// `evil.jsonl.gz`, a `.jsonl` with no codec). A SIEM loader reading the
/// prefix takes strays in, so a check must name them, never pass over them.
#[derive(Debug, Default)]
pub struct OriginListing {
    pub objects: Vec<(ObjectRange, String)>,
    pub strays: Vec<String>,
}

/// The `check` probe, at the prefix's root: outside every origin's folder,
/// so nothing a loader reads from an origin's folder is exempt from checks.
pub const PROBE_NAME: &str = ".chainship-check";

/// Lists everything under `origin_prefix`.
pub async fn list_origin(
    client: &aws_sdk_s3::Client,
    bucket: &str,
    origin_prefix: &str,
) -> Result<OriginListing, S3Failure> {
    let mut listing = OriginListing::default();
    let mut pages = client
        .list_objects_v2()
        .bucket(bucket)
        .prefix(origin_prefix)
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| classify(&format!("listing {origin_prefix}"), &e))?;
        for key in page.contents().iter().filter_map(|o| o.key()) {
            // An origin's objects sit directly under its prefix or in its dt=
            // folders; anything deeper is not its own (a legacy-layout `team/a/b/...`).
            let rest = &key[origin_prefix.len().min(key.len())..];
            let own = !rest.contains('/') || (rest.starts_with("dt=") && rest.matches('/').count() == 1);
            match parse_object_name(key).filter(|_| own) {
                Some(range) => listing.objects.push((range, key.to_owned())),
                None => listing.strays.push(key.to_owned()),
            }
        }
    }
    Ok(listing)
}

/// Every batch object under `origin_prefix` (strays left out: see [`list_origin`]).
pub async fn list_objects(
    client: &aws_sdk_s3::Client,
    bucket: &str,
    origin_prefix: &str,
) -> Result<Vec<(ObjectRange, String)>, S3Failure> {
    Ok(list_origin(client, bucket, origin_prefix).await?.objects)
}

/// The message for a stray key under an origin's prefix.
pub fn stray_message(bucket: &str, key: &str) -> String {
    format!(
        "s3://{bucket}/{key}: under the origin's prefix but not a chainship batch object; a loader reading the prefix would take it in unchecked"
    )
}

/// Reads a fetched batch object line by line into `each`, and checks it is
/// what its name says. Returns what is wrong with the object as a whole (it
/// does not decode, or its records are not its name's range), if anything:
/// the one reading of an object that the sink's resume and `verify-export` share.
pub fn batch_object_lines(body: &[u8], range: &ObjectRange, name: &str, each: &mut OnRecord<'_>) -> Option<String> {
    let mut seqs: Option<(u64, u64)> = None;
    let read = object_lines(body, range.codec, name, &mut |line, place| {
        if let Some(seq) = Record::seq_of(line) {
            seqs = Some(seqs.map_or((seq, seq), |(first, _)| (first, seq)));
        }
        each(line, place)
    });
    match read {
        Err(f) => Some(format!("{name}: cannot be read as records ({})", f.message)),
        Ok(()) => range_message(name, range, seqs),
    }
}

/// Whether an object's records are the range its name says, as (first, last) seen.
fn range_message(name: &str, range: &ObjectRange, seqs: Option<(u64, u64)>) -> Option<String> {
    (seqs != Some((range.first, range.last))).then(|| {
        format!(
            "{name}: its name says seqs {} to {} but it holds {}",
            range.first,
            range.last,
            seqs.map_or("no records".to_owned(), |(a, b)| format!("seqs {a} to {b}"))
        )
    })
}

/// Fetches one batch object, compressed, whole (objects are bounded by
/// `--s3-batch-bytes`); [`object_lines`] then reads it.
pub async fn fetch_object(client: &aws_sdk_s3::Client, bucket: &str, key: &str) -> Result<bytes::Bytes, S3Failure> {
    let object = client
        .get_object()
        .bucket(bucket)
        .key(key)
        .send()
        .await
        .map_err(|e| classify(&format!("reading {key}"), &e))?;
    Ok(object
        .body
        .collect()
        .await
        .map_err(|e| S3Failure {
            transient: true,
            status: None,
            message: format!("reading {key}: {e}"),
        })?
        .into_bytes())
}

/// Calls `each` with every record line of a fetched object, in order,
/// decompressing as it reads.
pub fn object_lines(body: &[u8], codec: Codec, name: &str, each: &mut OnRecord<'_>) -> Result<(), S3Failure> {
    let permanent = |message: String| S3Failure {
        transient: false,
        status: None,
        message,
    };
    let decoder = codec
        .decoder(body)
        .map_err(|e| permanent(format!("{name}: {codec}: {e}")))?;
    read_lines(BufReader::new(decoder), name, each).map_err(|e| permanent(e.message))
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

    /// Whether the object at `key` holds exactly this batch's records (read
    /// and compared, never taken from its metadata, which anyone can set).
    async fn holds_exactly(&self, key: &str, codec: Codec, batch: &Batch) -> Result<bool, SinkError> {
        let client = self.client().await.clone();
        let body = fetch_object(&client, &self.cfg.bucket, key)
            .await
            .map_err(|f| self.error(f))?;
        let mut held = Vec::with_capacity(batch.jsonl.len());
        object_lines(&body, codec, key, &mut |line, _| {
            if held.len() <= batch.jsonl.len() {
                held.extend_from_slice(line);
                held.push(b'\n');
            }
        })
        .map_err(|f| self.error(f))?;
        Ok(held == batch.jsonl)
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
    async fn held(&mut self, after: Option<Head>) -> Result<Option<Head>, SinkError> {
        self.cfg.settings.check_credentials().await.map_err(|f| self.error(f))?;
        let prefix = self.origin_prefix();
        let client = self.client().await.clone();
        let bucket = self.cfg.bucket.clone();
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
        if objects.is_empty() {
            refuse_legacy_layout(&client, &bucket, &self.cfg.prefix, &self.origin).await?;
        }
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
                    failure = Some(m);
                }
            });
            // A record that does not fit, or an object that is not what its name says.
            if let Some(m) = failure.or(whole) {
                return Err(SinkError::integrity(format!("S3 sink: {m}")));
            }
        }
        Ok(check.head())
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
                if self.holds_exactly(&key, codec, batch).await? {
                    tracing::info!(%key, "S3 sink: the object was already uploaded; counted as delivered");
                    Ok(())
                } else {
                    Err(SinkError::integrity(format!(
                        "S3 sink: s3://{}/{key} already exists and does not hold this batch (seqs {} to {})",
                        self.cfg.bucket,
                        batch.first_seq().unwrap_or(0),
                        last.seq
                    )))
                }
            }
        }
    }

    async fn check(&mut self) -> Result<String, SinkError> {
        self.cfg.settings.check_credentials().await.map_err(|f| self.error(f))?;
        let client = self.client().await.clone();
        client
            .head_bucket()
            .bucket(&self.cfg.bucket)
            .send()
            .await
            .map_err(|e| self.error(classify(&format!("HeadBucket {}", self.cfg.bucket), &e)))?;
        // Prove write permission with one probe object, written once ever: a
        // second PUT is refused by its precondition (412), and S3 checks
        // permission before preconditions, so either answer proves it. No
        // delete: in a versioned or locked bucket that would pile up versions.
        let key = join_prefix(&self.cfg.prefix, PROBE_NAME)
            .trim_end_matches('/')
            .to_owned();
        let put = client
            .put_object()
            .bucket(&self.cfg.bucket)
            .key(&key)
            .if_none_match("*")
            .body(ByteStream::from_static(
                b"chainship check: proves write permission; written once",
            ))
            .send()
            .await;
        if let Err(e) = put {
            let f = classify(&format!("writing the probe {key}"), &e);
            if !f.precondition_failed() {
                return Err(self.error(f));
            }
        }
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
            assert_eq!(origin_prefix(prefix, "prod/agentrt"), "exports/prod%2Fagentrt/");
            assert_eq!(legacy_origin_prefix(prefix, "prod/agentrt"), "exports/prod/agentrt/");
        }
        // One origin's prefix never holds another's objects.
        assert!(!origin_prefix("p", "team/a/b").starts_with(&origin_prefix("p", "team/a")));
        assert_eq!(origin_prefix("", "o"), "o/");
        assert_eq!(date_of("yesterday"), None);
    }
}
