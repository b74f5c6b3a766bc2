//! Reading and listing objects.

use aws_sdk_s3::Client;
use chainship_core::ErrorKind;

use crate::{S3Failure, classify};

/// An object's bytes, whole, or `None` when there is no such key. Callers
/// read only objects bounded in size (heads, batch objects).
pub async fn get_object(client: &Client, bucket: &str, key: &str) -> Result<Option<bytes::Bytes>, S3Failure> {
    let out = match client.get_object().bucket(bucket).key(key).send().await {
        Ok(out) => out,
        Err(e) => {
            let f = classify(&format!("reading {key}"), &e);
            return if f.status == Some(404) { Ok(None) } else { Err(f) };
        }
    };
    let body = out
        .body
        .collect()
        .await
        .map_err(|e| S3Failure::new(ErrorKind::Transient, format!("reading {key}: {e}")))?;
    Ok(Some(body.into_bytes()))
}

/// Calls `each` with every key under `prefix` that sorts after
/// `start_after` (S3 `ListObjectsV2` `StartAfter`: the listing starts
/// there, so keys before it are never fetched), in listing order, a page at
/// a time; with `delimiter` only those directly under `prefix`. Holds one
/// page, so a listing of millions costs what `each` keeps.
pub async fn visit_keys(
    client: &Client,
    bucket: &str,
    prefix: &str,
    delimiter: Option<&str>,
    start_after: Option<&str>,
    each: &mut (dyn FnMut(&str) + Send),
) -> Result<(), S3Failure> {
    let mut pages = client
        .list_objects_v2()
        .bucket(bucket)
        .prefix(prefix)
        .set_delimiter(delimiter.map(str::to_owned))
        .set_start_after(start_after.map(str::to_owned))
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| classify(&format!("listing {prefix}"), &e))?;
        for key in page.contents().iter().filter_map(|o| o.key()) {
            each(key);
        }
    }
    Ok(())
}

/// Calls `each` with every common prefix directly under `prefix` (the
/// "folders", listed with delimiter `/`), in listing order.
pub async fn visit_folders(
    client: &Client,
    bucket: &str,
    prefix: &str,
    each: &mut (dyn FnMut(&str) + Send),
) -> Result<(), S3Failure> {
    let mut pages = client
        .list_objects_v2()
        .bucket(bucket)
        .prefix(prefix)
        .delimiter("/")
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| classify(&format!("listing {prefix}"), &e))?;
        for folder in page.common_prefixes().iter().filter_map(|p| p.prefix()) {
            each(folder);
        }
    }
    Ok(())
}

/// The keys under `prefix`, in listing order; with `delimiter` only those
/// directly under it. `keep` decides which are kept, and listing stops once
/// `limit` are kept.
pub async fn list_keys(
    client: &Client,
    bucket: &str,
    prefix: &str,
    delimiter: Option<&str>,
    keep: impl Fn(&str) -> bool,
    limit: Option<usize>,
) -> Result<Vec<String>, S3Failure> {
    let mut keys = Vec::new();
    let mut pages = client
        .list_objects_v2()
        .bucket(bucket)
        .prefix(prefix)
        .set_delimiter(delimiter.map(str::to_owned))
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| classify(&format!("listing {prefix}"), &e))?;
        keys.extend(
            page.contents()
                .iter()
                .filter_map(|o| o.key())
                .filter(|k| keep(k))
                .map(str::to_owned),
        );
        if let Some(limit) = limit.filter(|l| keys.len() >= *l) {
            keys.truncate(limit);
            break;
        }
    }
    Ok(keys)
}
