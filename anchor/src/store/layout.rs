//! The anchor layout, once for every [`ObjectStore`]: under each origin's
//! prefix,
//!
//! ```text
//! <seq, 20 digits>.head                  a head
//! <seq>.<unix seconds, 20 digits>.head   a heartbeat (or a head beside a squatted name)
//! checkpoint                             the pointer tlog clients read first (replaced)
//! checkpoints/<size, 20 digits>[.<unix>] each published checkpoint
//! cosigned/<size>[.<unix>]               each checkpoint with its cosignatures
//! tile/<level>/<index>[.p/<width>]       C2SP tiles
//! tile/entries/<index>[.p/<width>]       entry bundles
//! redactions/<seq, 20 digits>            redaction statements (crate::redaction)
//! ```
//!
//! Names are checked here, before any key reaches a backend: a head's name
//! must be a head's, a log object's path one of the above.

use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};

use super::{
    Below, CHECKPOINTS_DIR, COSIGNED_DIR, Junk, LATEST_CHECKPOINT, Listed, NameKey, ObjectStore, PutOutcome,
    REDACTIONS_DIR, StoreError, StoredNote, head_name, listing_start, note_seq, seq_from_name, valid_log_path,
};

/// Notes fetched at once by `list`.
const FETCHES_IN_FLIGHT: usize = 16;

fn not_a_head(name: &str) -> StoreError {
    StoreError::permanent(format!("anchor store: {name:?} is not a head's name"))
}

fn not_a_log_path(path: &str) -> StoreError {
    StoreError::permanent(format!("anchor store: {path:?} is not a log object's path"))
}

/// The names directly under `prefix` that `parse` accepts with a seq of
/// `from` or more, sorted; and those below `from`, when the store listed
/// them anyway.
async fn keys_under<S: ObjectStore + ?Sized>(
    store: &S,
    prefix: &str,
    from: u64,
    parse: fn(&str) -> Option<NameKey>,
    also_kept: &[&str],
) -> Result<Listed, StoreError> {
    let start_after = listing_start(from).map(|s| format!("{prefix}{s}"));
    let (mut keys, mut below, mut junk) = (Vec::new(), Below::default(), Junk::default());
    let everything = store
        .scan(prefix, false, start_after.as_deref(), &mut |name| match parse(name) {
            Some(key) if key.seq >= from => keys.push(key),
            Some(_) => below.add(name),
            None if name.is_empty() || also_kept.contains(&name.trim_end_matches('/')) => {}
            None => junk.add(name.to_owned()),
        })
        .await?;
    keys.sort_unstable();
    Ok(Listed {
        keys,
        below: everything.then_some(below),
        junk,
    })
}

/// What else lives directly under an origin's prefix, beside its notes.
const ORIGIN_DIR_NAMES: &[&str] = &[LATEST_CHECKPOINT, CHECKPOINTS_DIR, COSIGNED_DIR, REDACTIONS_DIR, "tile"];

/// The names directly under `prefix`, filtered by `keep`, sorted.
async fn names_under<S: ObjectStore + ?Sized>(
    store: &S,
    prefix: &str,
    keep: fn(&str) -> bool,
) -> Result<Vec<String>, StoreError> {
    let mut names = Vec::new();
    store
        .scan(prefix, false, None, &mut |name| {
            if !name.is_empty() && !name.contains('/') && keep(name) {
                names.push(name.to_owned());
            }
        })
        .await?;
    names.sort();
    Ok(names)
}

/// One origin as one listing of the whole store shows it, from names alone
/// (nothing read: a name proves nothing, the notes must still be judged).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OriginNames {
    /// Heads and heartbeats kept, and the newest by name (seq, then time).
    pub notes: u64,
    pub newest_note: Option<NameKey>,
    /// The newest kept checkpoint's name, and the newest cosigned one's.
    pub newest_checkpoint: Option<NameKey>,
    pub newest_cosigned: Option<NameKey>,
}

impl OriginNames {
    /// Whether the origin has published anything a copy must hold: a head
    /// or a checkpoint (a first publication cut short leaves a checkpoint
    /// and no head; deleting the heads leaves the checkpoints).
    pub fn publishes(&self) -> bool {
        self.notes > 0 || self.newest_checkpoint.is_some()
    }
}

