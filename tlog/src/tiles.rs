//! C2SP `tlog-tiles` (<https://c2sp.org/tlog-tiles>): the tree as hash
//! tiles of 256 and entry bundles, at `tile/<L>/<N>[.p/<W>]` and
//! `tile/entries/<N>[.p/<W>]` under the log's prefix.
//!
//! [`TileBuilder`] grows the tree an entry at a time keeping only its right
//! edge (at most 255 hashes a level and 255 entries), hands out each full
//! tile as it completes, and the partial tiles and root for the current
//! size on demand. [`TileSet`] answers proofs from tiles read back and
//! proves them against a root ([`TileSet::authenticate`]); [`with_proving_tiles`]
//! names the tiles that prove a set of others.

use chainship_core::{Error, integrity};
use std::collections::HashMap;

use crate::merkle::{CompactRange, Hash, RangeHashes, leaf_hash, node_hash, root_of};

/// Hashes per full tile (C2SP tlog-tiles).
pub const WIDTH: usize = 256;
/// The longest entry a bundle can hold (its length is a big-endian u16).
pub const MAX_ENTRY: usize = u16::MAX as usize;

/// `1234067` → `x001/x234/067`.
pub fn index_path(index: u64) -> String {
    let mut groups = vec![format!("{:03}", index % 1000)];
    let mut rest = index / 1000;
    while rest > 0 {
        groups.push(format!("x{:03}", rest % 1000));
        rest /= 1000;
    }
    groups.reverse();
    groups.join("/")
}

fn width_suffix(width: usize) -> String {
    if width == WIDTH {
        String::new()
    } else {
        format!(".p/{width}")
    }
}

/// The path of hash tile `index` at `level`, `width` hashes wide (256: full).
pub fn tile_path(level: u8, index: u64, width: usize) -> String {
    format!("tile/{level}/{}{}", index_path(index), width_suffix(width))
}

/// The path of entry bundle `index`, `width` entries wide (256: full).
pub fn entries_path(index: u64, width: usize) -> String {
    format!("tile/entries/{}{}", index_path(index), width_suffix(width))
}

/// How many hashes tile `index` at `level` holds in a tree of `size`
/// (0: the tile does not exist at that size).
pub fn tile_width(size: u64, level: u8, index: u64) -> usize {
    let row = size.checked_shr(8 * u32::from(level)).unwrap_or(0);
    // A hostile index (from a path) must not overflow: past the row is width 0.
    row.saturating_sub(index.saturating_mul(WIDTH as u64)).min(WIDTH as u64) as usize
}

/// What a tile path names: a hash tile of `level` (`None`: an entry
/// bundle), its index and width (256: full).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TileName {
    pub level: Option<u8>,
    pub index: u64,
    pub width: usize,
}

/// Parses `tile/<L>/<N>[.p/<W>]` or `tile/entries/<N>[.p/<W>]` exactly as
/// the spec writes them; `None` for any other path.
pub fn parse_tile_path(path: &str) -> Option<TileName> {
    let rest = path.strip_prefix("tile/")?;
    let (level, rest) = rest.split_once('/')?;
    let level = match level {
        "entries" => None,
        l if l == "0" || (!l.starts_with('0') && l.len() <= 2) => Some(l.parse::<u8>().ok().filter(|l| *l < 64)?),
        _ => return None,
    };
    let (index_part, width) = match rest.split_once(".p/") {
        None => (rest, WIDTH),
        Some((i, w)) => {
            let width: usize = w.parse().ok().filter(|w| (1..WIDTH).contains(w))?;
            (w == width.to_string()).then_some((i, width))?
        }
    };
    let groups: Vec<&str> = index_part.split('/').collect();
    let mut index: u64 = 0;
    for (n, g) in groups.iter().enumerate() {
        let digits = if n + 1 < groups.len() { g.strip_prefix('x')? } else { g };
        if digits.len() != 3 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        index = index.checked_mul(1000)?.checked_add(digits.parse().ok()?)?;
    }
    (index_path(index) == index_part).then_some(TileName { level, index, width })
}

