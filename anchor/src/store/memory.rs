//! `MemoryStore`: an object store in process memory, for unit tests of
//! what is built on [`AnchorStore`](super::AnchorStore) (publishing,
//! heads-disagree, verify) without a directory or a bucket. Keeps the
//! store's one rule: a name is written once and never replaced (but the
//! pointer). It is also the smallest example of a backend.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::{AnchorStore, ObjectStore, PutOutcome, StoreError};

/// The objects, shared by the store and the layout over it.
#[derive(Clone, Default)]
struct Objects(Arc<Mutex<BTreeMap<String, Vec<u8>>>>);

/// The anchor layout over objects in memory (it derefs to the
/// [`AnchorStore`]), with what an attacker could do to them beside.
pub struct MemoryStore {
    objects: Objects,
    layout: AnchorStore,
}

impl Default for MemoryStore {
    fn default() -> Self {
        let objects = Objects::default();
        MemoryStore {
            layout: AnchorStore::new(objects.clone()),
            objects,
        }
    }
}

impl std::ops::Deref for MemoryStore {
    type Target = AnchorStore;
    fn deref(&self) -> &AnchorStore {
        &self.layout
    }
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
        self.objects.lock().retain(|k, _| !k.starts_with(&start));
    }

    fn put(&self, key: String, bytes: &[u8]) {
        self.objects.put(key, bytes);
    }
}

impl Objects {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Vec<u8>>> {
        self.0.lock().expect("store lock")
    }

    fn put(&self, key: String, bytes: &[u8]) {
        self.lock().insert(key, bytes.to_vec());
    }
}

#[async_trait]
impl ObjectStore for Objects {
    async fn create(&self, key: &str, bytes: &[u8]) -> Result<PutOutcome, StoreError> {
        let mut objects = self.lock();
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
        Ok(self.lock().get(key).cloned())
    }

    async fn scan(
        &self,
        prefix: &str,
        deep: bool,
        start_after: Option<&str>,
        each: &mut (dyn for<'n> FnMut(&'n str) + Send),
    ) -> Result<bool, StoreError> {
        let objects = self.lock();
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
