//! A tombstone in an S3 copy (see [`crate::tombstone`]): the batch object
//! holding the record written again, same name, compression and metadata,
//! with the tombstone in the record's line; older versions holding the
//! original deleted; refused up front where Object Lock keeps them.

use aws_sdk_s3::Client;
use chainship_s3::{NewObject, S3Failure, classify, put_replacing};

use super::compression::Compression;
use super::config::S3Config;
use super::objects::{fetch_object, list_origin};
use crate::SinkError;
use crate::tombstone::{Placed, rewrite_lines};

pub async fn replace(
    cfg: &S3Config,
    origin: &str,
    seq: u64,
    hash: &str,
    tombstone: &[u8],
) -> Result<Placed, SinkError> {
    let client = cfg.settings.client().await;
    let (bucket, at) = (&cfg.at.bucket, &cfg.at);
    let fail = |f: S3Failure| SinkError::permanent(format!("{at}: {}", f.message));
    // Object Lock keeps every version until its date: the original could
    // not be removed, so nothing is written.
    if object_lock_enabled(&client, bucket).await.map_err(fail)? {
        return Err(SinkError::permanent(format!(
            "s3://{bucket}: the bucket has Object Lock, which keeps the object's original version: the record cannot be removed from this copy (delete it when its retention ends, or keep this copy access-controlled)"
        )));
    }
    let listing = list_origin(&client, bucket, &at.origin_prefix(origin))
        .await
        .map_err(fail)?;
    for (range, key) in listing.objects.iter().filter(|(r, _)| r.first <= seq && seq <= r.last) {
        let body = fetch_object(&client, bucket, key).await.map_err(fail)?;
        let name = format!("s3://{bucket}/{key}");
        let decoded = range
            .codec
            .decoder(&body[..])
            .map_err(|e| SinkError::permanent(format!("{name}: {e}")))?;
        let mut plain = Vec::with_capacity(body.len() * 4);
        let replaced = rewrite_lines(
            std::io::BufReader::new(decoded),
            &mut plain,
            origin,
            seq,
            hash,
            tombstone,
        )
        .map_err(|e| SinkError::permanent(format!("{name}: cannot be read as records ({e})")))?;
        if replaced == 0 {
            continue;
        }
        let compressed = Compression::new(range.codec, None)
            .and_then(|c| c.compress(&plain).map_err(|e| chainship_chain::permanent!("{e}")))
            .map_err(|e| SinkError::permanent(format!("{name}: cannot compress: {e}")))?;
        let head = client
            .head_object()
            .bucket(bucket)
            .key(key)
            .send()
            .await
            .map_err(|e| fail(classify(&format!("reading {key}'s metadata"), &e)))?;
        let object = NewObject {
            bucket,
            key,
            content_type: "application/x-ndjson",
            content_encoding: Some(range.codec.content_encoding()),
            metadata: head.metadata().cloned().unwrap_or_default(),
            retain_until: None,
        };
        put_replacing(&client, &object, compressed).await.map_err(fail)?;
        let versions_deleted = delete_older_versions(&client, bucket, key).await.map_err(fail)?;
        return Ok(Placed::S3 {
            key: name,
            versions_deleted,
        });
    }
    Err(SinkError::permanent(format!(
        "{at}: no object of origin {origin:?} holds seq {seq} with hash {hash}"
    )))
}

async fn object_lock_enabled(client: &Client, bucket: &str) -> Result<bool, S3Failure> {
    match client.get_object_lock_configuration().bucket(bucket).send().await {
        Ok(out) => Ok(out
            .object_lock_configuration()
            .and_then(|c| c.object_lock_enabled())
            .is_some_and(|e| e.as_str() == "Enabled")),
        // No configuration at all: no lock.
        Err(e)
            if e.as_service_error()
                .and_then(|s| aws_sdk_s3::error::ProvideErrorMetadata::code(s))
                .is_some_and(|c| c == "ObjectLockConfigurationNotFoundError") =>
        {
            Ok(false)
        }
        Err(e) => Err(classify(&format!("reading s3://{bucket}'s Object Lock setting"), &e)),
    }
}

/// Deletes every version of `key` but the newest (the one just written):
/// a versioned bucket (or one versioned once) keeps the original as an
/// older version. An unversioned bucket lists only the current one.
async fn delete_older_versions(client: &Client, bucket: &str, key: &str) -> Result<u64, S3Failure> {
    let listed = client
        .list_object_versions()
        .bucket(bucket)
        .prefix(key)
        .send()
        .await
        .map_err(|e| classify(&format!("listing the versions of {key}"), &e))?;
    let mut deleted = 0;
    for v in listed.versions() {
        if v.key() != Some(key) || v.is_latest() == Some(true) {
            continue;
        }
        let Some(id) = v.version_id() else { continue };
        client
            .delete_object()
            .bucket(bucket)
            .key(key)
            .version_id(id)
            .send()
            .await
            .map_err(|e| classify(&format!("deleting an older version of {key}"), &e))?;
        deleted += 1;
    }
    Ok(deleted)
}
