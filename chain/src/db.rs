//! Reading the events table, read-only.
//!
//! The audit database belongs to the runtime that writes it: it is opened
//! with `SQLITE_OPEN_READ_ONLY` and `query_only`, so nothing here can change
//! it, not even its journal mode. Each page is its own short read
//! transaction, so a writer appending in WAL mode is never held up and the
//! WAL can be checkpointed while a long walk goes on.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use std::cell::Cell;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags, OptionalExtension};

mod page_stmt;
use page_stmt::{Column, PageRows, PageStmt};

use crate::event::{EventBatch, EventRef};
use crate::schema::{Schema, SchemaError};

/// How to open an audit database.
#[derive(Clone, Debug, Default)]
pub struct OpenOptions {
    pub schema: Schema,
    /// Accept a path that is a symbolic link (refused by default, so a
    /// swapped link cannot silently point the tool at another database).
    pub allow_symlink: bool,
}

/// Everything that can go wrong reading the database. Each names the file,
/// table, column or seq at fault in one line.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error(transparent)]
    Schema(#[from] SchemaError),
    #[error("{0}: no such file")]
    Missing(PathBuf),
    #[error("{0}: is a symbolic link; following one must be allowed")]
    Symlink(PathBuf),
    #[error("{0}: not a regular file")]
    NotAFile(PathBuf),
    #[error("{0}: not a SQLite database")]
    NotSqlite(PathBuf),
    #[error("{path}: cannot open: {reason}")]
    Open { path: PathBuf, reason: String },
    #[error("{path}: no table named {table:?}")]
    NoTable { path: PathBuf, table: String },
    #[error("{path}: {table:?} is a view, not a table; name the table that holds the events")]
    IsView { path: PathBuf, table: String },
    #[error("{path}: table {table:?} has no column {column:?} (the {setting})")]
    NoColumn {
        path: PathBuf,
        table: String,
        column: String,
        setting: &'static str,
    },
    #[error("{path}: seq {seq}: column {column:?} is {found}, not text")]
    BadField {
        path: PathBuf,
        seq: u64,
        column: String,
        found: &'static str,
    },
    #[error("{path}: an event's seq column {column:?} holds {found}, not a positive integer (after seq {after})")]
    BadSeq {
        path: PathBuf,
        column: String,
        found: String,
        after: u64,
    },
    #[error("{path}: read failed: {source}")]
    Read { path: PathBuf, source: rusqlite::Error },
    /// SQLite's "not now": a writer holds a lock, is recovering or rebuilding
    /// the WAL index, or changed it mid-read. Every reader meets these while
    /// a writer is live, most of all one that cannot write the `-shm` (a
    /// read-only mount, another uid). Retried; never a reason to stop.
    #[error("{path}: the database is busy ({reason}) for {waited:?}; a writer holds it or is recovering its WAL")]
    Busy {
        path: PathBuf,
        reason: String,
        waited: Duration,
    },
    /// Read as immutable (no `-wal`, a directory nobody can write), and a
    /// writer has started since: open it again, normally.
    #[error("{0}: a writer started while it was read as immutable; it must be opened again")]
    WriterStarted(PathBuf),
    /// Found when reopening a replaced file: it no longer holds what was read.
    #[error(
        "{path}: the database file was replaced and no longer holds seq {seq} as read before ({found}): restored from an older copy, or rewritten"
    )]
    Replaced { path: PathBuf, seq: u64, found: String },
}

/// The workspace's one error, with the database error's kind, message and setting.
impl From<DbError> for crate::Error {
    fn from(e: DbError) -> Self {
        use crate::HasKind;
        let error = crate::Error::new(e.kind(), e.bare_message());
        match e.setting() {
            Some(s) => error.with_setting(s),
            None => error,
        }
    }
}

impl crate::HasKind for DbError {
    fn kind(&self) -> crate::ErrorKind {
        match self {
            // Damage to the record, not a setup problem: the chain cannot go on past it.
            DbError::Replaced { .. } | DbError::BadField { .. } | DbError::BadSeq { .. } => crate::ErrorKind::Integrity,
            DbError::Busy { .. } | DbError::WriterStarted(_) => crate::ErrorKind::Transient,
            _ => crate::ErrorKind::Permanent,
        }
    }

    fn setting(&self) -> Option<crate::Setting> {
        match self {
            DbError::Symlink(_) => Some(crate::Setting::AllowSymlink),
            DbError::IsView { .. } | DbError::NoTable { .. } => Some(crate::Setting::Table),
            DbError::NoColumn { setting, .. } => Some(crate::Setting::Column(setting)),
            DbError::Schema(e) => e.setting(),
            _ => None,
        }
    }
}

/// Which files a connection reads: the database and its `-wal`, by device
/// and inode. A writer that closes its last connection deletes the `-wal`
/// (and `-shm`); one that starts again creates new ones. A connection
/// opened before keeps reading the deleted files' old snapshot and never
/// sees another commit, so a tailing reader compares this on every poll
/// and reopens when it changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileIdentity {
    db: Option<(u64, u64)>,
    wal: Option<(u64, u64)>,
}

impl FileIdentity {
    pub fn of(path: &Path) -> FileIdentity {
        use std::os::unix::fs::MetadataExt;
        let id = |p: &Path| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
        FileIdentity {
            db: id(path),
            wal: id(&wal_path(path)),
        }
    }
}

