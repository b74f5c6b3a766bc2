//! Every subcommand's `--help` carries an example, and the top level lists them all.

use crate::common;

#[test]
fn every_subcommand_help_has_an_example() {
    let commands: &[&[&str]] = &[
        &["verify"],
        &["generate"],
        &["follow"],
        &["keygen"],
        &["anchor", "verify"],
        &["anchor", "list"],
        &["demo"],
        &["verify-export"],
        &["check"],
        &["config", "check"],
    ];
    for cmd in commands {
        let mut args = cmd.to_vec();
        args.push("--help");
        let out = common::run(&args);
        assert_eq!(common::code(&out), 0, "{cmd:?}");
        let help = common::stdout(&out);
        assert!(
            help.contains("Examples:\n  chainship "),
            "{cmd:?} --help has no example:\n{help}"
        );
    }
    let top = common::stdout(&common::run(&["--help"]));
    for name in [
        "verify",
        "follow",
        "anchor",
        "verify-export",
        "check",
        "config",
        "demo",
        "keygen",
        "generate",
    ] {
        assert!(
            top.contains(&format!("  {name} ")),
            "top-level help lacks {name}:\n{top}"
        );
    }
}
