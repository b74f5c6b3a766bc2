//! Uploading one object that must not overwrite anything: a single PUT, or
//! a multipart upload once the body is large, both sending SHA-256
//! checksums and `If-None-Match: *` (on the PUT, or on the
//! CompleteMultipartUpload that makes a multipart object appear). Either
//! way the object appears whole or not at all, and an existing one answers
//! 412 ([`S3Failure::precondition_failed`]). With Object Lock, an object can
//! be kept in COMPLIANCE mode until a date.

use std::collections::HashMap;
use std::time::SystemTime;

use aws_sdk_s3::Client;
use aws_sdk_s3::primitives::{ByteStream, DateTime};
use aws_sdk_s3::types::{ChecksumAlgorithm, CompletedMultipartUpload, CompletedPart, ObjectLockMode};
use bytes::Bytes;
use chainship_core::ErrorKind;
use futures::{StreamExt, TryStreamExt};

use crate::{S3Failure, classify};

/// S3's smallest part (all but the last).
pub const MIN_PART_SIZE: usize = 5 << 20;
/// Parts uploaded at once.
const PARTS_IN_FLIGHT: usize = 4;

/// When to switch to multipart, and how big the parts are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartPlan {
    /// Bodies of at least this many (compressed) bytes go multipart.
    pub threshold: usize,
    pub part_size: usize,
}

impl Default for PartPlan {
    /// The AWS CLI's defaults.
    fn default() -> Self {
        PartPlan {
            threshold: 8 << 20,
            part_size: 8 << 20,
        }
    }
}

/// One object to write.
pub struct NewObject<'a> {
    pub bucket: &'a str,
    pub key: &'a str,
    pub content_type: &'static str,
    pub content_encoding: Option<&'static str>,
    pub metadata: HashMap<String, String>,
    /// Keep the object in COMPLIANCE mode until then (the bucket needs Object Lock).
    pub retain_until: Option<SystemTime>,
}

/// Uploads `body` as `object` unless an object of that name exists (then a
/// 412 failure, which the caller checks).
pub async fn upload_new(
    client: &Client,
    object: &NewObject<'_>,
    body: impl Into<Bytes>,
    plan: PartPlan,
) -> Result<(), S3Failure> {
    // `Bytes`: the caller may keep the body (to compare a 412's object) without a copy.
    let body: Bytes = body.into();
    if body.len() < plan.threshold.max(1) {
        return put_whole(client, object, body).await;
    }
    let upload_id = start_multipart(client, object).await?;
    let result = put_parts(client, object, &upload_id, body, plan.part_size).await;
    if result.is_err() {
        // Best effort: parts of a failed upload would otherwise be stored (and billed) until a
        // lifecycle rule or the next start of the sink aborts them.
        abort(client, object.bucket, object.key, &upload_id).await;
    }
    result
}

/// The settings a PUT and a CreateMultipartUpload both carry (two SDK
/// builder types with the same setters, hence a macro).
macro_rules! object_settings {
    ($builder:expr, $object:expr) => {
        $builder
            .bucket($object.bucket)
            .key($object.key)
            .content_type($object.content_type)
            .set_content_encoding($object.content_encoding.map(str::to_owned))
            .checksum_algorithm(ChecksumAlgorithm::Sha256)
            .set_metadata(Some($object.metadata.clone()))
            .set_object_lock_mode($object.retain_until.map(|_| ObjectLockMode::Compliance))
            .set_object_lock_retain_until_date($object.retain_until.map(DateTime::from))
    };
}

async fn put_whole(client: &Client, object: &NewObject<'_>, body: Bytes) -> Result<(), S3Failure> {
    object_settings!(client.put_object(), object)
        .if_none_match("*")
        .body(ByteStream::from(body))
        .send()
        .await
        .map(drop)
        .map_err(|e| classify(&format!("uploading {}", object.key), &e))
}