/// A tile or entry bundle ready to store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tile {
    pub path: String,
    pub data: Vec<u8>,
}

/// The tree's right edge: the incomplete row of each tile level and the
/// entries of the incomplete bundle.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TileBuilder {
    size: u64,
    /// `rows[l]`: the hashes of the incomplete tile at level `l`.
    rows: Vec<Vec<Hash>>,
    /// The incomplete entry bundle, encoded.
    bundle: Vec<u8>,
    bundle_count: usize,
}

impl TileBuilder {
    /// The tree size the edge is at.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Appends the next entry; full tiles it completes go to `out`.
    pub fn push(&mut self, entry: &[u8], out: &mut Vec<Tile>) {
        assert!(entry.len() <= MAX_ENTRY, "entries are event hashes");
        self.bundle.extend_from_slice(&(entry.len() as u16).to_be_bytes());
        self.bundle.extend_from_slice(entry);
        self.bundle_count += 1;
        if self.bundle_count == WIDTH {
            out.push(Tile {
                path: entries_path(self.size / WIDTH as u64, WIDTH),
                data: std::mem::take(&mut self.bundle),
            });
            self.bundle_count = 0;
        }
        if self.rows.is_empty() {
            self.rows.push(Vec::with_capacity(WIDTH));
        }
        self.rows[0].push(leaf_hash(entry));
        self.size += 1;
        let mut level = 0;
        while self.rows[level].len() == WIDTH {
            let row = std::mem::take(&mut self.rows[level]);
            let index = (self.size >> (8 * level)) / WIDTH as u64 - 1;
            out.push(Tile {
                path: tile_path(level as u8, index, WIDTH),
                data: row.concat(),
            });
            let subtree = root_of(&row);
            self.rows[level] = row;
            self.rows[level].clear();
            if self.rows.len() == level + 1 {
                self.rows.push(Vec::with_capacity(WIDTH));
            }
            self.rows[level + 1].push(subtree);
            level += 1;
        }
    }

    /// The partial tiles and bundle the current size needs (none is empty).
    pub fn partial_tiles(&self) -> Vec<Tile> {
        let mut tiles = Vec::new();
        if self.bundle_count > 0 {
            tiles.push(Tile {
                path: entries_path(self.size / WIDTH as u64, self.bundle_count),
                data: self.bundle.clone(),
            });
        }
        for (level, row) in self.rows.iter().enumerate().filter(|(_, r)| !r.is_empty()) {
            let index = (self.size >> (8 * level)) / WIDTH as u64;
            tiles.push(Tile {
                path: tile_path(level as u8, index, row.len()),
                data: row.concat(),
            });
        }
        tiles
    }

    /// The root of the tree of the current size.
    pub fn root(&self) -> Hash {
        // One perfect subtree per set bit of the size, leftmost first: the
        // higher levels cover the earlier entries.
        let mut range = Vec::new();
        for row in self.rows.iter().rev() {
            let mut start = 0;
            for bit in (0..8).rev() {
                let n = 1usize << bit;
                if row.len() & n != 0 {
                    range.push(root_of(&row[start..start + n]));
                    start += n;
                }
            }
        }
        let mut hashes = range.iter().rev();
        match hashes.next() {
            None => crate::merkle::empty_root(),
            Some(last) => hashes.fold(*last, |acc, left| node_hash(left, &acc)),
        }
    }

    /// The last entry appended, if the incomplete bundle holds it.
    pub fn last_entry(&self) -> Option<&[u8]> {
        let mut at = 0;
        let mut last = None;
        while at + 2 <= self.bundle.len() {
            let len = u16::from_be_bytes([self.bundle[at], self.bundle[at + 1]]) as usize;
            last = self.bundle.get(at + 2..at + 2 + len);
            at += 2 + len;
        }
        last
    }

