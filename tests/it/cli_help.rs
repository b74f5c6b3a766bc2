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

/// `chainship man` writes chainship(1) and a page per subcommand, each of
/// which `man -l` renders (groff, as an installed page would be), with the
/// examples of its `--help`.
#[test]
fn man_pages_render_with_man_and_carry_the_examples() {
    let dir = tempfile::TempDir::new().unwrap();
    let out = common::run(&["man", "--out", common::path_str(dir.path())]);
    assert_eq!(common::code(&out), 0, "{}", common::stderr(&out));
    let mut pages: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    pages.sort();
    for needed in [
        "chainship.1",
        "chainship-follow.1",
        "chainship-verify-export.1",
        "chainship-anchor-verify.1",
        "chainship-check-proof.1",
    ] {
        assert!(pages.contains(&needed.to_owned()), "{needed} missing: {pages:?}");
    }
    for page in &pages {
        let rendered = std::process::Command::new("man")
            .args(["-l", "-P", "cat"])
            .arg(dir.path().join(page))
            .env("MANWIDTH", "100")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&rendered.stdout);
        assert!(
            rendered.status.success(),
            "man -l {page}: {}",
            String::from_utf8_lossy(&rendered.stderr)
        );
        assert!(text.contains("NAME") && text.contains("SYNOPSIS"), "{page}:\n{text}");
    }
    let follow = std::process::Command::new("man")
        .args(["-l", "-P", "cat"])
        .arg(dir.path().join("chainship-follow.1"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&follow.stdout);
    assert!(text.contains("--on-break") && text.contains("Examples:"), "{text}");
}

/// The bash completion loads, and completes subcommands and flags.
#[test]
fn bash_completion_completes_subcommands_and_flags() {
    let dir = tempfile::TempDir::new().unwrap();
    let script = dir.path().join("chainship.bash");
    let out = common::run(&["completions", "bash"]);
    assert_eq!(common::code(&out), 0, "{}", common::stderr(&out));
    std::fs::write(&script, &out.stdout).unwrap();
    let complete = |words: &str| {
        let program = format!(
            "source {script}; complete -p chainship; COMP_WORDS=({words}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); \
             COMP_LINE=\"{words}\"; COMP_POINT=${{#COMP_LINE}}; \
             _chainship chainship \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; \
             echo \"${{COMPREPLY[@]}}\"",
            script = common::path_str(&script)
        );
        let out = std::process::Command::new("bash")
            .args(["-c", &program])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let subcommands = complete("chainship ver");
    assert!(subcommands.contains("-F _chainship chainship"), "{subcommands}");
    assert!(
        subcommands.contains("verify") && subcommands.contains("verify-export"),
        "{subcommands}"
    );
    let flags = complete("chainship follow --on-b");
    assert!(flags.contains("--on-break"), "{flags}");
    let nested = complete("chainship anchor ''");
    assert!(nested.contains("verify") && nested.contains("list"), "{nested}");
}
