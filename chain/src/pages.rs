//! Reading the events table's B-tree pages straight from the database file,
//! for when SQLite's view of the table is the file alone.
//!
//! A walk spends most of its reading time in SQLite's virtual machine and
//! column calls, not in the file. When the table is a rowid table whose
//! `seq` is the rowid, and the snapshot a read transaction holds has no
//! WAL frames (the `-wal` is empty or absent; or the database is in
//! rollback mode), every row SQLite would return is in the file's pages,
//! and the file cannot change while that transaction is held: in WAL mode
//! a reader on the file alone blocks every checkpoint, in rollback mode its
//! shared lock blocks every writer. [`crate::db::EventDb`] takes that
//! transaction and checks those conditions; this module reads the pages
//! (file format: <https://www.sqlite.org/fileformat2.html>).
//!
//! It only reads what it fully understands: leaf and interior table pages,
//! records of text fields in UTF-8, overflow chains. Anything else (a field
//! that is not text, a record shorter than the table, a page that does not
//! parse, rowids out of order) ends the visit with [`Outcome::Unsupported`]
//! at the last row it handed over, and the caller reads on through SQLite,
//! which then judges that row exactly as it always did. So the rows, and
//! every error, are SQLite's; a property test compares the two.

use std::fs::File;
use std::os::unix::fs::FileExt;

use crate::event::EventRef;

/// Deeper than any real table b-tree (SQLite's own bound is 20).
const MAX_DEPTH: usize = 24;

/// Where the table is in the file, and which record columns hold the fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    pub page_size: usize,
    /// The root page of the events table.
    pub root: u32,
    /// The schema cookie the layout was read under: a schema change
    /// (VACUUM, ALTER) bumps it, and the layout is no longer trusted.
    pub schema_cookie: u32,
    /// Record column of run_id, step_id, at, type, payload_json, hash.
    pub fields: [usize; 6],
    /// Record column of the rowid alias (stored as NULL).
    pub seq: usize,
}

/// How a visit ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The table ended, or `max` rows were visited.
    End,
    /// The visitor asked to stop.
    Stopped,
    /// A row or page this reader does not handle: read on through SQLite
    /// after the last row visited.
    Unsupported,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Visit {
    pub visited: usize,
    /// The last rowid visited (`after` when none).
    pub last: u64,
    pub outcome: Outcome,
}

/// The reader: the file and reusable page buffers.
pub(crate) struct TablePages {
    file: File,
    layout: Layout,
    /// Interior pages on the path to the current leaf (bytes, page number),
    /// with the index of the next child to descend into (the cell count:
    /// the right-most child).
    path: Vec<(Vec<u8>, u32, usize)>,
    leaf: Vec<u8>,
    /// A record that spills into overflow pages, put back together.
    spilled: Vec<u8>,
    overflow: Vec<u8>,
    spare: Vec<Vec<u8>>,
}

/// Something that does not parse as expected: hand over to SQLite.
struct Unsupported;

type Parsed<T> = Result<T, Unsupported>;

impl TablePages {
    pub(crate) fn new(file: File, layout: Layout) -> TablePages {
        TablePages {
            file,
            layout,
            path: Vec::new(),
            leaf: Vec::new(),
            spilled: Vec::new(),
            overflow: Vec::new(),
            spare: Vec::new(),
        }
    }

    /// Whether the file's header still matches the layout (page size,
    /// UTF-8, schema cookie). Read under the caller's transaction.
    pub(crate) fn header_matches(&self) -> bool {
        let mut header = [0u8; 100];
        if self.file.read_exact_at(&mut header, 0).is_err() || &header[..16] != b"SQLite format 3\0" {
            return false;
        }
        let page_size = match u16::from_be_bytes([header[16], header[17]]) {
            1 => 65_536,
            n => usize::from(n),
        };
        let reserved = usize::from(header[20]);
        page_size == self.layout.page_size
            && reserved == 0
            && be32(&header, 40) == Some(self.layout.schema_cookie)
            && be32(&header, 56) == Some(1)
    }

