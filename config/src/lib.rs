//! Where a flag's value may come from besides the command line: a
//! `CHAINSHIP_*` environment variable named by one rule ([`env`]) and a
//! TOML config file whose keys are the long flag names ([`ConfigFile`]),
//! applied to a clap command tree as the flags' defaults; and what a command
//! would run with, secrets masked ([`Effective`]). Flags that narrow what a
//! check covers come from the command line only ([`env::command_line_only`]).

pub mod effective;
pub mod env;
mod file;

pub use effective::{Effective, Shown};
pub use file::{ConfigFile, Entry, apply_everywhere, config_path, leaf_commands, leaf_paths};

/// Whether a setting's value must not be printed.
pub fn is_secret(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    [
        "secret",
        "password",
        "token",
        "sasl.oauthbearer",
        "ssl.key",
        "credentials",
    ]
    .iter()
    .any(|s| name.contains(s))
}

/// Whether a librdkafka setting's value must not be printed: beyond what
/// [`is_secret`] names, every SASL setting but the mechanism, and TLS key
/// material (`ssl.key.pem`, `ssl.keystore.password`, ...).
pub fn is_secret_kafka(key: &str) -> bool {
    let key = key.trim().to_ascii_lowercase();
    is_secret(&key)
        || (key.starts_with("sasl.") && !matches!(key.as_str(), "sasl.mechanism" | "sasl.mechanisms"))
        || (key.starts_with("ssl") && key.contains("key"))
}
