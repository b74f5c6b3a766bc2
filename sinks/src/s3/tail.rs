//! Following an S3 copy as it grows (`chainship monitor`): each poll lists
//! the origins' folders under the prefix, then each origin's keys after the
//! last one read (`StartAfter`: batch objects are named by zero-padded seq
//! range, so they list in seq order), and reads each new object as
//! `verify-export` does. What it cannot see: an object planted with a name
//! that sorts before what was read (the scheduled `verify-export` reads every
//! object).

use std::collections::BTreeMap;

use super::config::S3Config;
use super::objects::{batch_object_lines, fetch_object, parse_object_name, stray_message};
use crate::error::SinkError;
use crate::lines::NOT_A_RECORD;

pub struct S3Tail {
    cfg: S3Config,
    runtime: tokio::runtime::Runtime,
    client: Option<aws_sdk_s3::Client>,
    /// Origin → the last key read under its folder.
    next: BTreeMap<String, String>,
    shard: Option<crate::Shard>,
}

impl S3Tail {
    pub fn open(
        cfg: &S3Config,
        shard: Option<crate::Shard>,
        saved: BTreeMap<String, String>,
    ) -> Result<Self, SinkError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| SinkError::permanent(format!("cannot start the async runtime: {e}")))?;
        Ok(S3Tail {
            cfg: cfg.clone(),
            runtime,
            client: None,
            next: saved,
            shard,
        })
    }

    /// Reads every object added since the last poll, origin by origin.
    pub fn poll(&mut self, each: &mut crate::OnSharedRecord<'_>) -> Result<usize, SinkError> {
        let S3Tail {
            cfg,
            runtime,
            client,
            next,
            shard,
        } = self;
        runtime.block_on(async {
            let client = match client {
                Some(c) => c.clone(),
                None => client.insert(cfg.settings.client().await).clone(),
            };
            let at = &cfg.at;
            let fail = |f: chainship_s3::S3Failure| SinkError::transient(format!("{at}: {}", f.message));
            let root = at.key("");
            let root = if root.is_empty() {
                root
            } else {
                format!("{}/", root.trim_end_matches('/'))
            };
            let mut origins = Vec::new();
            chainship_s3::visit_folders(&client, &at.bucket, &root, &mut |folder| {
                let segment = folder[root.len().min(folder.len())..].trim_end_matches('/');
                if let Some(origin) = chainship_chain::origin_from_segment(segment) {
                    origins.push(origin);
                }
            })
            .await
            .map_err(fail)?;
            let mut taken = 0;
            for origin in origins.into_iter().filter(|o| shard.is_none_or(|s| s.takes_origin(o))) {
                let prefix = at.origin_prefix(&origin);
                let mut keys = Vec::new();
                let after = next.get(&origin).cloned();
                chainship_s3::visit_keys(&client, &at.bucket, &prefix, None, after.as_deref(), &mut |key| {
                    keys.push(key.to_owned())
                })
                .await
                .map_err(fail)?;
                for key in keys {
                    let rest = &key[prefix.len().min(key.len())..];
                    let own = !rest.contains('/') || (rest.starts_with("dt=") && rest.matches('/').count() == 1);
                    match parse_object_name(&key).filter(|_| own) {
                        Some(range) => {
                            let name = format!("s3://{}/{key}", at.bucket);
                            let body = fetch_object(&client, &at.bucket, &key).await.map_err(fail)?;
                            let mut on_line = |line: &[u8], place: &dyn Fn() -> String| {
                                taken += 1;
                                each(line, None, place)
                            };
                            if let Some(m) = batch_object_lines(&body, &range, &name, &mut on_line) {
                                each(NOT_A_RECORD, None, &|| m.clone());
                            }
                        }
                        None => {
                            let m = stray_message(&at.bucket, &key);
                            each(NOT_A_RECORD, None, &|| m.clone());
                        }
                    }
                    next.insert(origin.clone(), key);
                }
            }
            Ok(taken)
        })
    }

    /// Origin → the last key read.
    pub fn positions(&self) -> &BTreeMap<String, String> {
        &self.next
    }
}
