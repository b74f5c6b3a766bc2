//! Every flag is declared once, here, in a small group flattened into each
//! command that takes it; commands add only their own flags. Environment
//! variables follow from the long names (see `env_names`).

pub mod anchor;
pub mod db;
pub mod sink;

use clap::Args;

pub use anchor::AnchorS3Args;
pub use db::{DbArgs, SchemaArgs};
pub use sink::{SinkArgs, SinkConnectArgs, SinkWriteArgs};

/// `--origin`, required.
#[derive(Args, Clone, Debug)]
pub struct OriginArg {
    /// Whose chain this is, as it appears in records, sink keys and signed
    /// heads (e.g. prod-eu1/agentrt).
    #[arg(long, value_parser = crate::origin::parse_origin)]
    pub origin: String,
}

/// `--json`.
#[derive(Args, Clone, Copy, Debug)]
pub struct OutputArgs {
    /// Print the result as one JSON document on stdout (logs stay on stderr).
    #[arg(long)]
    pub json: bool,
}
