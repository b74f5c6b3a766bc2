//! `MemoryStore`: an anchor store in process memory, for unit tests of
//! what is built on [`AnchorStore`] (publishing, heads-disagree, verify)
//! without a directory or a bucket. Keeps the store's one rule: a name is
//! written once and never replaced.

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;

use super::{AnchorStore, PutOutcome, StoreError, StoredNote, head_name, note_seq, seq_from_name, valid_log_path};

#[derive(Default)]
pub struct MemoryStore {
    /// (origin, name) → note bytes, in name order.
    notes: Mutex<BTreeMap<(String, String), Vec<u8>>>,
    /// (origin, path) → transparency-log object bytes.
    objects: Mutex<BTreeMap<(String, String), Vec<u8>>>,
}

impl MemoryStore {
    /// Writes or replaces a note, as someone with write access to the store could.
    pub fn plant(&self, origin: &str, name: &str, note: &[u8]) {
        self.notes
            .lock()
            .expect("store lock")
            .insert((origin.to_owned(), name.to_owned()), note.to_vec());
    }

    /// Writes or replaces a transparency-log object, as an attacker could.
    pub fn plant_object(&self, origin: &str, path: &str, bytes: &[u8]) {
        self.objects
            .lock()
            .expect("store lock")
            .insert((origin.to_owned(), path.to_owned()), bytes.to_vec());
    }

    fn stored(&self, origin: &str, name: &str, bytes: &[u8]) -> StoredNote {
        StoredNote {
            name: format!("memory:{origin}/{name}"),
            seq_in_name: note_seq(name),
            bytes: bytes.to_vec(),
        }
    }
}

#[async_trait]
impl AnchorStore for MemoryStore {
    async fn put_new(&self, origin: &str, name: &str, note: &[u8]) -> Result<PutOutcome, StoreError> {
        if note_seq(name).is_none() {
            return Err(StoreError::permanent(format!(
                "anchor store: {name:?} is not a head's name"
            )));
        }
        let mut notes = self.notes.lock().expect("store lock");
        let key = (origin.to_owned(), name.to_owned());
        if let Some(kept) = notes.get(&key) {
            return Ok(PutOutcome::AlreadyThere(kept.clone()));
        }
        notes.insert(key, note.to_vec());
        Ok(PutOutcome::Created)
    }

    async fn list(&self, origin: &str) -> Result<Vec<StoredNote>, StoreError> {
        let notes = self.notes.lock().expect("store lock");
        Ok(notes
            .iter()
            .filter(|((o, _), _)| o == origin)
            .map(|((o, name), bytes)| self.stored(o, name, bytes))
            .collect())
    }

    async fn head_seqs(&self, origin: &str) -> Result<Vec<u64>, StoreError> {
        let notes = self.notes.lock().expect("store lock");
        Ok(notes
            .keys()
            .filter(|(o, _)| o == origin)
            .filter_map(|(_, name)| seq_from_name(name))
            .collect())
    }

    async fn get_head(&self, origin: &str, seq: u64) -> Result<Option<StoredNote>, StoreError> {
        let name = head_name(seq);
        let notes = self.notes.lock().expect("store lock");
        Ok(notes
            .get(&(origin.to_owned(), name.clone()))
            .map(|bytes| self.stored(origin, &name, bytes)))
    }

    async fn put_object_new(&self, origin: &str, path: &str, bytes: &[u8]) -> Result<PutOutcome, StoreError> {
        if !valid_log_path(path) {
            return Err(StoreError::permanent(format!(
                "anchor store: {path:?} is not a log object's path"
            )));
        }
        let mut objects = self.objects.lock().expect("store lock");
        let key = (origin.to_owned(), path.to_owned());
        if let Some(kept) = objects.get(&key) {
            return Ok(PutOutcome::AlreadyThere(kept.clone()));
        }
        objects.insert(key, bytes.to_vec());
        Ok(PutOutcome::Created)
    }

    async fn put_object_replace(&self, origin: &str, path: &str, bytes: &[u8]) -> Result<(), StoreError> {
        self.plant_object(origin, path, bytes);
        Ok(())
    }

    async fn get_object(&self, origin: &str, path: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let objects = self.objects.lock().expect("store lock");
        Ok(objects.get(&(origin.to_owned(), path.to_owned())).cloned())
    }

    async fn list_names(&self, origin: &str, dir: &str) -> Result<Vec<String>, StoreError> {
        let objects = self.objects.lock().expect("store lock");
        let prefix = format!("{dir}/");
        Ok(objects
            .keys()
            .filter(|(o, _)| o == origin)
            .filter_map(|(_, p)| p.strip_prefix(&prefix))
            .filter(|rest| !rest.contains('/'))
            .map(str::to_owned)
            .collect())
    }

    async fn list_paths(&self, origin: &str, dir: &str) -> Result<Vec<String>, StoreError> {
        let objects = self.objects.lock().expect("store lock");
        let prefix = format!("{dir}/");
        Ok(objects
            .keys()
            .filter(|(o, p)| o == origin && p.starts_with(&prefix))
            .map(|(_, p)| p.clone())
            .collect())
    }

    async fn check(&self) -> Result<String, StoreError> {
        Ok("in memory".into())
    }

    fn describe(&self) -> String {
        "memory:".into()
    }
}