/// A file's inode, size and modification time: what an immutable read
/// compares before and after, to know nobody wrote meanwhile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileStamp(Option<(u64, u64, Option<SystemTime>)>);

impl FileStamp {
    fn of(path: &Path) -> FileStamp {
        use std::os::unix::fs::MetadataExt;
        FileStamp(
            std::fs::metadata(path)
                .ok()
                .map(|m| (m.ino(), m.len(), m.modified().ok())),
        )
    }
}

/// Where a page's visit stands.
struct PageVisit {
    visited: usize,
    last_seq: u64,
    /// Rows visited with `last_seq` as their seq.
    same_as_last: usize,
    /// The visitor asked to stop.
    stopped: bool,
}

/// A read-only handle on the events table.
pub struct EventDb {
    // The statements of `page_sql` and `same_seq_sql`, prepared on first use
    // (taken out while one is stepped). Declared before `conn`, so they are
    // finalized before it closes.
    page_stmt: Cell<Option<PageStmt>>,
    same_seq_stmt: Cell<Option<PageStmt>>,
    conn: Connection,
    path: PathBuf,
    options: OpenOptions,
    identity: FileIdentity,
    /// Opened with `immutable=1`: SQLite takes no lock, so each read checks
    /// nobody wrote meanwhile.
    immutable: bool,
    schema: Schema,
    page_sql: String,
    head_sql: String,
    hash_at_sql: String,
    run_sql: String,
    prev_row_sql: String,
    hashes_sql: String,
    /// The rows of one seq past the first `?2` (see [`EventDb::visit_rows`]).
    same_seq_sql: String,
    same_seq_count_sql: String,
    /// The seq column may hold one value twice (it is not the table's
    /// INTEGER PRIMARY KEY): pages then look past their last seq.
    seq_may_repeat: bool,
    count_sql: String,
    bad_seq_sql: String,
}

impl EventDb {
    /// Opens `path` read-only after checking it is a regular SQLite file
    /// whose events table (not a view) has all seven columns.
    pub fn open(path: &Path, options: &OpenOptions) -> Result<EventDb, DbError> {
        options.schema.validate()?;
        check_file(path, options.allow_symlink)?;
        match EventDb::connect(path, options, false) {
            // A WAL database needs its -shm, which a read-only connection creates
            // beside it. On a read-only mount with no -wal there is none and none
            // can be made; but then nobody can be writing either (a writer would
            // need the -wal there), so the file is read as it stands. A writer
            // that starts later creates the -wal: the tailing reader sees the
            // files change and reopens normally.
            Err(DbError::Open { reason, .. })
                if !wal_path(path).exists() && is_cantopen(&reason) && !dir_writable(path) =>
            {
                if hot_journal(path) {
                    return Err(DbError::Open {
                        path: path.to_owned(),
                        reason: "a rollback journal a writer left mid-transaction (-journal) is beside it: the file alone is not the database until a writer rolls it back (open it once with write access)".into(),
                    });
                }
                let db = EventDb::connect(path, options, true)?;
                tracing::info!(db = %path.display(), "no -wal and its directory is not writable: opened as immutable (nothing can be writing it)");
                Ok(db)
            }
            other => other,
        }
    }

    fn connect(path: &Path, options: &OpenOptions, immutable: bool) -> Result<EventDb, DbError> {
        // Taken before opening: a file swapped in between reads as changed, never as the same.
        let identity = FileIdentity::of(path);
        let open_err = |e: rusqlite::Error| DbError::Open {
            path: path.to_owned(),
            reason: e.to_string(),
        };
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = if immutable {
            let uri = format!("file:{}?immutable=1", uri_path(path));
            Connection::open_with_flags(uri, flags | OpenFlags::SQLITE_OPEN_URI)
        } else {
            Connection::open_with_flags(path, flags)
        }
        .map_err(open_err)?;
        conn.busy_timeout(Duration::from_secs(5)).map_err(open_err)?;
        conn.pragma_update(None, "query_only", true).map_err(open_err)?;

        let schema = options.schema.clone();
        let table = schema.quoted_table();
        let cols = schema.select_list();
        let seq = crate::schema::Quoted(&schema.seq);
        let hash = crate::schema::Quoted(&schema.hash);
        let db = EventDb {
            page_sql: format!("SELECT {cols} FROM {table} WHERE {seq} > ?1 ORDER BY {seq} LIMIT ?2"),
            head_sql: format!("SELECT {seq}, {hash} FROM {table} ORDER BY {seq} DESC LIMIT 1"),
            hash_at_sql: format!("SELECT {hash} FROM {table} WHERE {seq} = ?1"),
            run_sql: format!(
                "SELECT {cols} FROM {table} WHERE {} = ?1 ORDER BY {seq}",
                crate::schema::Quoted(&schema.run_id)
            ),
            prev_row_sql: format!(
                "SELECT {seq}, {hash} FROM {table} WHERE {seq} >= ?1 AND {seq} <= ?2 ORDER BY {seq} DESC LIMIT 1"
            ),
            hashes_sql: format!("SELECT {hash} FROM {table} WHERE {seq} > ?1 AND {seq} <= ?2 ORDER BY {seq}"),
            same_seq_sql: format!("SELECT {cols} FROM {table} WHERE {seq} = ?1 LIMIT -1 OFFSET ?2"),
            same_seq_count_sql: format!("SELECT count(*) FROM {table} WHERE {seq} = ?1"),
            seq_may_repeat: true,
            count_sql: format!("SELECT count(*) FROM {table} WHERE {seq} > ?1 AND {seq} <= ?2"),
            // Rows a walk by `seq > after` never reaches (NULL, zero, negative).
            bad_seq_sql: format!("SELECT {seq} FROM {table} WHERE {seq} IS NULL OR {seq} <= 0 LIMIT 1"),
            page_stmt: Cell::new(None),
            same_seq_stmt: Cell::new(None),
            conn,
            path: path.to_owned(),
            options: options.clone(),
            identity,
            immutable,
            schema,
        };
        let mut db = db;
        let no_wal = || !wal_path(path).exists();
        patiently(BUSY_PATIENCE, || {
            db.check_table().map_err(|e| match e {
                // SQLite opens lazily: a -shm that cannot be made shows at the
                // first read. With no -wal nobody is writing: say so to `open`,
                // which may then read the file as immutable.
                DbError::Read { source, .. } if is_cantopen(&source.to_string()) => open_err(source),
                DbError::Busy { reason, .. } if is_cantopen(&reason) && no_wal() => DbError::Open {
                    path: path.to_owned(),
                    reason,
                },
                e => e,
            })
        })?;
        db.seq_may_repeat = !patiently(BUSY_PATIENCE, || db.seq_is_rowid().map_err(db.read_err())).unwrap_or(false);
        if db.seq_is_rowid_alias() {
            // A rowid is never NULL: a range from the start, not a scan of the table.
            let (seq, table) = (crate::schema::Quoted(&db.schema.seq), db.schema.quoted_table());
            db.bad_seq_sql = format!("SELECT {seq} FROM {table} WHERE {seq} <= 0 ORDER BY {seq} LIMIT 1");
        }
        Ok(db)
    }