/// The anchor layout over one [`ObjectStore`] (as Tessera's log resource
/// store over its object store): heads and heartbeats, checkpoints,
/// cosigned checkpoints, tiles and the pointer, by origin. Every key a
/// backend sees is made, and checked, here.
pub struct AnchorStore {
    objects: Arc<dyn ObjectStore>,
}

impl AnchorStore {
    /// The layout over `objects`.
    pub fn new(objects: impl ObjectStore + 'static) -> AnchorStore {
        AnchorStore {
            objects: Arc::new(objects),
        }
    }

    /// Writes `note` under `name` (a [`head_name`] or [`heartbeat_name`])
    /// unless a note is already there.
    pub async fn put_new(&self, origin: &str, name: &str, note: &[u8]) -> Result<PutOutcome, StoreError> {
        if note_seq(name).is_none() || name.contains('/') {
            return Err(not_a_head(name));
        }
        self.objects
            .create(&format!("{}{name}", self.objects.origin_prefix(origin)), note)
            .await
    }

    /// Every note kept for `origin`, heads and heartbeats, sorted by name (so by seq).
    pub async fn list(&self, origin: &str) -> Result<Vec<StoredNote>, StoreError> {
        let prefix = self.objects.origin_prefix(origin);
        let names = names_under(self.objects.as_ref(), &prefix, |n| note_seq(n).is_some()).await?;
        // Notes are small and many: several fetched at once, in name order.
        let fetched: Vec<Option<StoredNote>> = futures::stream::iter(names)
            .map(|name| {
                let key = format!("{prefix}{name}");
                async move {
                    // A note removed between listing and reading is simply not there.
                    Ok::<_, StoreError>(self.objects.fetch(&key).await?.map(|bytes| StoredNote {
                        name: self.objects.locate(&key),
                        seq_in_name: note_seq(&name),
                        bytes,
                    }))
                }
            })
            .buffered(FETCHES_IN_FLIGHT)
            .try_collect()
            .await?;
        Ok(fetched.into_iter().flatten().collect())
    }

    /// The seqs heads are kept for, ascending, from the names alone (no head
    /// is read: a name proves nothing, see [`crate::highest_verified_head`]).
    pub async fn head_seqs(&self, origin: &str) -> Result<Vec<u64>, StoreError> {
        let names = names_under(self.objects.as_ref(), &self.objects.origin_prefix(origin), |n| {
            seq_from_name(n).is_some()
        })
        .await?;
        Ok(names.iter().filter_map(|n| seq_from_name(n)).collect())
    }

    /// The notes kept for `origin` with a seq of `from_seq` or more, by
    /// name alone (nothing is read), sorted by seq (a store lists from
    /// `from_seq` on where it can: S3 `StartAfter`); and which notes are kept below `from_seq`
    /// ([`Below`]) when the store can tell without reading more (a
    /// directory names them all anyway; S3, listing from `from_seq` on,
    /// cannot: `None`), and the names that are no part of the layout.
    pub async fn note_keys(&self, origin: &str, from_seq: u64) -> Result<Listed, StoreError> {
        let prefix = self.objects.origin_prefix(origin);
        let mut listed = keys_under(
            self.objects.as_ref(),
            &prefix,
            from_seq,
            NameKey::from_note_name,
            ORIGIN_DIR_NAMES,
        )
        .await?;
        listed.junk.first.iter_mut().for_each(|n| n.insert_str(0, &prefix));
        Ok(listed)
    }

    /// The checkpoints (`dir` = [`CHECKPOINTS_DIR`] or [`COSIGNED_DIR`]) of
    /// a size of `from_size` or more, by name alone, sorted by size; and
    /// which are kept below `from_size` when the store can tell (as
    /// [`Self::note_keys`]).
    pub async fn log_keys(&self, origin: &str, dir: &str, from_size: u64) -> Result<Listed, StoreError> {
        let prefix = format!("{}{dir}/", self.objects.origin_prefix(origin));
        let mut listed = keys_under(self.objects.as_ref(), &prefix, from_size, NameKey::from_log_name, &[]).await?;
        listed.junk.first.iter_mut().for_each(|n| n.insert_str(0, &prefix));
        Ok(listed)
    }

    /// The note kept under `key`, if it is (still) there.
    pub async fn get_note(&self, origin: &str, key: NameKey) -> Result<Option<StoredNote>, StoreError> {
        let object = format!("{}{}", self.objects.origin_prefix(origin), key.note_name());
        Ok(self.objects.fetch(&object).await?.map(|bytes| StoredNote {
            name: self.objects.locate(&object),
            seq_in_name: Some(key.seq),
            bytes,
        }))
    }