    /// The right edge as text, to persist (a few tens of KB at most).
    pub fn to_text(&self) -> String {
        let mut out = format!("size {}\n", self.size);
        for row in &self.rows {
            out.push_str(&format!("row {}\n", hex::encode(row.concat())));
        }
        out.push_str(&format!("bundle {}\n", hex::encode(&self.bundle)));
        out
    }

    /// Reads [`Self::to_text`] back, checking that its parts agree with
    /// its size and with each other.
    pub fn from_text(text: &str) -> Result<TileBuilder, Error> {
        let mut lines = text.lines();
        let size: u64 = lines
            .next()
            .and_then(|l| l.strip_prefix("size "))
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| integrity!("no size line"))?;
        let mut rows = Vec::new();
        let mut bundle = None;
        for line in lines {
            if let Some(hashes) = line.strip_prefix("row ") {
                let bytes = hex::decode(hashes).map_err(|_| integrity!("a row is not hex"))?;
                if bytes.len() % 32 != 0 || bytes.len() >= 32 * WIDTH {
                    return Err(integrity!("a row has a bad length"));
                }
                rows.push(bytes.chunks(32).map(|c| c.try_into().expect("32 bytes")).collect());
            } else if let Some(b) = line.strip_prefix("bundle ") {
                bundle = Some(hex::decode(b).map_err(|_| integrity!("the bundle is not hex"))?);
            } else {
                return Err(integrity!("unexpected line {line:?}"));
            }
        }
        let bundle = bundle.ok_or_else(|| integrity!("no bundle line"))?;
        let mut builder = TileBuilder {
            size,
            rows,
            bundle,
            bundle_count: 0,
        };
        builder.bundle_count = builder
            .bundle_entries()
            .ok_or_else(|| integrity!("the bundle is malformed"))?
            .len();
        let level0: Vec<Hash> = builder
            .bundle_entries()
            .unwrap_or_default()
            .iter()
            .map(|e| leaf_hash(e))
            .collect();
        let row_ok = |level: usize, row: &Vec<Hash>| row.len() as u64 == (size >> (8 * level)) % WIDTH as u64;
        if builder.bundle_count as u64 != size % WIDTH as u64
            || !builder.rows.iter().enumerate().all(|(l, r)| row_ok(l, r))
            || builder.rows.len() > 8
            || size.checked_shr(8 * builder.rows.len() as u32).unwrap_or(0) != 0
            || builder.rows.first().map_or(!level0.is_empty(), |r| *r != level0)
        {
            return Err(integrity!("its rows and bundle do not match its size"));
        }
        Ok(builder)
    }

    fn bundle_entries(&self) -> Option<Vec<&[u8]>> {
        parse_bundle(&self.bundle)
    }
}

/// The entries of an encoded bundle; `None` if it is malformed.
pub fn parse_bundle(data: &[u8]) -> Option<Vec<&[u8]>> {
    let mut entries = Vec::new();
    let mut at = 0;
    while at < data.len() {
        let len = u16::from_be_bytes([*data.get(at)?, *data.get(at + 1)?]) as usize;
        entries.push(data.get(at + 2..at + 2 + len)?);
        at += 2 + len;
    }
    Some(entries)
}

/// A tile a computation needs and does not have yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NeedTile {
    pub level: u8,
    pub index: u64,
    pub width: usize,
    pub path: String,
}

/// Hash tiles read back for a tree of one size, answering range hashes
/// and so proofs. A computation that lacks a tile fails with [`NeedTile`]:
/// the caller fetches it, [`TileSet::insert`]s it and runs again.
#[derive(Clone, Debug)]
pub struct TileSet {
    size: u64,
    tiles: HashMap<(u8, u64), HeldTile>,
}

