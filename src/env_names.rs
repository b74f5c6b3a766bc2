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
const COMMAND_LINE_ONLY: [(&str, &str); 8] = [
    ("verify", "from"),
    ("verify", "to"),
    ("verify-export", "after"),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_flag_of_every_command_follows_the_rule() {
        fn walk(cmd: &Command, path: &str, seen: &mut usize) {
            for arg in cmd.get_arguments() {
                if let Some(long) = arg.get_long().filter(|l| !matches!(*l, "help" | "version")) {
                    let env = arg.get_env().map(|e| e.to_string_lossy().into_owned());
                    let expected = (!command_line_only(cmd.get_name(), long)).then(|| env_name(long));
                    assert_eq!(env, expected, "{path} --{long}");
                    *seen += 1;
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), seen);
            }
        }
        let mut seen = 0;
        walk(&crate::cli_command(), "chainship", &mut seen);
        assert!(seen > 80, "only {seen} flags found");
        assert_eq!(env_name("kafka-opt"), "CHAINSHIP_KAFKA_OPT");
        assert!(command_line_only("verify", "from") && !command_line_only("verify-export", "from"));
        assert!(command_line_only("anchor", "allow-no-heads") && command_line_only("verify-export", "allow-no-heads"));
    }
}