/// Writes `body` as `object`, replacing whatever is there (for the one
/// mutable object, a pointer to the newest of write-once ones).
pub async fn put_replacing(client: &Client, object: &NewObject<'_>, body: Vec<u8>) -> Result<(), S3Failure> {
    object_settings!(client.put_object(), object)
        .body(ByteStream::from(body))
        .send()
        .await
        .map(drop)
        .map_err(|e| classify(&format!("uploading {}", object.key), &e))
}

async fn start_multipart(client: &Client, object: &NewObject<'_>) -> Result<String, S3Failure> {
    let what = format!("starting a multipart upload of {}", object.key);
    let created = object_settings!(client.create_multipart_upload(), object)
        .send()
        .await
        .map_err(|e| classify(&what, &e))?;
    created.upload_id().map(str::to_owned).ok_or_else(|| {
        S3Failure::new(
            ErrorKind::Transient,
            format!("{what}: the server returned no upload id"),
        )
    })
}

async fn put_parts(
    client: &Client,
    object: &NewObject<'_>,
    upload_id: &str,
    body: Bytes,
    part_size: usize,
) -> Result<(), S3Failure> {
    let part_size = part_size.max(MIN_PART_SIZE);
    let ranges: Vec<_> = (0..body.len())
        .step_by(part_size)
        .map(|start| start..(start + part_size).min(body.len()))
        .collect();
    let parts: Vec<CompletedPart> = futures::stream::iter(ranges.into_iter().enumerate())
        .map(|(i, range)| {
            let number = i as i32 + 1;
            let chunk = body.slice(range);
            async move {
                let out = client
                    .upload_part()
                    .bucket(object.bucket)
                    .key(object.key)
                    .upload_id(upload_id)
                    .part_number(number)
                    .checksum_algorithm(ChecksumAlgorithm::Sha256)
                    .body(ByteStream::from(chunk))
                    .send()
                    .await
                    .map_err(|e| classify(&format!("uploading part {number} of {}", object.key), &e))?;
                Ok::<_, S3Failure>(
                    CompletedPart::builder()
                        .part_number(number)
                        .set_e_tag(out.e_tag().map(str::to_owned))
                        .set_checksum_sha256(out.checksum_sha256().map(str::to_owned))
                        .build(),
                )
            }
        })
        .buffered(PARTS_IN_FLIGHT)
        .try_collect()
        .await?;
    client
        .complete_multipart_upload()
        .bucket(object.bucket)
        .key(object.key)
        .upload_id(upload_id)
        .if_none_match("*")
        .multipart_upload(CompletedMultipartUpload::builder().set_parts(Some(parts)).build())
        .send()
        .await
        .map(drop)
        .map_err(|e| classify(&format!("completing the upload of {}", object.key), &e))
}

async fn abort(client: &Client, bucket: &str, key: &str, upload_id: &str) {
    if let Err(e) = client
        .abort_multipart_upload()
        .bucket(bucket)
        .key(key)
        .upload_id(upload_id)
        .send()
        .await
    {
        tracing::warn!(
            key,
            "S3: could not abort a failed multipart upload: {}",
            classify("abort", &e).message
        );
    }
}

/// Aborts the unfinished multipart uploads under `prefix`: what a follower
/// killed mid-upload leaves behind. Returns how many it aborted.
pub async fn abort_leftovers(client: &Client, bucket: &str, prefix: &str) -> Result<usize, S3Failure> {
    let what = format!("listing unfinished uploads under {prefix}");
    let listing = client
        .list_multipart_uploads()
        .bucket(bucket)
        .prefix(prefix)
        .send()
        .await
        .map_err(|e| classify(&what, &e))?;
    let mut aborted = 0;
    for upload in listing.uploads() {
        if let (Some(key), Some(id)) = (upload.key(), upload.upload_id()) {
            abort(client, bucket, key, id).await;
            aborted += 1;
        }
    }
    Ok(aborted)
}