    /// Calls `visit` with each row of rowid above `after`, in rowid order,
    /// up to `max`, until it returns false.
    pub(crate) fn visit(&mut self, after: u64, max: usize, visit: &mut dyn FnMut(&EventRef<'_>) -> bool) -> Visit {
        let mut out = Visit {
            visited: 0,
            last: after,
            outcome: Outcome::End,
        };
        if max == 0 {
            return out;
        }
        if self.walk(after, max, visit, &mut out).is_err() {
            out.outcome = Outcome::Unsupported;
        }
        // Give the buffers back for the next visit.
        for (buf, _, _) in self.path.drain(..) {
            self.spare.push(buf);
        }
        out
    }

    fn walk(
        &mut self,
        after: u64,
        max: usize,
        visit: &mut dyn FnMut(&EventRef<'_>) -> bool,
        out: &mut Visit,
    ) -> Parsed<()> {
        // A real visit reads a page per handful of rows; corrupt links that
        // loop through empty pages end here.
        let mut budget = 64 + 2 * max;
        let mut page_no = self.layout.root;
        // Until the first leaf, each level is searched for the first row past `after`.
        let mut seeking = true;
        loop {
            budget = budget.checked_sub(1).ok_or(Unsupported)?;
            let mut buf = self.spare.pop().unwrap_or_default();
            let read = read_page(&self.file, self.layout.page_size, page_no, &mut buf);
            let page = Page::of(&buf, page_no, read)?;
            match page.kind {
                PageKind::Interior => {
                    let start = if seeking { first_child_past(&page, after)? } else { 0 };
                    let child = page.child(start)?;
                    self.path.push((buf, page_no, start + 1));
                    if self.path.len() > MAX_DEPTH {
                        return Err(Unsupported);
                    }
                    page_no = child;
                    continue;
                }
                PageKind::Leaf => {
                    std::mem::swap(&mut self.leaf, &mut buf);
                    self.spare.push(buf);
                    if self.leaf_rows(page_no, after, max, visit, out)? {
                        return Ok(());
                    }
                    seeking = false;
                }
            }
            // The next leaf: up the path to the first interior page with a child left.
            page_no = loop {
                let Some((buf, number, next)) = self.path.last_mut() else {
                    return Ok(());
                };
                let page = Page::of(buf, *number, Ok(()))?;
                if *next <= page.cells {
                    let child = page.child(*next)?;
                    *next += 1;
                    break child;
                }
                let (buf, _, _) = self.path.pop().expect("looked at above");
                self.spare.push(buf);
            };
        }
    }

    /// Visits the current leaf's rows past `after`; true when the visit is over.
    fn leaf_rows(
        &mut self,
        page_no: u32,
        after: u64,
        max: usize,
        visit: &mut dyn FnMut(&EventRef<'_>) -> bool,
        out: &mut Visit,
    ) -> Parsed<bool> {
        let TablePages {
            file,
            layout,
            leaf,
            spilled,
            overflow,
            ..
        } = self;
        let page = Page::of(leaf, page_no, Ok(()))?;
        for i in 0..page.cells {
            let cell = page.cell(i)?;
            let (size, n1) = varint(leaf.get(cell..).ok_or(Unsupported)?)?;
            let (rowid, n2) = varint(leaf.get(cell + n1..).ok_or(Unsupported)?)?;
            let rowid = rowid as i64;
            if rowid <= 0 || (rowid as u64) <= after {
                continue;
            }
            let rowid = rowid as u64;
            if rowid <= out.last && out.visited > 0 {
                return Err(Unsupported);
            }
            let body = cell + n1 + n2;
            let payload = payload(file, layout.page_size, leaf, body, size, spilled, overflow)?;
            let Some(event) = event_of(rowid, payload, layout) else {
                return Err(Unsupported);
            };
            out.visited += 1;
            out.last = rowid;
            if !visit(&event) {
                out.outcome = Outcome::Stopped;
                return Ok(true);
            }
            if out.visited == max {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum PageKind {
    Interior,
    Leaf,
}

/// A table b-tree page's header, over its bytes.
struct Page<'a> {
    bytes: &'a [u8],
    kind: PageKind,
    cells: usize,
    /// Where the cell pointer array starts.
    pointers: usize,
    /// The right-most child (interior pages).
    right: u32,
}

impl<'a> Page<'a> {
    /// Parses `bytes` (page `page_no`: page 1 starts after the file
    /// header) as a table page.
    fn of(bytes: &'a [u8], page_no: u32, read: std::io::Result<()>) -> Parsed<Page<'a>> {
        read.map_err(|_| Unsupported)?;
        let at = if page_no == 1 { 100 } else { 0 };
        let header = bytes.get(at..at + 12).ok_or(Unsupported)?;
        let (kind, len) = match header[0] {
            0x05 => (PageKind::Interior, 12),
            0x0d => (PageKind::Leaf, 8),
            _ => return Err(Unsupported),
        };
        let cells = usize::from(u16::from_be_bytes([header[3], header[4]]));
        let right = if kind == PageKind::Interior {
            be32(header, 8).ok_or(Unsupported)?
        } else {
            0
        };
        let pointers = at + len;
        if pointers + 2 * cells > bytes.len() {
            return Err(Unsupported);
        }
        Ok(Page {
            bytes,
            kind,
            cells,
            pointers,
            right,
        })
    }

    /// Where cell `i` starts.
    fn cell(&self, i: usize) -> Parsed<usize> {
        let at = self.pointers + 2 * i;
        let offset = usize::from(u16::from_be_bytes([self.bytes[at], self.bytes[at + 1]]));
        if offset >= self.bytes.len() {
            return Err(Unsupported);
        }
        Ok(offset)
    }

    /// Child `i` of an interior page (`cells` = the right-most).
    fn child(&self, i: usize) -> Parsed<u32> {
        let page = if i == self.cells {
            self.right
        } else {
            be32(self.bytes, self.cell(i)?).ok_or(Unsupported)?
        };
        if page == 0 {
            return Err(Unsupported);
        }
        Ok(page)
    }

    /// An interior cell's key: the highest rowid of its left child.
    fn key(&self, i: usize) -> Parsed<i64> {
        let cell = self.cell(i)?;
        let (key, _) = varint(self.bytes.get(cell + 4..).ok_or(Unsupported)?)?;
        Ok(key as i64)
    }
}

/// The first child of an interior page that may hold a rowid above `after`.
fn first_child_past(page: &Page<'_>, after: u64) -> Parsed<usize> {
    let (mut low, mut high) = (0, page.cells);
    while low < high {
        let mid = (low + high) / 2;
        let key = page.key(mid)?;
        if key > 0 && key as u64 > after {
            high = mid;
        } else {
            low = mid + 1;
        }
    }
    Ok(low)
}

fn read_page(file: &File, page_size: usize, page_no: u32, buf: &mut Vec<u8>) -> std::io::Result<()> {
    buf.resize(page_size, 0);
    let offset = u64::from(page_no.checked_sub(1).ok_or(std::io::ErrorKind::InvalidData)?) * page_size as u64;
    file.read_exact_at(buf, offset)
}

/// A leaf cell's record: in the page, or put back together from its
/// overflow chain into `spilled`.
fn payload<'a>(
    file: &File,
    page_size: usize,
    leaf: &'a [u8],
    body: usize,
    size: u64,
    spilled: &'a mut Vec<u8>,
    overflow: &mut Vec<u8>,
) -> Parsed<&'a [u8]> {
    let usable = page_size;
    let size = usize::try_from(size).map_err(|_| Unsupported)?;
    let most_local = usable - 35;
    if size <= most_local {
        return leaf.get(body..body + size).ok_or(Unsupported);
    }
    // The file format's rule for how much of a spilled record stays local.
    let least_local = (usable - 12) * 32 / 255 - 23;
    let k = least_local + (size - least_local) % (usable - 4);
    let local = if k <= most_local { k } else { least_local };
    spilled.clear();
    spilled.extend_from_slice(leaf.get(body..body + local).ok_or(Unsupported)?);
    let mut next = be32(leaf, body + local).ok_or(Unsupported)?;
    // A chain never needs more pages than the record has bytes for.
    let mut pages = (size - local).div_ceil(usable - 4);
    while spilled.len() < size {
        pages = pages.checked_sub(1).ok_or(Unsupported)?;
        read_page(file, page_size, next, overflow).map_err(|_| Unsupported)?;
        let take = (size - spilled.len()).min(usable - 4);
        spilled.extend_from_slice(&overflow[4..4 + take]);
        next = be32(overflow, 0).ok_or(Unsupported)?;
    }
    Ok(spilled)
}

/// The event in a record, when every field is text and the rowid alias is NULL.
fn event_of<'a>(rowid: u64, record: &'a [u8], layout: &Layout) -> Option<EventRef<'a>> {
    let (header_len, mut at) = varint(record).ok()?;
    let header_len = usize::try_from(header_len).ok()?;
    let header = record.get(..header_len)?;
    let mut body = header_len;
    let mut fields: [&[u8]; 6] = [&[]; 6];
    let last = layout.fields.iter().copied().max()?.max(layout.seq);
    for column in 0..=last {
        let (serial, n) = varint(header.get(at..)?).ok()?;
        at += n;
        let len = serial_len(serial)?;
        if column == layout.seq {
            if serial != 0 {
                return None;
            }
        } else if let Some(field) = layout.fields.iter().position(|c| *c == column) {
            // Text only (odd serial types from 13); anything else is SQLite's to judge.
            if serial < 13 || serial % 2 == 0 {
                return None;
            }
            fields[field] = record.get(body..body.checked_add(len)?)?;
        }
        body = body.checked_add(len)?;
    }
    Some(EventRef::from_fields(rowid, fields))
}

/// Bytes a value of serial type `serial` takes in the record body.
fn serial_len(serial: u64) -> Option<usize> {
    Some(match serial {
        0 | 8 | 9 => 0,
        1 => 1,
        2 => 2,
        3 => 3,
        4 => 4,
        5 => 6,
        6 | 7 => 8,
        10 | 11 => return None,
        n => usize::try_from((n - 12) / 2).ok()?,
    })
}

/// SQLite's variable-length integer: up to nine bytes, big-endian, seven
/// bits per byte but all eight of the ninth.
fn varint(bytes: &[u8]) -> Parsed<(u64, usize)> {
    let mut value = 0u64;
    for (i, b) in bytes.iter().take(9).enumerate() {
        if i == 8 {
            return Ok(((value << 8) | u64::from(*b), 9));
        }
        value = (value << 7) | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            return Ok((value, i + 1));
        }
    }
    Err(Unsupported)
}

fn be32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use rusqlite::Connection;

    use super::*;
    use crate::db::{EventDb, OpenOptions};

    /// A database as a writer might leave it.
    #[derive(Clone, Debug)]
    struct Shape {
        page_size: u32,
        wal: Wal,
        /// Column order of the table (a permutation of the seven).
        order: Vec<usize>,
        rows: Vec<Row>,
        /// Seqs deleted after the inserts (index into rows).
        deleted: Vec<usize>,
        /// Rows whose field is made a BLOB (index, field).
        blobs: Vec<(usize, usize)>,
        added_column: bool,
        vacuum: bool,
    }

    #[derive(Clone, Copy, Debug)]
    enum Wal {
        /// Rollback journal: the file alone.
        Off,
        /// WAL checkpointed and truncated: the file alone.
        Truncated,
        /// WAL holding the last commits: SQLite reads them, the pages not.
        Holding,
    }

    #[derive(Clone, Debug)]
    struct Row {
        fields: [String; 6],
    }

    const COLUMNS: [&str; 7] = ["seq", "run_id", "step_id", "at", "type", "payload_json", "hash"];

    fn text(max: usize) -> impl Strategy<Value = String> {
        prop_oneof![
            4 => proptest::string::string_regex(&format!("[a-z0-9 é日{{}}\\\":,]{{0,{max}}}")).unwrap(),
            1 => (0..max * 40).prop_map(|n| "x".repeat(n)),
        ]
    }

    fn shape() -> impl Strategy<Value = Shape> {
        let row = (text(12), text(6), text(24), text(10), text(300), text(64)).prop_map(|(a, b, c, d, e, f)| Row {
            fields: [a, b, c, d, e, f],
        });
        (
            prop_oneof![Just(512u32), Just(1024), Just(4096), Just(65536)],
            prop_oneof![Just(Wal::Off), Just(Wal::Truncated), Just(Wal::Holding)],
            Just((0..7).collect::<Vec<usize>>()).prop_shuffle(),
            proptest::collection::vec(row, 0..160),
            proptest::collection::vec(0usize..160, 0..20),
            proptest::collection::vec((0usize..160, 0usize..6), 0..3),
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(
                |(page_size, wal, order, rows, deleted, blobs, added_column, vacuum)| Shape {
                    page_size,
                    wal,
                    order,
                    rows,
                    deleted,
                    blobs,
                    added_column,
                    vacuum,
                },
            )
    }

    /// Writes the database; returns the writer (kept open while the WAL must hold frames).
    fn write(path: &std::path::Path, shape: &Shape) -> Connection {
        let conn = Connection::open(path).unwrap();
        conn.execute_batch(&format!("PRAGMA page_size = {}", shape.page_size))
            .unwrap();
        if !matches!(shape.wal, Wal::Off) {
            conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0")
                .unwrap();
        }
        let columns: Vec<String> = shape
            .order
            .iter()
            .map(|&c| match c {
                0 => "seq INTEGER PRIMARY KEY AUTOINCREMENT".to_owned(),
                c => format!("{} TEXT NOT NULL", COLUMNS[c]),
            })
            .collect();
        conn.execute_batch(&format!("CREATE TABLE events ({})", columns.join(", ")))
            .unwrap();
        let tx = conn.unchecked_transaction().unwrap();
        for row in &shape.rows {
            tx.execute(
                "INSERT INTO events (run_id, step_id, at, type, payload_json, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                rusqlite::params_from_iter(row.fields.iter()),
            )
            .unwrap();
        }
        if shape.vacuum {
            // Rows no walk reaches (seq 0 and below) sit before the others in the tree.
            for seq in [-3i64, 0] {
                tx.execute(
                    "INSERT INTO events (seq, run_id, step_id, at, type, payload_json, hash) VALUES (?1, 'r', '', 't', 'k', '{}', 'h')",
                    [seq],
                )
                .unwrap();
            }
        }
        tx.commit().unwrap();
        for &i in &shape.deleted {
            conn.execute("DELETE FROM events WHERE seq = ?1", [i as i64 + 1])
                .unwrap();
        }
        for &(i, field) in &shape.blobs {
            conn.execute(
                &format!("UPDATE events SET {} = X'00ff' WHERE seq = ?1", COLUMNS[field + 1]),
                [i as i64 + 1],
            )
            .unwrap();
        }
        if shape.added_column {
            conn.execute_batch("ALTER TABLE events ADD COLUMN extra TEXT").unwrap();
            conn.execute("UPDATE events SET extra = 'e' WHERE seq % 3 = 0", [])
                .unwrap();
        }
        if shape.vacuum {
            conn.execute_batch("VACUUM").unwrap();
        }
        if matches!(shape.wal, Wal::Truncated) {
            conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)").unwrap();
        }
        conn
    }

    /// What a visit hands over, or the error it ends with.
    fn visit_all(db: &EventDb, after: u64, max: usize) -> (Vec<(u64, Vec<Vec<u8>>)>, Option<String>) {
        let mut seen = Vec::new();
        let result = db.visit_rows(after, max, &mut |e| {
            let fields = [e.run_id, e.step_id, e.at, e.kind, e.payload_json, e.hash];
            seen.push((e.seq, fields.iter().map(|f| f.to_vec()).collect()));
            true
        });
        (seen, result.err().map(|e| e.to_string()))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(std::env::var("PAGES_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(64)))]

        /// Whatever the page size, column order, spills, deletions, blobs,
        /// added columns or WAL: the rows (and the error, if any) are SQLite's.
        #[test]
        fn the_pages_give_exactly_what_sqlite_gives(
            shape in shape(),
            visits in proptest::collection::vec((0u64..170, 1usize..200), 1..6),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("events.db");
            let writer = write(&path, &shape);
            let direct = EventDb::open(&path, &OpenOptions::default()).unwrap();
            let reference = EventDb::open(&path, &OpenOptions::default()).unwrap().without_pages();
            let mut handed = 0;
            for (after, max) in visits {
                let expected = visit_all(&reference, after, max);
                handed += expected.0.len() as u64;
                prop_assert_eq!(visit_all(&direct, after, max), expected, "after {} max {}", after, max);
            }
            // The page reader read every row whenever SQLite's view was the file alone.
            if shape.blobs.is_empty() && !matches!(shape.wal, Wal::Holding) {
                prop_assert_eq!(direct.rows_from_pages(), handed, "rows not read from the pages");
            }
            if matches!(shape.wal, Wal::Holding) {
                prop_assert_eq!(direct.rows_from_pages(), 0);
            }
            drop(writer);
        }
    }

    #[test]
    fn varints_read_as_the_file_format_says() {
        assert_eq!(varint(&[0x00]).ok(), Some((0, 1)));
        assert_eq!(varint(&[0x7f]).ok(), Some((127, 1)));
        assert_eq!(varint(&[0x81, 0x00]).ok(), Some((128, 2)));
        assert_eq!(varint(&[0xff; 9]).ok(), Some((u64::MAX, 9)));
        assert!(varint(&[0x80, 0x80]).is_err(), "cut short");
        assert!(varint(&[]).is_err());
    }
}
