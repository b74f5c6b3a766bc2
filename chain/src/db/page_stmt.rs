//! The page query, stepped through SQLite's C API so that each column of a
//! row is fetched once (`sqlite3_column_value`) and borrowed where SQLite
//! holds it.
//!
//! Why: rusqlite's `Row::get_ref` asks SQLite three times per column (type,
//! text, length), each through the statement's column lookup; with seven
//! columns that was a fifth of a whole `verify` (issue 34's profile). The
//! statement is prepared once per connection, like rusqlite's cache would.

use std::ffi::{CStr, c_int};
use std::ptr::NonNull;

use rusqlite::{Connection, ffi};

/// A prepared statement owned outright; finalized on drop. It must not
/// outlive its connection: [`super::EventDb`] declares it first, so it is
/// dropped first.
pub(super) struct PageStmt {
    raw: NonNull<ffi::sqlite3_stmt>,
}

// The statement is used only through `&mut`, from whichever thread holds
// the `EventDb`, like the connection it belongs to (which is `Send`).
unsafe impl Send for PageStmt {}

impl PageStmt {
    pub(super) fn prepare(conn: &Connection, sql: &str) -> rusqlite::Result<PageStmt> {
        let len = c_int::try_from(sql.len()).map_err(|_| rusqlite::Error::InvalidQuery)?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: the handle is the live connection's; SQLite reads `len`
        // bytes of `sql` and writes the new statement to `raw`.
        let db = unsafe { conn.handle() };
        let rc = unsafe {
            ffi::sqlite3_prepare_v3(
                db,
                sql.as_ptr().cast(),
                len,
                ffi::SQLITE_PREPARE_PERSISTENT,
                &mut raw,
                std::ptr::null_mut(),
            )
        };
        if rc != ffi::SQLITE_OK {
            return Err(failure(db, rc));
        }
        NonNull::new(raw)
            .map(|raw| PageStmt { raw })
            .ok_or(rusqlite::Error::InvalidQuery)
    }

    /// Binds `(?1, ?2)` and starts the query. The statement is reset when
    /// the returned rows are dropped, which ends the read transaction.
    pub(super) fn query(&mut self, first: i64, second: i64) -> rusqlite::Result<PageRows<'_>> {
        let rows = PageRows { stmt: self };
        for (index, value) in [(1, first), (2, second)] {
            // SAFETY: a live statement with two parameters.
            let rc = unsafe { ffi::sqlite3_bind_int64(rows.stmt.raw.as_ptr(), index, value) };
            if rc != ffi::SQLITE_OK {
                return Err(failure(rows.db(), rc));
            }
        }
        Ok(rows)
    }
}

impl Drop for PageStmt {
    fn drop(&mut self) {
        // SAFETY: finalized once, here; the connection is still open.
        unsafe { ffi::sqlite3_finalize(self.raw.as_ptr()) };
    }
}

/// The rows of one query; each borrowed row lives until the next step.
pub(super) struct PageRows<'s> {
    stmt: &'s mut PageStmt,
}

impl PageRows<'_> {
    /// The next row, or `None` at the end.
    pub(super) fn next(&mut self) -> rusqlite::Result<Option<PageRow<'_>>> {
        // SAFETY: a live, bound statement.
        match unsafe { ffi::sqlite3_step(self.stmt.raw.as_ptr()) } {
            ffi::SQLITE_ROW => Ok(Some(PageRow { stmt: &*self.stmt })),
            ffi::SQLITE_DONE => Ok(None),
            rc => Err(failure(self.db(), rc)),
        }
    }

    fn db(&self) -> *mut ffi::sqlite3 {
        // SAFETY: a live statement.
        unsafe { ffi::sqlite3_db_handle(self.stmt.raw.as_ptr()) }
    }
}

impl Drop for PageRows<'_> {
    fn drop(&mut self) {
        // SAFETY: a live statement; reset ends its read transaction (the
        // next query binds again). Its return repeats the last step's error,
        // already reported.
        unsafe { ffi::sqlite3_reset(self.stmt.raw.as_ptr()) };
    }
}

/// One row; what it lends is valid until the next step.
pub(super) struct PageRow<'r> {
    stmt: &'r PageStmt,
}

/// A column's value: what the page query reads, and what else a column can
/// hold (named in errors).
pub(super) enum Column<'r> {
    Integer(i64),
    Text(&'r [u8]),
    Other(&'static str),
}

impl<'r> PageRow<'r> {
    pub(super) fn column(&self, index: usize) -> Column<'r> {
        let raw = self.stmt.raw.as_ptr();
        // SAFETY: `index` is below the statement's column count (the page
        // query selects seven); the value is unprotected, which is allowed
        // for reading it on this thread before the next step, and the
        // bytes it lends stay valid until then (`'r` borrows the rows).
        unsafe {
            let value = ffi::sqlite3_column_value(raw, index as c_int);
            match ffi::sqlite3_value_type(value) {
                ffi::SQLITE_INTEGER => Column::Integer(ffi::sqlite3_value_int64(value)),
                ffi::SQLITE_TEXT => {
                    // Text first, then its length in that encoding (SQLite's rule).
                    let text = ffi::sqlite3_value_text(value);
                    let len = ffi::sqlite3_value_bytes(value);
                    if text.is_null() || len <= 0 {
                        // NULL here is an out-of-memory conversion; reading
                        // it as empty would hash the wrong bytes.
                        if text.is_null() && len != 0 {
                            return Column::Other("text SQLite could not convert");
                        }
                        Column::Text(&[])
                    } else {
                        Column::Text(std::slice::from_raw_parts(text, len as usize))
                    }
                }
                ffi::SQLITE_NULL => Column::Other("NULL"),
                ffi::SQLITE_FLOAT => Column::Other("a real number"),
                _ => Column::Other("a blob"),
            }
        }
    }
}

/// SQLite's error for `rc`, worded as rusqlite words it (so "not now" and
/// "not a database" are told apart by the same code).
fn failure(db: *mut ffi::sqlite3, rc: c_int) -> rusqlite::Error {
    // SAFETY: `db` is a live connection; its message is copied at once.
    let message = unsafe {
        let text = ffi::sqlite3_errmsg(db);
        (!text.is_null()).then(|| CStr::from_ptr(text).to_string_lossy().into_owned())
    };
    rusqlite::Error::SqliteFailure(ffi::Error::new(rc), message)
}
