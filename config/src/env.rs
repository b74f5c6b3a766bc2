//! Every flag can be set by an environment variable named by one rule:
//! `--kafka-opt` → `CHAINSHIP_KAFKA_OPT`, `--signing-key` →
//! `CHAINSHIP_SIGNING_KEY`. The rule is applied here, once, to the whole
//! command tree, so no flag can be left out or named off the pattern.
//! Repeatable flags take several values in one variable, separated as the
//! flag's own value delimiter says (`,` for keys, `;` for `--kafka-opt`).

use clap::{Arg, Command};

/// The variable for a long flag name.
pub fn env_name(long: &str) -> String {
    format!("CHAINSHIP_{}", long.to_ascii_uppercase().replace('-', "_"))
}

/// Flags that narrow what a check covers, or let it pass on nothing: never
/// taken from the environment, so a variable left in a job's environment
/// (or the same name meaning another flag elsewhere, `CHAINSHIP_FROM`) can
/// never make a nightly check cover less. Given on the command line only.
pub const COMMAND_LINE_ONLY: [(&str, &str); 10] = [
    ("verify", "from"),
    ("verify", "to"),
    ("verify-export", "after"),
    ("*", "origin-prefix"),
    ("*", "shard"),
    ("*", "allow-no-heads"),
    ("*", "max-unvouched"),
    ("restore", "to"),
    ("runs", "run"),
    // `--profile none` turns the run check off everywhere.
    ("*", "profile"),
];

/// Names every flag's variable by the rule, in every subcommand. Values are
/// never shown in `--help` (several are secrets).
pub fn apply(cmd: Command) -> Command {
    let name = cmd.get_name().to_owned();
    cmd.mut_args(|arg| name_arg(&name, arg)).mut_subcommands(apply)
}

/// Whether `--long` of command `name` is set on the command line only.
pub fn command_line_only(name: &str, long: &str) -> bool {
    COMMAND_LINE_ONLY
        .iter()
        .any(|(c, l)| *l == long && (*c == "*" || *c == name))
}

fn name_arg(command: &str, arg: Arg) -> Arg {
    match arg.get_long() {
        Some("help" | "version") | None => arg,
        Some(long) if command_line_only(command, long) => arg,
        Some(long) => {
            let name = env_name(long);
            arg.env(name).hide_env_values(true)
        }
    }
}