    /// SQLite's own word on whether seq is the rowid (so an integer, never
    /// NULL): its plan for reading seq reads the rowid, not a column.
    fn seq_is_rowid_alias(&self) -> bool {
        let seq = crate::schema::Quoted(&self.schema.seq);
        let ops = self
            .conn
            .prepare(&format!("EXPLAIN SELECT {seq} FROM {}", self.schema.quoted_table()))
            .and_then(|mut plan| {
                plan.query_map([], |r| r.get::<_, String>(1))?
                    .collect::<Result<Vec<_>, _>>()
            });
        ops.is_ok_and(|ops| ops.iter().any(|o| o == "Rowid") && !ops.iter().any(|o| o == "Column"))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the database or its `-wal` is no longer the file this
    /// connection opened (see [`FileIdentity`]).
    pub fn files_replaced(&self) -> bool {
        FileIdentity::of(&self.path) != self.identity
    }

    /// The options it was opened with (to open it again).
    pub fn options(&self) -> &OpenOptions {
        &self.options
    }

    fn read_err(&self) -> impl Fn(rusqlite::Error) -> DbError + '_ {
        |source| match source {
            rusqlite::Error::SqliteFailure(ref e, _) if e.code == rusqlite::ErrorCode::NotADatabase => {
                DbError::NotSqlite(self.path.clone())
            }
            ref source if not_now(source) => DbError::Busy {
                path: self.path.clone(),
                reason: source.to_string(),
                waited: Duration::ZERO,
            },
            source => DbError::Read {
                path: self.path.clone(),
                source,
            },
        }
    }

    /// Whether the seq column is the table's INTEGER PRIMARY KEY (so no
    /// value can be there twice). Unknown (an unreadable schema) counts as no.
    fn seq_is_rowid(&self) -> Result<bool, rusqlite::Error> {
        let mut stmt = self
            .conn
            .prepare(&format!("PRAGMA table_info({})", self.schema.quoted_table()))?;
        let columns: Vec<(String, String, i64)> = stmt
            .query_map([], |row| Ok((row.get(1)?, row.get(2)?, row.get(5)?)))?
            .collect::<Result<_, _>>()?;
        let keys: Vec<&(String, String, i64)> = columns.iter().filter(|c| c.2 > 0).collect();
        Ok(matches!(&keys[..], [(name, kind, _)]
            if name.eq_ignore_ascii_case(&self.schema.seq) && kind.eq_ignore_ascii_case("INTEGER")))
    }

    fn check_table(&self) -> Result<(), DbError> {
        let kind: Option<String> = self
            .conn
            .query_row(
                "SELECT type FROM sqlite_schema WHERE lower(name) = lower(?1) AND type IN ('table', 'view')",
                [&self.schema.table],
                |row| row.get(0),
            )
            .optional()
            .map_err(self.read_err())?;
        let table = self.schema.table.clone();
        match kind.as_deref() {
            None => {
                return Err(DbError::NoTable {
                    path: self.path.clone(),
                    table,
                });
            }
            Some("view") => {
                return Err(DbError::IsView {
                    path: self.path.clone(),
                    table,
                });
            }
            Some(_) => {}
        }
        let mut stmt = self
            .conn
            .prepare(&format!("PRAGMA table_info({})", self.schema.quoted_table()))
            .map_err(self.read_err())?;
        let present: Vec<String> = stmt
            .query_map([], |row| row.get::<_, String>(1))
            .map_err(self.read_err())?
            .collect::<Result<_, _>>()
            .map_err(self.read_err())?;
        for (setting, column) in self.schema.columns() {
            if !present.iter().any(|p| p.eq_ignore_ascii_case(column)) {
                return Err(DbError::NoColumn {
                    path: self.path.clone(),
                    table: self.schema.table.clone(),
                    column: column.to_owned(),
                    setting,
                });
            }
        }
        Ok(())
    }

