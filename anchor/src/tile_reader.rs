//! Reading the tree back out of an anchor store: runs a computation over
//! a [`TileSet`] of one tree size, fetching each tile it asks for
//! (full tiles are cached: they never change, and proofs share them).

use std::collections::HashMap;

use chainship_tlog::tiles::{NeedTile, TileSet, WIDTH};

use crate::store::{AnchorStore, StoreError};

/// Why a computation over the store's tiles could not finish.
#[derive(Debug)]
pub enum TileError {
    /// A tile the tree needs is not in the store.
    Missing(String),
    /// A tile has the wrong length.
    Malformed(String),
    /// The store could not be read.
    Store(StoreError),
}

impl std::fmt::Display for TileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TileError::Missing(path) => write!(f, "the store lacks {path}"),
            TileError::Malformed(why) => f.write_str(why),
            TileError::Store(e) => write!(f, "{e}"),
        }
    }
}

/// Full tiles kept for reuse (8 KiB each).
const MAX_CACHED: usize = 1024;

pub struct TileReader<'a> {
    store: &'a AnchorStore,
    origin: &'a str,
    full_tiles: HashMap<String, Vec<u8>>,
}

impl<'a> TileReader<'a> {
    pub fn new(store: &'a AnchorStore, origin: &'a str) -> Self {
        TileReader {
            store,
            origin,
            full_tiles: HashMap::new(),
        }
    }

    /// Runs `compute` on the tiles of the tree of `size`, fetching what it needs.
    pub async fn run<T>(
        &mut self,
        size: u64,
        mut compute: impl FnMut(&mut TileSet) -> Result<T, NeedTile>,
    ) -> Result<T, TileError> {
        let mut set = TileSet::new(size);
        loop {
            let need = match compute(&mut set) {
                Ok(value) => return Ok(value),
                Err(need) => need,
            };
            let bytes = match self.full_tiles.get(&need.path) {
                Some(bytes) => bytes.clone(),
                None => {
                    let bytes = self
                        .store
                        .get_object(self.origin, &need.path)
                        .await
                        .map_err(TileError::Store)?
                        .ok_or_else(|| TileError::Missing(need.path.clone()))?;
                    if need.width == WIDTH {
                        // Bounded: a pass over millions of checkpoints goes up the tree, not back.
                        if self.full_tiles.len() >= MAX_CACHED {
                            self.full_tiles.clear();
                        }
                        self.full_tiles.insert(need.path.clone(), bytes.clone());
                    }
                    bytes
                }
            };
            set.insert(&need, &bytes).map_err(|e| TileError::Malformed(e.message))?;
        }
    }
}
