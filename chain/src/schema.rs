//! The names of the events table and its columns. agentrt's are the
//! defaults; other deployments can set their own, but only plain SQL
//! identifiers are accepted, because they end up inside SQL text.

use std::fmt;

/// Which table holds the events and what its seven columns are called.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schema {
    pub table: String,
    pub seq: String,
    pub run_id: String,
    pub step_id: String,
    pub at: String,
    pub kind: String,
    pub payload_json: String,
    pub hash: String,
}

/// agentrt's events table, as `chainship generate` and `chainship restore`
/// create it (the default names above, `AUTOINCREMENT` so seqs are never
/// reused). Kept as one text: `sqlite3 .dump` shows it verbatim.
pub const AGENTRT_EVENTS_TABLE: &str = "CREATE TABLE events (
  seq          INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id       TEXT NOT NULL,
  step_id      TEXT NOT NULL DEFAULT '',
  at           TEXT NOT NULL,
  type         TEXT NOT NULL,
  payload_json TEXT NOT NULL,
  hash         TEXT NOT NULL DEFAULT ''
)";

/// agentrt's index on its events table: one run's events by seq, read
/// without scanning the log (`evidence` reads a run's rows through it).
pub const AGENTRT_EVENTS_INDEX: &str = "CREATE INDEX events_run ON events(run_id, seq)";

impl Default for Schema {
    fn default() -> Self {
        Schema {
            table: "events".into(),
            seq: "seq".into(),
            run_id: "run_id".into(),
            step_id: "step_id".into(),
            at: "at".into(),
            kind: "type".into(),
            payload_json: "payload_json".into(),
            hash: "hash".into(),
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "{setting} {name:?} is not a plain SQL identifier (letters, digits and _, not starting with a digit, at most 64 characters)"
)]
pub struct SchemaError {
    pub setting: &'static str,
    pub name: String,
}

impl crate::HasKind for SchemaError {
    fn kind(&self) -> crate::ErrorKind {
        crate::ErrorKind::Permanent
    }

    fn setting(&self) -> Option<crate::Setting> {
        Some(match self.setting {
            "table name" => crate::Setting::Table,
            column => crate::Setting::Column(column),
        })
    }
}

impl Schema {
    /// Every name with the setting it comes from, in the column order the
    /// reader selects: seq, run_id, step_id, at, type, payload_json, hash.
    pub fn columns(&self) -> [(&'static str, &str); 7] {
        [
            ("seq column", &self.seq),
            ("run_id column", &self.run_id),
            ("step_id column", &self.step_id),
            ("at column", &self.at),
            ("type column", &self.kind),
            ("payload_json column", &self.payload_json),
            ("hash column", &self.hash),
        ]
    }

    /// Refuses any name that is not a plain identifier.
    pub fn validate(&self) -> Result<(), SchemaError> {
        std::iter::once(("table name", self.table.as_str()))
            .chain(self.columns())
            .try_for_each(|(setting, name)| {
                if is_plain_identifier(name) {
                    Ok(())
                } else {
                    Err(SchemaError {
                        setting,
                        name: name.to_owned(),
                    })
                }
            })
    }

    /// The table name, quoted for SQL. Only call after [`Schema::validate`].
    pub(crate) fn quoted_table(&self) -> Quoted<'_> {
        Quoted(&self.table)
    }

    /// `"seq", "run_id", ...` — the seven columns, quoted, in reader order.
    pub(crate) fn select_list(&self) -> String {
        self.columns()
            .iter()
            .map(|(_, name)| Quoted(name).to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// An identifier in double quotes. Safe because validated names never hold a quote.
pub(crate) struct Quoted<'a>(pub &'a str);

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{}\"", self.0)
    }
}

fn is_plain_identifier(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b'a'..=b'z' | b'A'..=b'Z' | b'_'))
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && name.len() <= 64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_agentrt_names() {
        let schema = Schema::default();
        assert!(schema.validate().is_ok());
        assert_eq!(
            schema.select_list(),
            r#""seq", "run_id", "step_id", "at", "type", "payload_json", "hash""#
        );
    }

    #[test]
    fn refuses_names_that_are_not_plain_identifiers() {
        for bad in [
            "",
            "1seq",
            "seq; DROP TABLE events",
            "se\"q",
            "naïve",
            "a b",
            &"x".repeat(65),
        ] {
            let schema = Schema {
                hash: bad.to_owned(),
                ..Schema::default()
            };
            let err = schema.validate().unwrap_err();
            assert_eq!(err.setting, "hash column");
            assert_eq!(err.name, bad);
        }
        let schema = Schema {
            table: "audit.events".into(),
            ..Schema::default()
        };
        assert_eq!(schema.validate().unwrap_err().setting, "table name");
    }
}
