//! The flags that say which database and which table and columns to read,
//! shared by every command that reads the audit database.

use std::path::{Path, PathBuf};

use chainship_chain::{OpenOptions, Schema};
use clap::Args;

use crate::exit::CliError;

/// `--db` and how to read it. `--db` is optional here; commands that need
/// it say so with `mut_arg("db", |a| a.required(true))`.
#[derive(Args, Clone, Debug)]
pub struct DbArgs {
    /// The audit database (SQLite), opened read-only; never written.
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Follow the database path even if it is a symbolic link.
    #[arg(long)]
    pub allow_symlink: bool,
    #[command(flatten)]
    pub schema: SchemaArgs,
}

/// Table and column names (agentrt's by default).
#[derive(Args, Clone, Debug)]
pub struct SchemaArgs {
    /// The table that holds the events.
    #[arg(long, default_value = "events", value_name = "NAME", help_heading = "Schema")]
    pub table: String,
    /// Column of the event's seq (the chain's order).
    #[arg(long, default_value = "seq", value_name = "NAME", help_heading = "Schema")]
    pub seq_column: String,
    /// Column of the run id.
    #[arg(long, default_value = "run_id", value_name = "NAME", help_heading = "Schema")]
    pub run_id_column: String,
    /// Column of the step id.
    #[arg(long, default_value = "step_id", value_name = "NAME", help_heading = "Schema")]
    pub step_id_column: String,
    /// Column of the event's time, as stored.
    #[arg(long, default_value = "at", value_name = "NAME", help_heading = "Schema")]
    pub at_column: String,
    /// Column of the event's type.
    #[arg(long, default_value = "type", value_name = "NAME", help_heading = "Schema")]
    pub type_column: String,
    /// Column of the payload JSON, as stored.
    #[arg(long, default_value = "payload_json", value_name = "NAME", help_heading = "Schema")]
    pub payload_column: String,
    /// Column of the stored hash (64 lower-case hex).
    #[arg(long, default_value = "hash", value_name = "NAME", help_heading = "Schema")]
    pub hash_column: String,
}

impl DbArgs {
    /// The database path (clap enforces it where a command needs it).
    pub fn path(&self) -> Result<&Path, CliError> {
        self.db.as_deref().ok_or_else(|| CliError::usage("--db is required"))
    }

    /// The open options, with the names checked before anything is opened.
    pub fn open_options(&self) -> Result<OpenOptions, chainship_chain::SchemaError> {
        self.schema.open_options(self.allow_symlink)
    }
}

impl SchemaArgs {
    /// How to open a database with these table and column names.
    pub fn open_options(&self, allow_symlink: bool) -> Result<OpenOptions, chainship_chain::SchemaError> {
        let s = self;
        let schema = Schema {
            table: s.table.clone(),
            seq: s.seq_column.clone(),
            run_id: s.run_id_column.clone(),
            step_id: s.step_id_column.clone(),
            at: s.at_column.clone(),
            kind: s.type_column.clone(),
            payload_json: s.payload_column.clone(),
            hash: s.hash_column.clone(),
        };
        schema.validate()?;
        Ok(OpenOptions { schema, allow_symlink })
    }
}
