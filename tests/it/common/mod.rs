//! Helpers shared by the integration tests, by concern: running the
//! binary and reading what it said (here), making and damaging databases
//! ([`db`]), the real services and the way to reach them ([`services`]),
//! the independent validators ([`validators`]), processes, signals and the
//! kill -9 loop ([`process`]), and an anchored setup with its keys
//! ([`anchored`]), and builders for the invocations tests repeat
//! ([`commands`]: `Follow`), and real witnesses ([`witnesses`]). Everything is re-exported: tests `use crate::common::*`.

use std::path::Path;
use std::process::{Command, Output};

/// Each named `async fn` of the module, run as a test against both Kafka
/// brokers: `on_tansu::NAME` and `on_apache_kafka::NAME` (see
/// [`services::Broker`]).
macro_rules! on_both_brokers {
    ($($name:ident),* $(,)?) => {
        mod on_tansu {
            $(
                #[tokio::test]
                async fn $name() {
                    crate::common::on_broker(crate::common::Broker::Tansu, super::$name()).await
                }
            )*
        }
        mod on_apache_kafka {
            $(
                #[tokio::test]
                async fn $name() {
                    crate::common::on_broker(crate::common::Broker::ApacheKafka, super::$name()).await
                }
            )*
        }
    };
}

mod anchored;
mod commands;
mod db;
mod process;
mod services;
mod validators;
mod witnesses;

pub use anchored::*;
pub use commands::*;
pub use db::*;
pub use process::*;
pub use services::*;
pub use validators::*;
pub use witnesses::*;

/// The `chainship` binary under test.
pub fn bin() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_chainship"));
    // Tests must not pick up a developer's settings.
    for (key, _) in std::env::vars() {
        if key.starts_with("CHAINSHIP_") && !key.starts_with("CHAINSHIP_TEST_") {
            cmd.env_remove(key);
        }
    }
    cmd.env("RUST_LOG", "warn");
    // Most tests count the heads of an export in batches: a head per batch.
    // The 10s default is tested on its own (`default_bin`).
    cmd.env("CHAINSHIP_ANCHOR_INTERVAL", "0s");
    cmd
}

/// The binary with the defaults a user gets (no `--anchor-interval 0s`).
pub fn default_bin() -> Command {
    let mut cmd = bin();
    cmd.env_remove("CHAINSHIP_ANCHOR_INTERVAL");
    cmd
}

/// Runs `chainship ARGS` and returns its output.
pub fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("running chainship")
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn code(out: &Output) -> i32 {
    out.status.code().expect("exited, not killed")
}

pub fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}
