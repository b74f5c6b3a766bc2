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