    /// Calls `each` with every event of seq `after + 1 ..= through`, in seq
    /// order, a page at a time (memory: one page), until it returns false.
    /// A row that cannot be read ends the scan with its error, after the
    /// events before it were handed over.
    pub fn scan(
        &self,
        after: u64,
        through: u64,
        each: &mut dyn FnMut(&crate::event::EventRef<'_>) -> bool,
    ) -> Result<(), DbError> {
        let mut page = EventBatch::new();
        let mut read = after;
        // A writer that starts under an immutable read: the page is read
        // again on a connection opened normally (there is a -wal now).
        let mut reopened: Option<EventDb> = None;
        while read < through {
            page.clear();
            let db = reopened.as_ref().unwrap_or(self);
            let added = db.read_page(read, 4096, 8 << 20, &mut page);
            if matches!(added, Err(DbError::WriterStarted(_))) && reopened.is_none() {
                tracing::info!(db = %self.path.display(), "a writer started: reopening");
                reopened = Some(EventDb::open(&self.path, &self.options)?);
                continue;
            }
            for e in page.iter().take_while(|e| e.seq <= through) {
                if !each(&e) {
                    return Ok(());
                }
            }
            if added? == 0 {
                break;
            }
            read = page.last().map_or(through, |e| e.seq);
        }
        Ok(())
    }

    /// Appends to `out` the events with seq above `after`, in seq order, up
    /// to `max_events`, stopping before an event that would take the page
    /// past `max_bytes` of field data (a larger event still comes alone).
    /// Returns how many were added. Events read before a bad field stay in
    /// `out`.
    pub fn read_page(
        &self,
        after: u64,
        max_events: usize,
        max_bytes: usize,
        out: &mut EventBatch,
    ) -> Result<usize, DbError> {
        let (start_bytes, start_len) = (out.byte_len(), out.len());
        if max_bytes < usize::MAX / 2 {
            out.reserve_bytes(max_bytes);
        }
        patiently(BUSY_PATIENCE, || {
            // A page cut short by "not now" is read again whole.
            out.truncate(start_len);
            self.read_page_once(after, max_events, max_bytes, (start_len, start_bytes), out)
        })?;
        Ok(out.len() - start_len)
    }

    fn read_page_once(
        &self,
        after: u64,
        max_events: usize,
        max_bytes: usize,
        (start_len, start_bytes): (usize, usize),
        out: &mut EventBatch,
    ) -> Result<(), DbError> {
        self.visit_rows(after, max_events, &mut |event| {
            // Full: the page ends before an event that would take it past
            // `max_bytes` (so its buffer never grows past the bound; a larger
            // event alone still goes), and never between two rows of one seq,
            // or the second would be skipped by the next page.
            let past_bound = out.byte_len() - start_bytes + event.byte_len() > max_bytes;
            if past_bound && out.len() > start_len && out.last().is_some_and(|e| e.seq != event.seq) {
                return false;
            }
            out.push(
                event.seq,
                [
                    event.run_id,
                    event.step_id,
                    event.at,
                    event.kind,
                    event.payload_json,
                    event.hash,
                ],
            );
            true
        })
        .map(|_| ())
    }

    /// Calls `visit` with each event with seq above `after`, in seq order,
    /// up to `max_events`, borrowed straight from SQLite's row (nothing is
    /// copied), until it returns false. Returns how many were visited. A row
    /// that cannot be an event ends the visit with its error, after the
    /// events before it were visited.
    pub fn visit_rows(
        &self,
        after: u64,
        max_events: usize,
        visit: &mut dyn FnMut(&EventRef<'_>) -> bool,
    ) -> Result<usize, DbError> {
        // "Not now" before the first row is read again; once rows were
        // handed over, the caller decides (see `read_page`).
        let visited = std::cell::Cell::new(0);
        retry_busy(
            BUSY_PATIENCE,
            || {
                let mut page = PageVisit {
                    visited: 0,
                    last_seq: after,
                    same_as_last: 0,
                    stopped: false,
                };
                let result = self.visit_page(after, max_events, visit, &mut page);
                visited.set(page.visited);
                result
            },
            || visited.get() == 0,
        )
        .map(|()| visited.get())
    }

    fn visit_page(
        &self,
        after: u64,
        max_events: usize,
        visit: &mut dyn FnMut(&EventRef<'_>) -> bool,
        page: &mut PageVisit,
    ) -> Result<(), DbError> {
        let before = self.immutable.then(|| FileStamp::of(&self.path));
        if self.immutable && (wal_path(&self.path).exists() || hot_journal(&self.path)) {
            return Err(self.changed_under_immutable());
        }
        self.with_stmt(&self.page_stmt, &self.page_sql, |stmt| {
            let rows = stmt.query(after as i64, max_events as i64).map_err(self.read_err())?;
            self.visit_each(rows, page, visit)
        })?;
        // A page ends on a seq; the next starts above it. Where the seq column
        // may repeat a value, rows of that seq past the page would never be
        // read: they are read now, so a second row of a seq is always seen.
        let page_full = !page.stopped && page.visited == max_events && page.last_seq > after;
        if self.seq_may_repeat && page_full && self.rows_at_once(page.last_seq)? > page.same_as_last as u64 {
            self.with_stmt(&self.same_seq_stmt, &self.same_seq_sql, |stmt| {
                let rows = stmt
                    .query(page.last_seq as i64, page.same_as_last as i64)
                    .map_err(self.read_err())?;
                self.visit_each(rows, page, visit)
            })?;
        }
        // An immutable connection takes no lock: what it read holds only if
        // nobody wrote the file meanwhile (a writer that started would have
        // made a -wal; a checkpoint changes the file's size or time).
        if before
            .is_some_and(|b| b != FileStamp::of(&self.path) || wal_path(&self.path).exists() || hot_journal(&self.path))
        {
            return Err(self.changed_under_immutable());
        }
        Ok(())
    }

    fn changed_under_immutable(&self) -> DbError {
        DbError::WriterStarted(self.path.clone())
    }

    /// Runs `f` with the statement kept in `slot`, preparing it if the slot
    /// is empty (first use, or a visitor reading the database again while
    /// the kept one is being stepped).
    fn with_stmt<T>(
        &self,
        slot: &Cell<Option<PageStmt>>,
        sql: &str,
        f: impl FnOnce(&mut PageStmt) -> Result<T, DbError>,
    ) -> Result<T, DbError> {
        let mut stmt = match slot.take() {
            Some(stmt) => stmt,
            None => PageStmt::prepare(&self.conn, sql).map_err(self.read_err())?,
        };
        let result = f(&mut stmt);
        slot.set(Some(stmt));
        result
    }

    fn visit_each(
        &self,
        mut rows: PageRows<'_>,
        page: &mut PageVisit,
        visit: &mut dyn FnMut(&EventRef<'_>) -> bool,
    ) -> Result<(), DbError> {
        while let Some(row) = rows.next().map_err(self.read_err())? {
            let seq = match row.column(0) {
                Column::Integer(i) if i >= 1 => i as u64,
                other => {
                    return Err(DbError::BadSeq {
                        path: self.path.clone(),
                        column: self.schema.seq.clone(),
                        found: describe_column(&other).to_owned(),
                        after: page.last_seq,
                    });
                }
            };
            let mut fields: [&[u8]; 6] = [&[]; 6];
            for (index, field) in (1..7).zip(fields.iter_mut()) {
                match row.column(index) {
                    Column::Text(text) => *field = text,
                    other => {
                        return Err(DbError::BadField {
                            path: self.path.clone(),
                            seq,
                            column: self.schema.columns()[index].1.to_owned(),
                            found: describe_column(&other),
                        });
                    }
                }
            }
            let event = EventRef::from_fields(seq, fields);
            page.visited += 1;
            page.same_as_last = if seq == page.last_seq { page.same_as_last + 1 } else { 1 };
            page.last_seq = seq;
            if !visit(&event) {
                page.stopped = true;
                break;
            }
        }
        Ok(())
    }

    /// The event with the highest seq, as `(seq, stored hash)`.
    pub fn head(&self) -> Result<Option<(u64, Vec<u8>)>, DbError> {
        patiently(BUSY_PATIENCE, || {
            let mut stmt = self.conn.prepare_cached(&self.head_sql).map_err(self.read_err())?;
            stmt.query_row([], |row| {
                let seq: i64 = row.get(0)?;
                let hash = match row.get_ref(1)? {
                    ValueRef::Text(t) => t.to_vec(),
                    _ => Vec::new(),
                };
                Ok((seq.max(0) as u64, hash))
            })
            .optional()
            .map_err(self.read_err())
        })
    }

    /// The hash stored with event `seq`, if there is such an event.
    pub fn hash_at(&self, seq: u64) -> Result<Option<Vec<u8>>, DbError> {
        patiently(BUSY_PATIENCE, || {
            let mut stmt = self.conn.prepare_cached(&self.hash_at_sql).map_err(self.read_err())?;
            stmt.query_row([seq as i64], |row| {
                Ok(match row.get_ref(0)? {
                    ValueRef::Text(t) => t.to_vec(),
                    _ => Vec::new(),
                })
            })
            .optional()
            .map_err(self.read_err())
        })
    }

    /// Appends to `out` the events of run `run_id`, in seq order: the run's
    /// own rows, through an index on the run column where the database has
    /// one (else SQLite scans the table for them, hashing nothing). Memory
    /// and time follow the run, not the log.
    pub fn run_events(&self, run_id: &str, out: &mut EventBatch) -> Result<(), DbError> {
        let start = out.len();
        patiently(BUSY_PATIENCE, || {
            out.truncate(start);
            let mut stmt = self.conn.prepare_cached(&self.run_sql).map_err(self.read_err())?;
            let mut rows = stmt.query([run_id]).map_err(self.read_err())?;
            while let Some(row) = rows.next().map_err(self.read_err())? {
                let seq = match row.get_ref(0).map_err(self.read_err())? {
                    ValueRef::Integer(i) if i >= 1 => i as u64,
                    other => {
                        return Err(DbError::BadSeq {
                            path: self.path.clone(),
                            column: self.schema.seq.clone(),
                            found: describe(other).to_owned(),
                            after: out.last().map_or(0, |e| e.seq),
                        });
                    }
                };
                let mut fields: [&[u8]; 6] = [&[]; 6];
                for (index, field) in (1..7).zip(fields.iter_mut()) {
                    match row.get_ref(index).map_err(self.read_err())? {
                        ValueRef::Text(text) => *field = text,
                        other => {
                            return Err(DbError::BadField {
                                path: self.path.clone(),
                                seq,
                                column: self.schema.columns()[index].1.to_owned(),
                                found: describe(other),
                            });
                        }
                    }
                }
                out.push(seq, fields);
            }
            Ok(())
        })
    }

    /// The row with the highest seq in `lowest..=highest`, as `(seq, stored
    /// hash)`: where a walk of the range above `highest` starts from.
    pub fn last_row_in(&self, lowest: u64, highest: u64) -> Result<Option<(u64, Vec<u8>)>, DbError> {
        patiently(BUSY_PATIENCE, || {
            let mut stmt = self.conn.prepare_cached(&self.prev_row_sql).map_err(self.read_err())?;
            stmt.query_row((lowest as i64, highest as i64), |row| {
                let seq: i64 = row.get(0)?;
                let hash = match row.get_ref(1)? {
                    ValueRef::Text(t) => t.to_vec(),
                    _ => Vec::new(),
                };
                Ok((seq.max(0) as u64, hash))
            })
            .optional()
            .map_err(self.read_err())
        })
    }

    /// The stored hashes of the events with seq in `(after, through]`, in
    /// seq order (a few hundred at most: the end of a tree's last tile).
    pub fn hashes_between(&self, after: u64, through: u64) -> Result<Vec<Vec<u8>>, DbError> {
        patiently(BUSY_PATIENCE, || {
            let mut stmt = self.conn.prepare_cached(&self.hashes_sql).map_err(self.read_err())?;
            let rows = stmt
                .query_map((after as i64, through as i64), |row| {
                    Ok(match row.get_ref(0)? {
                        ValueRef::Text(t) => t.to_vec(),
                        _ => Vec::new(),
                    })
                })
                .map_err(self.read_err())?;
            rows.collect::<Result<_, _>>().map_err(self.read_err())
        })
    }

    /// How many rows have exactly this seq (more than one only where seq
    /// is not the rowid).
    pub fn rows_at(&self, seq: u64) -> Result<u64, DbError> {
        patiently(BUSY_PATIENCE, || self.rows_at_once(seq))
    }

    fn rows_at_once(&self, seq: u64) -> Result<u64, DbError> {
        let mut stmt = self
            .conn
            .prepare_cached(&self.same_seq_count_sql)
            .map_err(self.read_err())?;
        stmt.query_row([seq as i64], |row| row.get::<_, i64>(0))
            .map(|n| n.max(0) as u64)
            .map_err(self.read_err())
    }

    /// How many events have a seq in `(after, through]`.
    pub fn count_between(&self, after: u64, through: u64) -> Result<u64, DbError> {
        patiently(BUSY_PATIENCE, || {
            let mut stmt = self.conn.prepare_cached(&self.count_sql).map_err(self.read_err())?;
            stmt.query_row((after as i64, through as i64), |row| row.get::<_, i64>(0))
                .map(|n| n.max(0) as u64)
                .map_err(self.read_err())
        })
    }

    /// A row whose seq no walk reaches (NULL, zero or negative), described
    /// (`NULL`, `0`, `-3`); `None` when every row has a seq above zero.
    pub fn first_unreachable_seq(&self) -> Result<Option<String>, DbError> {
        patiently(BUSY_PATIENCE, || {
            let mut stmt = self.conn.prepare_cached(&self.bad_seq_sql).map_err(self.read_err())?;
            stmt.query_row([], |row| {
                Ok(match row.get_ref(0)? {
                    ValueRef::Null => "NULL".to_owned(),
                    ValueRef::Integer(i) => i.to_string(),
                    ValueRef::Real(r) => r.to_string(),
                    other => describe(other).to_owned(),
                })
            })
            .optional()
            .map_err(self.read_err())
        })
    }

    /// SQLite's `PRAGMA data_version`: changes whenever another connection
    /// commits, so an idle follower can poll for new events cheaply.
    pub fn data_version(&self) -> Result<i64, DbError> {
        patiently(BUSY_PATIENCE, || {
            self.conn
                .query_row("PRAGMA data_version", [], |row| row.get(0))
                .map_err(self.read_err())
        })
    }
}

/// A rollback journal a writer left mid-transaction (it starts with the
/// journal's magic; a committed one is zeroed or gone): until a writer
/// rolls it back, the file alone is not the database.
fn hot_journal(path: &Path) -> bool {
    let mut magic = [0u8; 8];
    std::fs::File::open(beside(path, "-journal"))
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && magic == [0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7]
}

fn wal_path(path: &Path) -> PathBuf {
    beside(path, "-wal")
}

/// SQLite's name for a file of the database's: its path and `suffix`.
fn beside(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Whether this process may create files beside `path` (the -wal and -shm a
/// writer needs). Asked of the kernel, so a read-only mount says no even to
/// root; a directory that merely lacks them right now (a writer restarting)
/// says yes, and its database is then never opened immutable.
fn dir_writable(path: &Path) -> bool {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let Ok(c_dir) = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(dir.as_os_str())) else {
        return true;
    };
    // SAFETY: access(2) reads a NUL-terminated path we own; nothing else is touched.
    unsafe { libc::access(c_dir.as_ptr(), libc::W_OK) == 0 }
}

/// How long one read waits out SQLite's "not now" before it says busy. A
/// writer's recovery or a rebuilt WAL index takes milliseconds; this is far
/// past that, so only a database held for minutes is reported.
pub const BUSY_PATIENCE: Duration = Duration::from_secs(60);

/// When a wait on "not now" is logged (once per read).
const SAY_BUSY_AFTER: Duration = Duration::from_secs(5);

/// Whether SQLite's answer means "not now" rather than "no": a lock held
/// (`BUSY`, `LOCKED`), a WAL index being rebuilt or changed under a reader
/// that cannot write it (`READONLY_RECOVERY`, `READONLY_CANTINIT`,
/// `READONLY_CANTLOCK`, `PROTOCOL`), or a `-shm` that a restarting writer
/// removed a moment ago (`CANTOPEN`, `IOERR_SHM*`). A connection opened
/// read-only with `query_only` never writes, so every `READONLY` it meets is
/// about the WAL index, never about the query.
fn not_now(e: &rusqlite::Error) -> bool {
    use rusqlite::ErrorCode as C;
    const SQLITE_IOERR_SHMOPEN: i32 = 10 | (18 << 8);
    const SQLITE_IOERR_SHMSIZE: i32 = 10 | (19 << 8);
    const SQLITE_IOERR_SHMMAP: i32 = 10 | (21 << 8);
    match e {
        rusqlite::Error::SqliteFailure(f, _) => {
            matches!(
                f.code,
                C::DatabaseBusy | C::DatabaseLocked | C::ReadOnly | C::FileLockingProtocolFailed | C::CannotOpen
            ) || matches!(
                f.extended_code,
                SQLITE_IOERR_SHMOPEN | SQLITE_IOERR_SHMSIZE | SQLITE_IOERR_SHMMAP
            )
        }
        _ => false,
    }
}

/// Runs `read` again while it answers [`DbError::Busy`], backing off from
/// 2 ms to 250 ms, for up to `patience`. Each read is its own short
/// transaction, so running it again reads a consistent snapshot.
fn patiently<T>(patience: Duration, read: impl FnMut() -> Result<T, DbError>) -> Result<T, DbError> {
    retry_busy(patience, read, || true)
}

/// [`patiently`], retrying only while `may_retry` says so.
fn retry_busy<T>(
    patience: Duration,
    mut read: impl FnMut() -> Result<T, DbError>,
    may_retry: impl Fn() -> bool,
) -> Result<T, DbError> {
    let started = Instant::now();
    let mut pause = Duration::from_millis(2);
    let mut said = false;
    loop {
        match read() {
            Err(DbError::Busy { path, reason, .. }) => {
                let waited = started.elapsed();
                if waited >= patience || !may_retry() {
                    return Err(DbError::Busy { path, reason, waited });
                }
                // Milliseconds are a writer at work; seconds are worth a line.
                if !said && waited >= SAY_BUSY_AFTER {
                    said = true;
                    tracing::warn!(
                        db = %path.display(),
                        error = %reason,
                        "the database has answered \"not now\" for {}s: a writer holds it or is recovering it; a -wal without its -shm on a directory this process cannot write waits for a writer to open the database once; still retrying",
                        waited.as_secs()
                    );
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(250));
            }
            other => return other,
        }
    }
}

/// What SQLite says when a read-only connection cannot make the -shm a WAL
/// database needs (at open, or at the first read).
fn is_cantopen(reason: &str) -> bool {
    reason.contains("unable to open database file") || reason.contains("attempt to write a readonly database")
}

/// A path for an SQLite `file:` URI: `%`, `?` and `#` would end or escape the path.
fn uri_path(path: &Path) -> String {
    let text = path.to_string_lossy();
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '%' => out.push_str("%25"),
            '?' => out.push_str("%3f"),
            '#' => out.push_str("%23"),
            c => out.push(c),
        }
    }
    out
}

fn describe_column(column: &Column<'_>) -> &'static str {
    match column {
        Column::Integer(_) => "an integer",
        Column::Text(_) => "text",
        Column::Other(what) => what,
    }
}

fn describe(value: ValueRef<'_>) -> &'static str {
    match value {
        ValueRef::Null => "NULL",
        ValueRef::Integer(_) => "an integer",
        ValueRef::Real(_) => "a real number",
        ValueRef::Text(_) => "text",
        ValueRef::Blob(_) => "a blob",
    }
}

/// Checks the path before SQLite sees it, so each problem gets its own
/// message (SQLite would happily create a missing file or open a link).
fn check_file(path: &Path, allow_symlink: bool) -> Result<(), DbError> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => DbError::Missing(path.to_owned()),
        _ => DbError::Open {
            path: path.to_owned(),
            reason: crate::access::explain(path, &e),
        },
    })?;
    let meta = if meta.file_type().is_symlink() {
        if !allow_symlink {
            return Err(DbError::Symlink(path.to_owned()));
        }
        std::fs::metadata(path).map_err(|_| DbError::Missing(path.to_owned()))?
    } else {
        meta
    };
    if !meta.is_file() {
        return Err(DbError::NotAFile(path.to_owned()));
    }
    let mut header = [0u8; 16];
    let mut file = std::fs::File::open(path).map_err(|e| DbError::Open {
        path: path.to_owned(),
        reason: crate::access::explain(path, &e),
    })?;
    match file.read_exact(&mut header) {
        Ok(()) if &header == b"SQLite format 3\0" => Ok(()),
        _ => Err(DbError::NotSqlite(path.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table of `sizes.len()` events whose payloads are `sizes` bytes long.
    fn table_of(dir: &Path, sizes: &[usize]) -> EventDb {
        let path = dir.join("pages.db");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE events (seq INTEGER PRIMARY KEY, run_id TEXT, step_id TEXT, at TEXT, type TEXT, payload_json TEXT, hash TEXT)",
        )
        .unwrap();
        for (i, size) in sizes.iter().enumerate() {
            conn.execute(
                "INSERT INTO events VALUES (?1, 'r', 's', 't', 'k', ?2, 'h')",
                (i as i64 + 1, "x".repeat(*size)),
            )
            .unwrap();
        }
        drop(conn);
        EventDb::open(&path, &OpenOptions::default()).unwrap()
    }

    /// The page statement is stepped through SQLite's C API (`page_stmt`):
    /// a visitor that reads the database again gets its own statement, and
    /// a page ended early leaves no read transaction open (a writer can
    /// still truncate the WAL).
    #[test]
    fn a_visit_inside_a_visit_and_a_page_stopped_early_release_the_statement() {
        let dir = tempfile::tempdir().unwrap();
        let db = table_of(dir.path(), &[1, 2, 3, 4]);
        let writer = Connection::open(dir.path().join("pages.db")).unwrap();
        writer.pragma_update(None, "journal_mode", "wal").unwrap();
        writer
            .execute("INSERT INTO events VALUES (5, 'r', '', 't', 'k', '', 'h')", [])
            .unwrap();
        let mut seen = Vec::new();
        db.visit_rows(0, 100, &mut |outer| {
            let mut inner = Vec::new();
            db.visit_rows(outer.seq, 2, &mut |e| {
                inner.push(e.seq);
                true
            })
            .unwrap();
            seen.push((outer.seq, inner, outer.payload_json.len()));
            true
        })
        .unwrap();
        assert_eq!(
            seen,
            vec![
                (1, vec![2, 3], 1),
                (2, vec![3, 4], 2),
                (3, vec![4, 5], 3),
                (4, vec![5], 4),
                (5, vec![], 0)
            ],
            "empty text reads as empty"
        );
        assert_eq!(
            db.visit_rows(0, 100, &mut |e| e.seq < 2).unwrap(),
            2,
            "stopped at the second"
        );
        let (busy, _, _): (i64, i64, i64) = writer
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .unwrap();
        assert_eq!(busy, 0, "no read transaction left open by the stopped page");
    }

    #[test]
    fn a_column_that_is_not_text_is_named_with_what_it_holds() {
        let dir = tempfile::tempdir().unwrap();
        let db = table_of(dir.path(), &[1, 1, 1, 1]);
        let writer = Connection::open(dir.path().join("pages.db")).unwrap();
        // TEXT affinity turns numbers into text: a blob and NULL stay what they are.
        writer
            .execute("UPDATE events SET at = x'41' WHERE seq = 2", [])
            .unwrap();
        writer
            .execute("UPDATE events SET type = NULL WHERE seq = 3", [])
            .unwrap();
        writer
            .execute("UPDATE events SET hash = x'00' WHERE seq = 4", [])
            .unwrap();
        for (after, column, found) in [(1, "at", "a blob"), (2, "type", "NULL"), (3, "hash", "a blob")] {
            let mut visited = Vec::new();
            let err = db
                .visit_rows(after, 100, &mut |e| {
                    visited.push(e.seq);
                    true
                })
                .unwrap_err();
            assert!(visited.is_empty(), "{visited:?}");
            match err {
                DbError::BadField {
                    seq,
                    column: c,
                    found: f,
                    ..
                } => assert_eq!((seq, c.as_str(), f), (after + 1, column, found)),
                other => panic!("{other}"),
            }
        }
    }

    #[test]
    fn a_page_stops_before_the_event_that_would_take_it_past_its_bound() {
        let dir = tempfile::tempdir().unwrap();
        // 5 bytes of other fields each: events of 100, 100, 100, 5000, 100 bytes.
        let db = table_of(dir.path(), &[95, 95, 95, 4995, 95]);
        let mut page = EventBatch::new();
        assert_eq!(
            db.read_page(0, 100, 250, &mut page).unwrap(),
            2,
            "a third would make 300 > 250"
        );
        assert_eq!(page.byte_len(), 200);
        assert!(page.capacity_bytes() <= 250 + 200, "reserved once, never doubled");
        page.clear();
        assert_eq!(
            db.read_page(2, 100, 250, &mut page).unwrap(),
            1,
            "stops before the large one"
        );
        page.clear();
        assert_eq!(
            db.read_page(3, 100, 250, &mut page).unwrap(),
            1,
            "a larger event alone still comes"
        );
        assert_eq!(page.byte_len(), 5000);
        page.clear();
        assert_eq!(db.read_page(4, 100, 250, &mut page).unwrap(), 1);
        page.clear();
        assert_eq!(
            db.read_page(0, 100, 500, &mut page).unwrap(),
            3,
            "300 fits in 500; 5300 does not"
        );
    }

    #[test]
    fn a_journal_is_hot_only_while_it_starts_with_its_magic() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("a.db");
        let journal = dir.path().join("a.db-journal");
        assert!(!hot_journal(&db), "no journal");
        std::fs::write(&journal, [0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7, 0, 0, 0, 0]).unwrap();
        assert!(hot_journal(&db));
        // Committed with journal_mode=PERSIST: the header zeroed, the file kept.
        std::fs::write(&journal, [0u8; 512]).unwrap();
        assert!(!hot_journal(&db));
        std::fs::write(&journal, [0xd9, 0xd5]).unwrap();
        assert!(!hot_journal(&db), "cut short");
    }
}
