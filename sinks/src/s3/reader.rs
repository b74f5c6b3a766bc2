//! Reading every batch object of an origin back, for `verify-export`: in
//! seq-range order, one object in memory at a time, decompressed line by
//! line. What is wrong with the copy as a whole (a stray key, an object that
//! does not decode or is not its name's range) is handed on as a finding.

use super::config::S3Config;
use super::objects::{batch_object_lines, fetch_object, list_origin, stray_message};
use crate::error::SinkError;
use crate::lines::{NOT_A_RECORD, OnRecord};

/// Calls `each(line, place)` for every record line of `origin`'s objects.
pub async fn read_records(cfg: &S3Config, origin: &str, each: &mut OnRecord<'_>) -> Result<(), SinkError> {
    let client = cfg.settings.client().await;
    let (bucket, at) = (&cfg.at.bucket, &cfg.at);
    let fail = |f: chainship_s3::S3Failure| SinkError::permanent(format!("{at}: {}", f.message));
    let listing = list_origin(&client, bucket, &at.origin_prefix(origin))
        .await
        .map_err(fail)?;
    let mut finding = |message: String| each(NOT_A_RECORD, &|| message.clone());
    for key in &listing.strays {
        finding(stray_message(bucket, key));
    }
    let mut objects = listing.objects;
    // By seq range, not by key: date partitions follow `at`, which is for people, not ordering.
    objects.sort_by_key(|(range, _)| (range.first, range.last));
    for (range, key) in objects {
        let name = format!("s3://{bucket}/{key}");
        let body = fetch_object(&client, bucket, &key).await.map_err(fail)?;
        if let Some(m) = batch_object_lines(&body, &range, &name, each) {
            each(NOT_A_RECORD, &|| m.clone());
        }
    }
    Ok(())
}

/// Every origin with objects under the prefix, from one listing of its
/// keys (each origin keeps its own folder, so its copy is then read alone);
/// and the keys under no origin's folder (a loader may read those too: the
/// first few, and how many).
pub async fn origins(cfg: &S3Config) -> Result<(Vec<String>, Vec<String>, u64), SinkError> {
    let client = cfg.settings.client().await;
    let at = &cfg.at;
    let root = at.key("");
    let (mut origins, mut strays, mut count) = (std::collections::BTreeSet::new(), Vec::new(), 0u64);
    chainship_s3::object::visit_keys(&client, &at.bucket, &root, None, None, &mut |key| {
        let rest = &key[root.len().min(key.len())..];
        match rest
            .split_once('/')
            .and_then(|(segment, _)| chainship_chain::origin_from_segment(segment))
        {
            Some(origin) => {
                origins.insert(origin);
            }
            // The sink's own probe object sits at the root on purpose.
            None if rest == super::objects::PROBE_NAME || rest.is_empty() => {}
            None => {
                count += 1;
                if strays.len() < 5 {
                    strays.push(key.to_owned());
                }
            }
        }
    })
    .await
    .map_err(|f| SinkError::permanent(format!("{at}: {}", f.message)))?;
    Ok((origins.into_iter().collect(), strays, count))
}
