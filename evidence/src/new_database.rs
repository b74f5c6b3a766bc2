//! A new agentrt events database, built under a temporary name beside its
//! final one and put in place only when complete: `chainship restore`
//! writes here, and nowhere else in chainship is a restored database made.
//!
//! The final name is taken with a hard link, which fails if anything took
//! the name meanwhile, so an existing file is never replaced; a crash
//! (even `kill -9`) leaves at most the temporary file, never a half
//! database under the final name.

use std::path::{Path, PathBuf};

use chainship_chain::record::Record;
use chainship_chain::{AGENTRT_EVENTS_INDEX, AGENTRT_EVENTS_TABLE};
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, ToSql};

use chainship_chain::{Error, integrity, permanent};

/// Rows written per transaction: large enough to be fast, small enough
/// that memory stays flat.
const ROWS_PER_COMMIT: u64 = 50_000;

/// Stored bytes bound as SQLite TEXT exactly as they are (UTF-8 or not):
/// agentrt stores text, and the hash covers the bytes.
struct RawText<'a>(&'a [u8]);

impl ToSql for RawText<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(ValueRef::Text(self.0)))
    }
}

pub struct NewDatabase {
    conn: Option<Connection>,
    temp: PathBuf,
    out: PathBuf,
    last: u64,
    uncommitted: u64,
    placed: bool,
}

impl NewDatabase {
    /// Starts a database that will be `out`; refuses an `out` that exists.
    pub fn create(out: &Path) -> Result<NewDatabase, Error> {
        if std::fs::symlink_metadata(out).is_ok() {
            return Err(permanent!(
                "{}: already exists; restore never replaces a file (choose a new name)",
                out.display()
            ));
        }
        let name = out
            .file_name()
            .ok_or_else(|| permanent!("{}: not a file name", out.display()))?;
        let temp = out.with_file_name(format!(".{}.partial-{}", name.to_string_lossy(), std::process::id()));
        let err =
            |e: &dyn std::fmt::Display| permanent!("{}: cannot build it (as {}): {e}", out.display(), temp.display());
        // Created here, exclusively, so a stale file of that name is never reused.
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)
            .map_err(|e| err(&e))?;
        let mut db = NewDatabase {
            conn: None,
            temp: temp.clone(),
            out: out.to_owned(),
            last: 0,
            uncommitted: 0,
            placed: false,
        };
        let conn = Connection::open(&temp).map_err(|e| err(&e))?;
        // Nothing here must survive a crash: the file is discarded unless complete.
        conn.execute_batch(&format!(
            "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; {AGENTRT_EVENTS_TABLE}; BEGIN;"
        ))
        .map_err(|e| err(&e))?;
        db.conn = Some(conn);
        Ok(db)
    }

    /// The highest seq written so far (0 before the first).
    pub fn last(&self) -> u64 {
        self.last
    }

    /// Where the database is built until it is complete.
    pub fn temp_path(&self) -> &Path {
        &self.temp
    }

    fn conn(&self) -> &Connection {
        self.conn.as_ref().expect("the connection is open until finish")
    }

    fn write_err(&self, e: impl std::fmt::Display) -> Error {
        permanent!("{}: write failed: {e}", self.temp.display())
    }

    /// Appends one record's event: its seq and the seven stored fields,
    /// byte for byte. The caller passes records in seq order.
    pub fn insert(&mut self, r: &Record<'_>) -> Result<(), Error> {
        let field = |name: &str| {
            r.field_bytes(name)
                .ok_or_else(|| integrity!("seq {}: {name} cannot be decoded", r.seq))
        };
        let (run_id, step_id, at, kind, payload) = (
            field("run_id")?,
            field("step_id")?,
            field("at")?,
            field("type")?,
            field("payload_json")?,
        );
        let seq = i64::try_from(r.seq).map_err(|_| integrity!("seq {}: too large", r.seq))?;
        self.conn()
            .prepare_cached(
                "INSERT INTO events (seq, run_id, step_id, at, type, payload_json, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )
            .and_then(|mut insert| {
                insert.execute((
                    seq,
                    RawText(&run_id),
                    RawText(&step_id),
                    RawText(&at),
                    RawText(&kind),
                    RawText(&payload),
                    RawText(r.hash.as_bytes()),
                ))
            })
            .map_err(|e| self.write_err(e))?;
        self.last = r.seq;
        self.uncommitted += 1;
        if self.uncommitted >= ROWS_PER_COMMIT {
            self.conn()
                .execute_batch("COMMIT; BEGIN;")
                .map_err(|e| self.write_err(e))?;
            self.uncommitted = 0;
        }
        Ok(())
    }

    /// Keeps the events up to `end`, sets `sqlite_sequence` to it and
    /// indexes them by run (as agentrt's own database has them; built once
    /// at the end, cheaper than row by row), and closes the file with
    /// everything on disk. The database is not yet under its final name.
    pub fn complete(&mut self, end: u64) -> Result<(), Error> {
        let end = i64::try_from(end).map_err(|_| integrity!("seq {end}: too large"))?;
        self.conn()
            .execute_batch(&format!(
                "DELETE FROM events WHERE seq > {end};
                 UPDATE sqlite_sequence SET seq = {end} WHERE name = 'events';
                 {AGENTRT_EVENTS_INDEX};
                 COMMIT;"
            ))
            .map_err(|e| self.write_err(e))?;
        if let Some(conn) = self.conn.take() {
            conn.close().map_err(|(_, e)| self.write_err(e))?;
        }
        std::fs::File::open(&self.temp)
            .and_then(|f| f.sync_all())
            .map_err(|e| self.write_err(e))?;
        Ok(())
    }

    /// Puts the completed database under its final name, never over a file
    /// that took the name meanwhile.
    pub fn place(mut self) -> Result<(), Error> {
        let taken = |out: &Path| {
            permanent!(
                "{}: appeared while restoring; left it alone (the restore is in {})",
                out.display(),
                self.temp.display()
            )
        };
        match std::fs::hard_link(&self.temp, &self.out) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                self.placed = true; // keep the temporary file: it is the only copy of the work
                return Err(taken(&self.out));
            }
            // A filesystem without hard links: rename, after looking once more.
            Err(_) if std::fs::symlink_metadata(&self.out).is_ok() => {
                self.placed = true;
                return Err(taken(&self.out));
            }
            Err(_) => std::fs::rename(&self.temp, &self.out).map_err(|e| permanent!("{}: {e}", self.out.display()))?,
        }
        let _ = std::fs::remove_file(&self.temp);
        self.placed = true;
        chainship_sinks::file::sync_parent(&self.out).map_err(|e| permanent!("{}: {e}", self.out.display()))
    }
}

impl Drop for NewDatabase {
    /// An unfinished database is removed: nothing half-written is left.
    fn drop(&mut self) {
        if !self.placed {
            drop(self.conn.take());
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}
