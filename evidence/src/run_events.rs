//! Every event of a database or of a copy, in seq order, as the run check
//! reads them (`runs`), with what could not be read named: a line that is
//! not a record, a seq gap, a row no seq reaches. The chain is not checked
//! here: `verify` and `verify-export` do that.

use chainship_chain::{Error, EventDb, HasKind};
use chainship_runs::RunEvent;
use chainship_sinks::SinkConfig;

use crate::copy;

/// Where the events are read from.
pub enum EventSource<'a> {
    Database(&'a EventDb),
    /// A copy, and whose records in it are read.
    Copy {
        source: &'a SinkConfig,
        origin: &'a str,
    },
}

/// Calls `each` with every event in seq order, and with `Err(why)` for
/// each part of the source that could not be read (the run check then saw
/// only part of the events: not whole).
pub fn read(source: EventSource<'_>, each: &mut dyn FnMut(Result<&RunEvent<'_>, String>)) -> Result<(), Error> {
    match source {
        EventSource::Copy { source, origin } => {
            copy::new_runtime()?.block_on(copy::read_in_order(source, origin, &mut |r| match r {
                Ok(event) => each(Ok(&event)),
                Err(why) => each(Err(why.message)),
            }))
        }
        EventSource::Database(db) => {
            let as_error = |e: chainship_chain::DbError| Error::new(e.kind(), &e);
            let head = db.head().map_err(as_error)?.map_or(0, |(s, _)| s);
            if let Some(value) = db.first_unreachable_seq().map_err(as_error)? {
                each(Err(chainship_chain::check::unreachable_reason(&value)));
            }
            db.scan(0, head, &mut |e| {
                each(Ok(&RunEvent::from(e)));
                true
            })
            .map_err(as_error)
        }
    }
}