/// A tile's hashes and, once a proof asks for one, every subtree hash
/// inside it (heights 1 to 7): thousands of proofs through one tile then
/// cost its 255 inner hashes once, not up to 127 each.
#[derive(Clone, Debug)]
struct HeldTile {
    hashes: Vec<Hash>,
    inner: std::sync::OnceLock<Vec<Hash>>,
}

impl HeldTile {
    fn new(hashes: Vec<Hash>) -> Self {
        HeldTile {
            hashes,
            inner: std::sync::OnceLock::new(),
        }
    }

    /// The subtree of height `within` (0 to 7) starting at hash `offset`
    /// (a multiple of 2^within); `None` past the tile's hashes.
    fn subtree(&self, within: u32, offset: usize) -> Option<Hash> {
        if within == 0 {
            return self.hashes.get(offset).copied();
        }
        if offset + (1 << within) > self.hashes.len() {
            return None;
        }
        // Heights 1..=7 one after the other, each the pairs of the one below.
        let inner = self.inner.get_or_init(|| {
            let mut inner = Vec::with_capacity(self.hashes.len());
            let (mut start, mut count) = (0, self.hashes.len());
            for height in 1..8 {
                let below = |i: usize| {
                    if height == 1 {
                        &self.hashes[i]
                    } else {
                        &inner[start + i]
                    }
                };
                let pairs: Vec<Hash> = (0..count / 2)
                    .map(|i| node_hash(below(2 * i), below(2 * i + 1)))
                    .collect();
                if height > 1 {
                    start += count;
                }
                count /= 2;
                inner.extend(pairs);
            }
            inner
        });
        let start: usize = (1..within).map(|h| self.hashes.len() >> h).sum();
        inner.get(start + (offset >> within)).copied()
    }
}

impl TileSet {
    /// An empty set for a tree of `size` leaves.
    pub fn new(size: u64) -> Self {
        TileSet {
            size,
            tiles: HashMap::new(),
        }
    }

    /// The tree size the set answers for.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Adds the bytes read for `need`; refuses bytes of the wrong length.
    pub fn insert(&mut self, need: &NeedTile, data: &[u8]) -> Result<(), Error> {
        if data.len() != need.width * 32 {
            return Err(integrity!(
                "{} holds {} bytes, not {} hashes",
                need.path,
                data.len(),
                need.width
            ));
        }
        let hashes = data.chunks(32).map(|c| c.try_into().expect("32 bytes")).collect();
        self.tiles.insert((need.level, need.index), HeldTile::new(hashes));
        Ok(())
    }

    /// The hash of the perfect subtree of height `height` at `index`.
    fn node(&self, height: u32, index: u64) -> Result<Hash, NeedTile> {
        let level = (height / 8) as u8;
        let within = height % 8;
        let first = index << within;
        let (tile, offset) = (first / WIDTH as u64, (first % WIDTH as u64) as usize);
        let width = tile_width(self.size, level, tile);
        let need = || NeedTile {
            level,
            index: tile,
            width,
            path: tile_path(level, tile, width),
        };
        self.tiles
            .get(&(level, tile))
            .ok_or_else(need)?
            .subtree(within, offset)
            .ok_or_else(need)
    }

    /// The root of the tree of this set's size.
    pub fn root(&mut self) -> Result<Hash, NeedTile> {
        if self.size == 0 {
            return Ok(crate::merkle::empty_root());
        }
        self.range_hash(0, self.size)
    }
}

impl TileSet {
    /// `MTH` of entries `start..end`, from the tiles held.
    fn range(&self, start: u64, end: u64) -> Result<Hash, NeedTile> {
        let n = end - start;
        if n.is_power_of_two() && start.is_multiple_of(n) {
            return self.node(n.trailing_zeros(), start / n);
        }
        let k = if n.is_power_of_two() {
            n / 2
        } else {
            crate::merkle::split_point(n)
        };
        Ok(node_hash(&self.range(start, start + k)?, &self.range(start + k, end)?))
    }