    /// The notes kept under `keys`, in order ([`Self::get_note`] of each,
    /// read as the store reads many at once).
    pub async fn get_notes(&self, origin: &str, keys: &[NameKey]) -> Result<Vec<Option<StoredNote>>, StoreError> {
        let prefix = self.objects.origin_prefix(origin);
        let objects: Vec<String> = keys.iter().map(|k| format!("{prefix}{}", k.note_name())).collect();
        let read = self.objects.fetch_many(&objects).await?;
        Ok(read
            .into_iter()
            .zip(keys.iter().zip(&objects))
            .map(|(bytes, (key, object))| {
                bytes.map(|bytes| StoredNote {
                    name: self.objects.locate(object),
                    seq_in_name: Some(key.seq),
                    bytes,
                })
            })
            .collect())
    }

    /// The transparency-log objects at `paths` under the origin, in order
    /// ([`Self::get_object`] of each, read as the store reads many at once).
    pub async fn get_objects(&self, origin: &str, paths: &[String]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        if let Some(path) = paths.iter().find(|p| !valid_log_path(p)) {
            return Err(not_a_log_path(path));
        }
        let prefix = self.objects.origin_prefix(origin);
        let objects: Vec<String> = paths.iter().map(|p| format!("{prefix}{p}")).collect();
        self.objects.fetch_many(&objects).await
    }

    /// The note kept for `seq`, if there is one.
    pub async fn get_head(&self, origin: &str, seq: u64) -> Result<Option<StoredNote>, StoreError> {
        let key = format!("{}{}", self.objects.origin_prefix(origin), head_name(seq));
        Ok(self.objects.fetch(&key).await?.map(|bytes| StoredNote {
            name: self.objects.locate(&key),
            seq_in_name: Some(seq),
            bytes,
        }))
    }

    /// Writes `bytes` at `path` under the origin (a transparency-log object:
    /// a tile, an entry bundle or a kept checkpoint, see [`valid_log_path`])
    /// unless something is already there.
    pub async fn put_object_new(&self, origin: &str, path: &str, bytes: &[u8]) -> Result<PutOutcome, StoreError> {
        if !valid_log_path(path) {
            return Err(not_a_log_path(path));
        }
        self.objects
            .create(&format!("{}{path}", self.objects.origin_prefix(origin)), bytes)
            .await
    }

    /// [`Self::put_object_new`] for many objects at once (tiles):
    /// each outcome in order.
    pub async fn put_objects_new(
        &self,
        origin: &str,
        objects: &[(&str, &[u8])],
    ) -> Result<Vec<PutOutcome>, StoreError> {
        let prefix = self.objects.origin_prefix(origin);
        let mut keyed = Vec::with_capacity(objects.len());
        for (path, bytes) in objects {
            if !valid_log_path(path) {
                return Err(not_a_log_path(path));
            }
            keyed.push((format!("{prefix}{path}"), *bytes));
        }
        self.objects.create_many(&keyed).await
    }

    /// Writes `bytes` at `path`, replacing what is there: only for
    /// [`LATEST_CHECKPOINT`], the pointer standard tlog clients read first
    /// (the kept checkpoints themselves are write-once).
    pub async fn put_object_replace(&self, origin: &str, path: &str, bytes: &[u8]) -> Result<(), StoreError> {
        if !valid_log_path(path) {
            return Err(not_a_log_path(path));
        }
        self.objects
            .replace(&format!("{}{path}", self.objects.origin_prefix(origin)), bytes)
            .await
    }

    /// The object at `path` under the origin, if there is one.
    pub async fn get_object(&self, origin: &str, path: &str) -> Result<Option<Vec<u8>>, StoreError> {
        if !valid_log_path(path) {
            return Err(not_a_log_path(path));
        }
        self.objects
            .fetch(&format!("{}{path}", self.objects.origin_prefix(origin)))
            .await
    }

    /// The names directly under the directory `dir` of the origin, sorted.
    pub async fn list_names(&self, origin: &str, dir: &str) -> Result<Vec<String>, StoreError> {
        names_under(
            self.objects.as_ref(),
            &format!("{}{dir}/", self.objects.origin_prefix(origin)),
            |_| true,
        )
        .await
    }

