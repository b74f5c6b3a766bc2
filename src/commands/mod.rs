//! One module per subcommand.

pub mod follow;
pub mod generate;
pub mod verify;