    /// The tiles held, as `(level, index)`, in order.
    pub fn held(&self) -> Vec<(u8, u64)> {
        let mut held: Vec<(u8, u64)> = self.tiles.keys().copied().collect();
        held.sort_unstable();
        held
    }

    /// The hashes of tile `index` at `level`, when held.
    pub fn hashes(&self, level: u8, index: u64) -> Option<&[Hash]> {
        self.tiles.get(&(level, index)).map(|t| t.hashes.as_slice())
    }

    /// What tile `index` at `level` is in this tree: its width and path.
    pub fn need(&self, level: u8, index: u64) -> NeedTile {
        let width = tile_width(self.size, level, index);
        NeedTile {
            level,
            index,
            width,
            path: tile_path(level, index, width),
        }
    }

    /// Proves that every tile held belongs to the tree of `root`, as a
    /// client that authenticates each tile it reads does (Go's
    /// `tlog.TileHashReader`, and every C2SP tiles client after it): the
    /// partial tiles of the right edge must give the root, and each full
    /// tile must hash to its entry in its parent tile, itself proven. The
    /// first tile that does not, and why.
    pub fn authenticate(&self, root: &Hash) -> Result<(), TileProblem> {
        if self.tiles.is_empty() {
            return Ok(());
        }
        let problem = |need: NeedTile, why: String| TileProblem { path: need.path, why };
        // The edge alone gives the root: each perfect subtree of the tree's
        // decomposition below a level's span lies in that level's partial tile.
        let mut edge = TileSet::new(self.size);
        for (level, index) in edge_tiles(self.size) {
            let need = self.need(level, index);
            let hashes = self
                .tiles
                .get(&(level, index))
                .ok_or_else(|| problem(need, "missing: it proves the tree's right edge".into()))?;
            edge.tiles.insert((level, index), HeldTile::new(hashes.hashes.clone()));
        }
        match edge.range(0, self.size) {
            Ok(got) if got == *root => {}
            Ok(_) => {
                let paths: Vec<String> = edge_tiles(self.size).map(|(l, i)| self.need(l, i).path).collect();
                return Err(TileProblem {
                    path: paths.join(", "),
                    why: "the right edge's tiles do not give the checkpoint's root (one of them is not the tree's)"
                        .into(),
                });
            }
            Err(need) => return Err(problem(need, "missing: it proves the tree's right edge".into())),
        }
        let edge: Vec<(u8, u64)> = edge_tiles(self.size).collect();
        for (level, index) in self.held() {
            let need = self.need(level, index);
            if need.width != WIDTH {
                if edge.contains(&(level, index)) {
                    continue; // proven above
                }
                return Err(problem(
                    need,
                    "is no tile of this tree (neither full nor its right edge)".into(),
                ));
            }
            let parent = self.need(level + 1, index / WIDTH as u64);
            let Some(above) = self.tiles.get(&(parent.level, parent.index)) else {
                return Err(problem(
                    need,
                    format!("missing {}, the tile that proves it", parent.path),
                ));
            };
            let entry = above.hashes.get((index % WIDTH as u64) as usize);
            if entry != Some(&root_of(&self.tiles[&(level, index)].hashes)) {
                return Err(problem(need, format!("does not hash to its entry in {}", parent.path)));
            }
        }
        Ok(())
    }
}

/// A tile that does not belong to the tree it is read for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TileProblem {
    pub path: String,
    pub why: String,
}

impl std::fmt::Display for TileProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.why)
    }
}

/// The partial tiles of the tree of `size`'s right edge, as `(level, index)`, lowest first.
pub fn edge_tiles(size: u64) -> impl Iterator<Item = (u8, u64)> {
    (0u8..8)
        .take_while(move |l| size.checked_shr(8 * u32::from(*l)).unwrap_or(0) > 0)
        .filter(move |l| !(size >> (8 * u32::from(*l))).is_multiple_of(WIDTH as u64))
        .map(move |l| (l, (size >> (8 * u32::from(l))) / WIDTH as u64))
}