    /// Every object's path under the directory `dir` of the origin, at any
    /// depth, relative to the origin (`tile/0/x001/002`), sorted.
    pub async fn list_paths(&self, origin: &str, dir: &str) -> Result<Vec<String>, StoreError> {
        let prefix = format!("{}{dir}/", self.objects.origin_prefix(origin));
        let mut paths = Vec::new();
        self.objects
            .scan(&prefix, true, None, &mut |rel| paths.push(format!("{dir}/{rel}")))
            .await?;
        paths.sort();
        Ok(paths)
    }

    /// Every origin the store keeps anything for, in one deep listing of the
    /// whole store (a fleet's store holds thousands: never one listing per
    /// origin), with what its names say; and the names under no origin.
    /// Memory follows the number of origins, not of objects.
    pub async fn origins(&self) -> Result<(std::collections::BTreeMap<String, OriginNames>, Junk), StoreError> {
        let mut origins: std::collections::BTreeMap<String, OriginNames> = Default::default();
        let mut junk = Junk::default();
        let objects = self.objects.as_ref();
        objects
            .scan("", true, None, &mut |key| {
                let Some((origin, rest)) = objects.split_origin(key) else {
                    if !key.is_empty() && !key.starts_with('.') {
                        junk.add(key.to_owned());
                    }
                    return;
                };
                let names = origins.entry(origin).or_default();
                let newest = |at: &mut Option<NameKey>, name: &str| {
                    if let Some(k) = NameKey::from_log_name(name) {
                        *at = (*at).max(Some(k));
                    }
                };
                match rest.split_once('/') {
                    None => {
                        if let Some(k) = NameKey::from_note_name(rest) {
                            names.notes += 1;
                            names.newest_note = names.newest_note.max(Some(k));
                        }
                    }
                    Some((CHECKPOINTS_DIR, name)) => newest(&mut names.newest_checkpoint, name),
                    Some((COSIGNED_DIR, name)) => newest(&mut names.newest_cosigned, name),
                    Some(_) => {}
                }
            })
            .await?;
        Ok((origins, junk))
    }

    /// Checks that the store is reachable and writable, writing no head.
    pub async fn check(&self) -> Result<String, StoreError> {
        self.objects.probe().await
    }

    /// See [`ObjectStore::ready`].
    pub async fn ready(&self) -> Result<(), StoreError> {
        self.objects.ready().await
    }

    /// A short description for logs (no secrets).
    pub fn describe(&self) -> String {
        self.objects.location()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::MemoryStore;
    use crate::store::{head_name, heartbeat_name};

    #[tokio::test]
    async fn one_listing_names_every_origin_with_its_newest_names() {
        let store = MemoryStore::default();
        // Nested origins, each with its own notes and log objects.
        for (origin, seqs) in [("team/a", [3u64, 9]), ("team/a/b", [5, 7]), ("solo", [1, 2])] {
            for seq in seqs {
                store.plant(origin, &head_name(seq), b"note");
                store.plant_object(origin, &format!("checkpoints/{seq:020}"), b"cp");
            }
        }
        store.plant("team/a", &heartbeat_name(9, 1_700_000_000), b"beat");
        store.plant_object("team/a", &format!("cosigned/{:020}", 3), b"cosigned");
        store.plant_object("team/a", "tile/0/000", b"tile");
        // An origin with only tiles is still one the store keeps.
        store.plant_object("tiles-only", "tile/0/000", b"tile");
        store.plant("bad origin", &head_name(1), b"x");

        let (origins, junk) = store.origins().await.unwrap();
        let names: Vec<&str> = origins.keys().map(String::as_str).collect();
        assert_eq!(names, ["solo", "team/a", "team/a/b", "tiles-only"]);
        let a = &origins["team/a"];
        assert_eq!(a.notes, 3);
        assert_eq!(
            a.newest_note,
            NameKey::from_note_name(&heartbeat_name(9, 1_700_000_000))
        );
        assert_eq!(a.newest_checkpoint.map(|k| k.seq), Some(9));
        assert_eq!(a.newest_cosigned.map(|k| k.seq), Some(3));
        assert_eq!(origins["team/a/b"].newest_note.map(|k| k.seq), Some(7));
        assert_eq!(origins["tiles-only"].notes, 0);
        assert_eq!(junk.count, 1, "a key under no usable origin is junk");
    }
}
