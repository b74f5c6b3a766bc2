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
use aws_sdk_s3::types::ObjectLockEnabled;
use chainship_chain::Setting;
use chainship_s3::{
    NewObject, PartPlan, S3Failure, S3Location, S3Settings, classify, get_object, list_keys, put_replacing, upload_new,
    visit_keys,
};
use futures::{StreamExt, TryStreamExt};
use tokio::sync::OnceCell;

use super::{
    AnchorStore, NameKey, PutOutcome, StoreError, StoredNote, head_name, listing_start, note_seq, seq_from_name,
    valid_log_path,
};

/// Tiles and bundles are bytes; checkpoints are signed notes (text).
fn content_type(path: &str) -> &'static str {
    if path.starts_with("tile/") {
        "application/octet-stream"
    } else {
        "text/plain; charset=utf-8"
    }
}

/// Heads fetched at once by `list`.
const FETCHES_IN_FLIGHT: usize = 16;
/// The one probe object `check` ever writes (write-once: in an Object Lock
/// bucket a probe per run could never be deleted).
const PROBE: &str = ".chainship-check";

pub struct S3Store {
    at: S3Location,
    settings: S3Settings,
    retain_days: u32,
    client: OnceCell<aws_sdk_s3::Client>,
    object_lock: OnceCell<bool>,
    /// Origins whose layout `put_new` has checked (no heads left at the legacy key).
    layout_ok: Mutex<HashSet<String>>,
}

impl S3Store {
    pub fn new(at: S3Location, settings: S3Settings, retain_days: u32) -> Self {
        S3Store {
            at,
            settings,
            retain_days,
            client: OnceCell::new(),
            object_lock: OnceCell::new(),
            layout_ok: Mutex::new(HashSet::new()),
        }
    }

    /// The client, once the credentials resolve: without any, every call
    /// would fail as "cannot reach the server" after a round of lookups.
    async fn client(&self) -> Result<&aws_sdk_s3::Client, StoreError> {
        self.client
            .get_or_try_init(|| async {
                self.settings
                    .check_credentials()
                    .await
                    .map_err(|f| self.failure(f).with_setting(Setting::AnchorS3Profile))?;
                Ok(self.settings.client().await)
            })
            .await
    }

    /// Refuses an origin whose heads are all still at the legacy key: publishing
    /// afresh beside them, or verifying without them, would hide them.
    async fn refuse_legacy_layout(&self, origin: &str) -> Result<(), StoreError> {
        let Some(legacy) = self.at.legacy_origin_prefix(origin) else {
            return Ok(());
        };
        if self.head_keys(&legacy, true).await?.is_empty() {
            return Ok(());
        }
        Err(StoreError::permanent(format!(
            "anchor store {}: the heads of origin {origin:?} are under s3://{}/{legacy} (the layout before origins were encoded as one key segment); copy them to s3://{}/{} and run again",
            self.describe(),
            self.at.bucket,
            self.at.bucket,
            self.at.origin_prefix(origin)
        )))
    }

    /// Before the first write for an origin: refuses to write at the new key
    /// while its heads are all still at the legacy one.
    async fn check_layout(&self, origin: &str) -> Result<(), StoreError> {
        let checked = self.layout_ok.lock().is_ok_and(|ok| ok.contains(origin));
        if !checked && self.at.legacy_origin_prefix(origin).is_some() {
            if self.head_keys(&self.at.origin_prefix(origin), true).await?.is_empty() {
                self.refuse_legacy_layout(origin).await?;
            }
            if let Ok(mut ok) = self.layout_ok.lock() {
                ok.insert(origin.to_owned());
            }
        }
        Ok(())
    }

    /// Until when a new object is kept in COMPLIANCE mode (None: no Object Lock).
    async fn retain_until(&self) -> Result<Option<SystemTime>, StoreError> {
        let locked = self.object_lock().await?;
        Ok((locked && self.retain_days > 0)
            .then(|| SystemTime::now() + Duration::from_secs(u64::from(self.retain_days) * 86_400)))
    }

    /// Writes a new object unless the key exists (then its bytes).
    async fn write_new(&self, key: &str, content_type: &'static str, bytes: &[u8]) -> Result<PutOutcome, StoreError> {
        let object = NewObject {
            bucket: &self.at.bucket,
            key,
            content_type,
            content_encoding: None,
            metadata: Default::default(),
            retain_until: self.retain_until().await?,
        };
        match upload_new(self.client().await?, &object, bytes.to_vec(), PartPlan::default()).await {
            Ok(()) => Ok(PutOutcome::Created),
            Err(f) if f.precondition_failed() => Ok(PutOutcome::AlreadyThere(self.get(key).await?)),
            Err(f) => Err(self.failure(f)),
        }
    }