/// `tiles` with what [`TileSet::authenticate`] (and any C2SP tiles client)
/// needs to prove them: every full tile's parent, up to the tree's right
/// edge, and the right edge's partial tile at every level.
pub fn with_proving_tiles(
    size: u64,
    tiles: impl IntoIterator<Item = (u8, u64)>,
) -> std::collections::BTreeSet<(u8, u64)> {
    let mut out: std::collections::BTreeSet<(u8, u64)> = edge_tiles(size).collect();
    for (mut level, mut index) in tiles {
        while out.insert((level, index)) && tile_width(size, level, index) == WIDTH {
            (level, index) = (level + 1, index / WIDTH as u64);
        }
    }
    out
}

impl RangeHashes for TileSet {
    type Error = NeedTile;

    fn range_hash(&mut self, start: u64, end: u64) -> Result<Hash, NeedTile> {
        self.range(start, end)
    }
}

/// Proofs from tiles held elsewhere: `inclusion_proof(i, n, &mut &set)`.
impl RangeHashes for &TileSet {
    type Error = NeedTile;

    fn range_hash(&mut self, start: u64, end: u64) -> Result<Hash, NeedTile> {
        self.range(start, end)
    }
}

/// The root of the tree of `entries` (tests, worked examples, small trees).
pub fn root_of_entries<'a>(entries: impl IntoIterator<Item = &'a [u8]>) -> Hash {
    let mut range = CompactRange::default();
    for e in entries {
        range.push_leaf(leaf_hash(e));
    }
    range.root()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merkle::{consistency_proof, inclusion_proof, verify_consistency, verify_inclusion};

    fn entry(i: u64) -> Vec<u8> {
        format!("{i:064x}").into_bytes()
    }

    fn build(n: u64) -> (TileBuilder, HashMap<String, Vec<u8>>) {
        let mut b = TileBuilder::default();
        let mut store = HashMap::new();
        let mut out = Vec::new();
        for i in 0..n {
            b.push(&entry(i), &mut out);
        }
        for t in out.into_iter().chain(b.partial_tiles()) {
            assert!(store.insert(t.path.clone(), t.data).is_none(), "{} twice", t.path);
        }
        (b, store)
    }

    fn answer(set: &mut TileSet, store: &HashMap<String, Vec<u8>>) -> Hash {
        loop {
            match set.root() {
                Ok(root) => return root,
                Err(need) => set.insert(&need, &store[&need.path]).unwrap(),
            }
        }
    }

    #[test]
    fn paths_follow_the_spec() {
        assert_eq!(index_path(1234067), "x001/x234/067");
        assert_eq!(index_path(0), "000");
        assert_eq!(index_path(1000), "x001/000");
        assert_eq!(tile_path(0, 5, 256), "tile/0/005");
        assert_eq!(tile_path(2, 0, 1), "tile/2/000.p/1");
        assert_eq!(entries_path(3, 17), "tile/entries/003.p/17");
        for (path, name) in [
            ("tile/0/x001/x234/067", Some((Some(0), 1_234_067, 256))),
            ("tile/2/000.p/1", Some((Some(2), 0, 1))),
            ("tile/entries/003.p/17", Some((None, 3, 17))),
            ("tile/0/001.p/256", None),
            ("tile/0/001.p/017", None),
            ("tile/00/001", None),
            ("tile/0/1", None),
            ("tile/0/x000/001", None),
            ("tile/64/000", None),
            ("checkpoint", None),
        ] {
            let parsed = parse_tile_path(path).map(|t| (t.level, t.index, t.width));
            assert_eq!(parsed, name, "{path}");
        }
        // The spec's example: a tree of 70,000.
        assert_eq!(tile_width(70_000, 0, 273), 112);
        assert_eq!(tile_width(70_000, 0, 272), 256);
        assert_eq!(tile_width(70_000, 1, 1), 17);
        assert_eq!(tile_width(70_000, 2, 0), 1);
        assert_eq!(tile_width(70_000, 3, 0), 0);
    }

    #[test]
    fn the_builder_matches_the_tree_at_every_size_and_the_tiles_answer_proofs() {
        let mut b = TileBuilder::default();
        let mut out = Vec::new();
        let entries: Vec<Vec<u8>> = (0..70_000).map(entry).collect();
        let mut range = CompactRange::default();
        for (i, e) in entries.iter().enumerate() {
            b.push(e, &mut out);
            range.push_leaf(leaf_hash(e));
            let size = i as u64 + 1;
            if size < 600 || size.is_multiple_of(9973) || size.is_power_of_two() {
                assert_eq!(b.root(), range.root(), "size {size}");
            }
        }
        let (b, store) = build(70_000);
        let names: Vec<String> = b.partial_tiles().into_iter().map(|t| t.path).collect();
        assert_eq!(
            names,
            [
                "tile/entries/273.p/112",
                "tile/0/273.p/112",
                "tile/1/001.p/17",
                "tile/2/000.p/1"
            ]
        );
        assert_eq!(store.len(), 273 * 2 + 1 + 4);
        let mut set = TileSet::new(70_000);
        let root = answer(&mut set, &store);
        assert_eq!(root, range.root());
        for index in [0u64, 1, 255, 256, 65_535, 65_536, 69_999] {
            let proof = loop {
                match inclusion_proof(index, 70_000, &mut set) {
                    Ok(p) => break p,
                    Err(need) => set.insert(&need, &store[&need.path]).unwrap(),
                }
            };
            assert!(verify_inclusion(
                index,
                70_000,
                &leaf_hash(&entry(index)),
                &proof,
                &root
            ));
        }
        let (_, small) = build(1000);
        let mut old = TileSet::new(1000);
        let old_root = answer(&mut old, &small);
        let proof = loop {
            match consistency_proof(1000, 70_000, &mut set) {
                Ok(p) => break p,
                Err(need) => set.insert(&need, &store[&need.path]).unwrap(),
            }
        };
        assert!(verify_consistency(1000, 70_000, &old_root, &root, &proof));
    }

    /// Every tile the proofs of `indexes` read, with what proves them.
    fn proving_set(size: u64, indexes: &[u64], store: &HashMap<String, Vec<u8>>) -> TileSet {
        let mut set = TileSet::new(size);
        for &index in indexes {
            while let Err(need) = inclusion_proof(index, size, &mut set) {
                set.insert(&need, &store[&need.path]).unwrap();
            }
        }
        let mut proving = TileSet::new(size);
        for (level, index) in with_proving_tiles(size, set.held()) {
            let need = proving.need(level, index);
            proving.insert(&need, &store[&need.path]).unwrap();
        }
        proving
    }

    #[test]
    fn the_tiles_a_proof_reads_and_those_that_prove_them_authenticate_and_answer_it() {
        for (size, indexes) in [
            (1u64, vec![0u64]),
            (256, vec![0, 255]),
            (257, vec![3, 256]),
            (65_536, vec![0, 65_535]),
            (70_001, vec![0, 300, 65_536, 70_000]),
        ] {
            let (b, store) = build(size);
            let set = proving_set(size, &indexes, &store);
            assert_eq!(set.authenticate(&b.root()), Ok(()), "size {size}");
            for &index in &indexes {
                // Answered from the proving set alone, without fetching.
                let proof = inclusion_proof(index, size, &mut &set).unwrap();
                assert!(verify_inclusion(
                    index,
                    size,
                    &leaf_hash(&entry(index)),
                    &proof,
                    &b.root()
                ));
            }
            // The right edge at every level, and each full tile's parent.
            for (level, index) in edge_tiles(size) {
                assert!(set.hashes(level, index).is_some(), "size {size}: edge {level}/{index}");
            }
            for (level, index) in set.held() {
                if tile_width(size, level, index) == WIDTH {
                    assert!(
                        set.hashes(level + 1, index / 256).is_some(),
                        "size {size}: parent of {level}/{index}"
                    );
                }
            }
        }
        let size = 70_001;
        assert_eq!(
            edge_tiles(size)
                .map(|(l, i)| tile_path(l, i, tile_width(size, l, i)))
                .collect::<Vec<_>>(),
            ["tile/0/273.p/113", "tile/1/001.p/17", "tile/2/000.p/1"]
        );
        assert_eq!(edge_tiles(65_536).collect::<Vec<_>>(), [(2, 0)]);
        assert_eq!(edge_tiles(0).count(), 0);
    }

    #[test]
    fn a_tile_that_is_not_the_tree_s_is_named() {
        let size = 70_001;
        let (b, store) = build(size);
        let root = b.root();
        let good = proving_set(size, &[0, 300, 65_536], &store);
        let edit = |level: u8, index: u64, at: usize| {
            let mut set = good.clone();
            set.tiles.get_mut(&(level, index)).unwrap().hashes[at][0] ^= 1;
            set.authenticate(&root).unwrap_err()
        };
        // A full tile: its parent names it; a parent: the edge above it; the edge: the root.
        assert_eq!(edit(0, 1, 17).path, "tile/0/001");
        assert!(edit(0, 1, 17).why.contains("tile/1/000"), "{:?}", edit(0, 1, 17));
        assert_eq!(edit(1, 0, 255).path, "tile/1/000");
        assert!(edit(0, 273, 0).why.contains("root"));
        assert!(edit(2, 0, 0).why.contains("root"));
        // Another tree's root.
        let (other, _) = build(size - 1);
        assert!(good.authenticate(&other.root()).is_err());
        // A full tile whose parent is missing, and a missing edge tile.
        for (level, index, named) in [(1u8, 0u64, "tile/1/000"), (0, 273, "tile/0/273.p/113")] {
            let mut set = good.clone();
            set.tiles.remove(&(level, index));
            let e = set.authenticate(&root).unwrap_err();
            assert!(e.path == named || e.why.contains(named), "{e:?}");
        }
        // A tile held at an index past the tree (a width of 0 there) is no tile of it.
        let mut past = good.clone();
        past.tiles.insert((0, u64::MAX / 2), HeldTile::new(vec![[0; 32]]));
        assert!(
            past.authenticate(&root)
                .unwrap_err()
                .why
                .contains("no tile of this tree")
        );
        assert_eq!(tile_width(size, 0, u64::MAX), 0);
        assert_eq!(tile_width(u64::MAX, 0, (1 << 56) + 11), 0);
        // A genuine tile beyond what a proof needs is still proven.
        let mut more = good.clone();
        let need = more.need(0, 100);
        more.insert(&need, &store[&need.path]).unwrap();
        assert_eq!(more.authenticate(&root), Ok(()));
        assert_eq!(TileSet::new(size).authenticate(&root), Ok(()));
    }

    #[test]
    fn the_right_edge_round_trips_and_a_tampered_one_is_refused() {
        for n in [0u64, 1, 255, 256, 257, 65_536, 70_001] {
            let (b, _) = build(n);
            let back = TileBuilder::from_text(&b.to_text()).unwrap();
            assert_eq!(back, b, "size {n}");
            assert_eq!(back.root(), b.root());
        }
        let (b, _) = build(300);
        assert_eq!(b.last_entry(), Some(&entry(299)[..]));
        let text = b.to_text();
        assert!(TileBuilder::from_text(&text.replace("size 300", "size 301")).is_err());
        let row0 = text.lines().nth(1).unwrap();
        let flipped = if row0.as_bytes()[4] == b'0' { "1" } else { "0" };
        let bad = text.replace(row0, &format!("row {flipped}{}", &row0[5..]));
        assert!(TileBuilder::from_text(&bad).is_err());
    }
}
