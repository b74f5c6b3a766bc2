//! One module per subcommand.

pub mod anchor;
pub mod anchor_status;
pub mod check;
pub mod check_proof;
pub mod config_cmd;
pub mod demo;
pub mod diff;
pub mod docs;
pub mod evidence;
pub mod fleet;
pub mod follow;
pub mod generate;
pub mod keygen;
pub mod monitor;
pub mod prove;
pub mod redact;
pub mod restore;
pub mod runs;
pub mod verify;
pub mod verify_export;
