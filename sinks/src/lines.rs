//! Reading a copy back as record lines: the callback every reader feeds,
//! and JSON Lines read from any byte stream (a file, a decompressed object).

use std::io::BufRead;

use crate::error::SinkError;

/// Called with each record line and a function naming its place in the copy
/// (file and line, object, or partition and offset) for messages.
pub type OnRecord<'a> = dyn FnMut(&[u8], &dyn Fn() -> String) + 'a;

/// Handed to the record callback, at a place that says what is wrong, for
/// something wrong with the copy as a whole (a stray object, an object that
/// is not what its name says): a line that is no record, so a checker
/// reports it as a finding.
pub const NOT_A_RECORD: &[u8] = b"-";

/// Calls `each` with every non-empty line of `reader`, named `name line N`.
pub fn read_lines(mut reader: impl BufRead, name: &str, each: &mut OnRecord<'_>) -> Result<(), SinkError> {
    let mut line = Vec::new();
    let mut number = 0u64;
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| SinkError::permanent(format!("{name}: {e}")))?;
        if n == 0 {
            return Ok(());
        }
        number += 1;
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        if text.is_empty() {
            continue;
        }
        each(text, &|| format!("{name} line {number}"));
    }
}
