//! `MemoryStore`: an object store in process memory, for unit tests of
//! what is built on [`AnchorStore`](super::AnchorStore) (publishing,
//! heads-disagree, verify) without a directory or a bucket. Keeps the
//! store's one rule: a name is written once and never replaced (but the
//! pointer). It is also the smallest example of a backend.

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;

use super::{ObjectStore, PutOutcome, StoreError};

#[derive(Default)]
pub struct MemoryStore {
    /// Key → bytes, in key order.
    objects: Mutex<BTreeMap<String, Vec<u8>>>,
}

impl MemoryStore {
    /// Writes or replaces a note, as someone with write access to the store could.
    pub fn plant(&self, origin: &str, name: &str, note: &[u8]) {
        self.put(format!("{origin}/{name}"), note);
    }

    /// Writes or replaces a transparency-log object, as an attacker could.
    pub fn plant_object(&self, origin: &str, path: &str, bytes: &[u8]) {
        self.put(format!("{origin}/{path}"), bytes);
    }

    /// Deletes every object of `origin` whose path starts with `prefix`, as
    /// someone with write access to the store could.
    pub fn delete_objects(&self, origin: &str, prefix: &str) {
        let start = format!("{origin}/{prefix}");
        self.objects
            .lock()
            .expect("store lock")
            .retain(|k, _| !k.starts_with(&start));
    }

    fn put(&self, key: String, bytes: &[u8]) {
        self.objects.lock().expect("store lock").insert(key, bytes.to_vec());
    }
}

#[async_trait]
impl ObjectStore for MemoryStore {
    async fn create(&self, key: &str, bytes: &[u8]) -> Result<PutOutcome, StoreError> {
        let mut objects = self.objects.lock().expect("store lock");
        if let Some(kept) = objects.get(key) {
            return Ok(PutOutcome::AlreadyThere(kept.clone()));
        }
        objects.insert(key.to_owned(), bytes.to_vec());
        Ok(PutOutcome::Created)
    }

    async fn replace(&self, key: &str, bytes: &[u8]) -> Result<(), StoreError> {
        self.put(key.to_owned(), bytes);
        Ok(())
    }

    async fn fetch(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.objects.lock().expect("store lock").get(key).cloned())
    }

    async fn scan(
        &self,
        prefix: &str,
        deep: bool,
        start_after: Option<&str>,
        each: &mut (dyn for<'n> FnMut(&'n str) + Send),
    ) -> Result<bool, StoreError> {
        let objects = self.objects.lock().expect("store lock");
        let from = start_after.unwrap_or(prefix);
        for key in objects
            .range::<str, _>((std::ops::Bound::Excluded(from), std::ops::Bound::Unbounded))
            .map(|(k, _)| k)
        {
            let Some(rel) = key.strip_prefix(prefix) else {
                break;
            };
            if deep || !rel.contains('/') {
                each(rel);
            }
        }
        Ok(start_after.is_none())
    }

    async fn probe(&self) -> Result<String, StoreError> {
        Ok("in memory".into())
    }

    fn location(&self) -> String {
        "memory:".into()
    }

    fn locate(&self, key: &str) -> String {
        format!("memory:{key}")
    }
}