    fn log_object_key(&self, origin: &str, path: &str) -> Result<String, StoreError> {
        if !valid_log_path(path) {
            return Err(StoreError::permanent(format!(
                "anchor store: {path:?} is not a log object's path"
            )));
        }
        Ok(format!("{}{path}", self.at.origin_prefix(origin)))
    }

    fn failure(&self, f: S3Failure) -> StoreError {
        f.error(format_args!("anchor store {}", self.describe()))
    }

    /// Whether the bucket has Object Lock (asked once; a bucket without a
    /// lock configuration answers 404, which means no).
    async fn object_lock(&self) -> Result<bool, StoreError> {
        self.object_lock
            .get_or_try_init(|| async {
                match self
                    .client()
                    .await?
                    .get_object_lock_configuration()
                    .bucket(&self.at.bucket)
                    .send()
                    .await
                {
                    Ok(out) => Ok(out
                        .object_lock_configuration()
                        .and_then(|c| c.object_lock_enabled())
                        .is_some_and(|e| *e == ObjectLockEnabled::Enabled)),
                    Err(e) => {
                        let f = classify("reading the bucket's Object Lock configuration", &e);
                        if f.is_transient() {
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
        let is_head = |k: &str| {
            k.strip_prefix(prefix)
                .is_some_and(|n| !n.contains('/') && note_seq(n).is_some())
        };
        // The delimiter keeps deeper keys (another origin's, in the legacy layout) out.
        let limit = first_only.then_some(1);
        list_keys(self.client().await?, &self.at.bucket, prefix, Some("/"), is_head, limit)
            .await
            .map_err(|f| self.failure(f))
    }

    /// The names directly under `prefix` that `parse` accepts with a seq of
    /// `from` or more, listed from there on (`StartAfter`), sorted.
    async fn keys_under(
        &self,
        prefix: &str,
        from: u64,
        parse: fn(&str) -> Option<NameKey>,
    ) -> Result<Vec<NameKey>, StoreError> {
        let start_after = listing_start(from).map(|s| format!("{prefix}{s}"));
        let mut keys = Vec::new();
        let mut keep = |key: &str| {
            if let Some(k) = key.strip_prefix(prefix).and_then(parse).filter(|k| k.seq >= from) {
                keys.push(k);
            }
        };
        visit_keys(
            self.client().await?,
            &self.at.bucket,
            prefix,
            Some("/"),
            start_after.as_deref(),
            &mut keep,
        )
        .await
        .map_err(|f| self.failure(f))?;
        keys.sort_unstable();
        Ok(keys)
    }

    /// The origin's head keys; refuses a legacy layout when there are none.
    async fn origin_head_keys(&self, origin: &str) -> Result<Vec<String>, StoreError> {
        let keys = self.head_keys(&self.at.origin_prefix(origin), false).await?;
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
        let body = get_object(self.client().await?, &self.at.bucket, key)
            .await
            .map_err(|f| self.failure(f))?;
        Ok(body.map(|b| b.to_vec()))
    }
}

#[async_trait]
impl AnchorStore for S3Store {
    async fn put_new(&self, origin: &str, name: &str, note: &[u8]) -> Result<PutOutcome, StoreError> {
        self.check_layout(origin).await?;
        if note_seq(name).is_none() || name.contains('/') {
            return Err(StoreError::permanent(format!(
                "anchor store: {name:?} is not a head's name"
            )));
        }
        let key = format!("{}{name}", self.at.origin_prefix(origin));
        self.write_new(&key, "text/plain; charset=utf-8", note).await
    }

    async fn put_object_new(&self, origin: &str, path: &str, bytes: &[u8]) -> Result<PutOutcome, StoreError> {
        self.check_layout(origin).await?;
        let key = self.log_object_key(origin, path)?;
        self.write_new(&key, content_type(path), bytes).await
    }

    async fn put_objects_new(&self, origin: &str, objects: &[(&str, &[u8])]) -> Result<Vec<PutOutcome>, StoreError> {
        // Small objects, many: several requests at once, outcomes in order.
        let puts: Vec<_> = objects
            .iter()
            .map(|&(path, bytes)| self.put_object_new(origin, path, bytes))
            .collect();
        futures::stream::iter(puts)
            .buffered(FETCHES_IN_FLIGHT)
            .try_collect()
            .await
    }

    async fn list_paths(&self, origin: &str, dir: &str) -> Result<Vec<String>, StoreError> {
        let base = self.at.origin_prefix(origin);
        let prefix = format!("{base}{dir}/");
        let keys = list_keys(self.client().await?, &self.at.bucket, &prefix, None, |_| true, None)
            .await
            .map_err(|f| self.failure(f))?;
        let mut paths: Vec<String> = keys
            .iter()
            .filter_map(|k| k.strip_prefix(base.as_str()))
            .map(str::to_owned)
            .collect();
        paths.sort();
        Ok(paths)
    }

    async fn put_object_replace(&self, origin: &str, path: &str, bytes: &[u8]) -> Result<(), StoreError> {
        self.check_layout(origin).await?;
        let key = self.log_object_key(origin, path)?;
        let object = NewObject {
            bucket: &self.at.bucket,
            key: &key,
            content_type: content_type(path),
            content_encoding: None,
            metadata: Default::default(),
            retain_until: self.retain_until().await?,
        };
        put_replacing(self.client().await?, &object, bytes.to_vec())
            .await
            .map_err(|f| self.failure(f))
    }

    async fn get_object(&self, origin: &str, path: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let key = self.log_object_key(origin, path)?;
        self.get_if_there(&key).await
    }

    async fn list_names(&self, origin: &str, dir: &str) -> Result<Vec<String>, StoreError> {
        let prefix = format!("{}{dir}/", self.at.origin_prefix(origin));
        let direct = |k: &str| {
            k.strip_prefix(prefix.as_str())
                .is_some_and(|n| !n.is_empty() && !n.contains('/'))
        };
        let keys = list_keys(self.client().await?, &self.at.bucket, &prefix, Some("/"), direct, None)
            .await
            .map_err(|f| self.failure(f))?;
        let mut names: Vec<String> = keys
            .iter()
            .filter_map(|k| k.strip_prefix(prefix.as_str()))
            .map(str::to_owned)
            .collect();
        names.sort();
        Ok(names)
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
                    name: format!("s3://{}/{key}", self.at.bucket),
                    bytes,
                })
            })
            .buffered(FETCHES_IN_FLIGHT)
            .try_collect()
            .await
    }

    async fn note_keys(&self, origin: &str, from_seq: u64) -> Result<Vec<NameKey>, StoreError> {
        let prefix = self.at.origin_prefix(origin);
        let keys = self.keys_under(&prefix, from_seq, NameKey::from_note_name).await?;
        if keys.is_empty() && from_seq == 0 {
            self.refuse_legacy_layout(origin).await?;
        }
        Ok(keys)
    }

    async fn get_note(&self, origin: &str, key: NameKey) -> Result<Option<StoredNote>, StoreError> {
        let object = format!("{}{}", self.at.origin_prefix(origin), key.note_name());
        Ok(self.get_if_there(&object).await?.map(|bytes| StoredNote {
            name: format!("s3://{}/{object}", self.at.bucket),
            seq_in_name: Some(key.seq),
            bytes,
        }))
    }

    async fn log_keys(&self, origin: &str, dir: &str, from_size: u64) -> Result<Vec<NameKey>, StoreError> {
        let prefix = format!("{}{dir}/", self.at.origin_prefix(origin));
        self.keys_under(&prefix, from_size, NameKey::from_log_name).await
    }

    async fn head_seqs(&self, origin: &str) -> Result<Vec<u64>, StoreError> {
        let keys = self.origin_head_keys(origin).await?;
        let mut seqs: Vec<u64> = keys.iter().filter_map(|k| seq_from_name(k)).collect();
        seqs.sort_unstable();
        Ok(seqs)
    }

    async fn get_head(&self, origin: &str, seq: u64) -> Result<Option<StoredNote>, StoreError> {
        let key = format!("{}{}", self.at.origin_prefix(origin), head_name(seq));
        Ok(self.get_if_there(&key).await?.map(|bytes| StoredNote {
            name: format!("s3://{}/{key}", self.at.bucket),
            seq_in_name: Some(seq),
            bytes,
        }))
    }

    async fn check(&self) -> Result<String, StoreError> {
        let client = self.client().await?;
        client
            .head_bucket()
            .bucket(&self.at.bucket)
            .send()
            .await
            .map_err(|e| self.failure(classify(&format!("HeadBucket {}", self.at.bucket), &e)))?;
        let locked = self.object_lock().await?;
        // Written once ever and never deleted: S3 checks the permission before
        // the precondition, so the 412 of every later run proves write access too.
        let key = self.at.key(PROBE);
        let probe = NewObject {
            bucket: &self.at.bucket,
            key: &key,
            content_type: "text/plain; charset=utf-8",
            content_encoding: None,
            metadata: Default::default(),
            retain_until: None,
        };
        let body = b"chainship check: proves the anchor store is writable\n".to_vec();
        match upload_new(client, &probe, body, PartPlan::default()).await {
            Ok(()) => {}
            Err(f) if f.precondition_failed() => {}
            Err(f) => return Err(self.failure(f)),
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
        self.at.to_string()
    }
}
