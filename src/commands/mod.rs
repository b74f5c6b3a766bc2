//! One module per subcommand.

pub mod anchor;
pub mod follow;
pub mod generate;
pub mod keygen;
pub mod verify;
