//! The Debian package, installed as an operator installs it: `dpkg -i` on
//! this machine (the suite runs as root; `./scripts/test` built the package
//! with `scripts/package --profile dev` and names it in `CHAINSHIP_TEST_DEB`),
//! lintian with no error, the units verified where they landed and enabled
//! (not started), `chainship demo` run as the packaged user, `man` and the
//! bash completion working, and `dpkg --purge` leaving nothing behind but
//! the system user, which Debian keeps.

use std::path::Path;
use std::process::{Command, Output};

use crate::common::*;

/// Runs a command, failing the test with its output when it fails.
fn must(cmd: &mut Command, what: &str) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what}: {}\n{}{}",
        out.status,
        stdout(&out),
        stderr(&out)
    );
    out
}

/// Purges the package however the test ends.
struct Installed;

impl Drop for Installed {
    fn drop(&mut self) {
        let _ = Command::new("dpkg").args(["--purge", "chainship"]).output();
    }
}

const INSTALLED: [&str; 9] = [
    "/usr/bin/chainship",
    "/usr/lib/systemd/system/chainship-follow.service",
    "/usr/lib/systemd/system/chainship-verify.service",
    "/usr/lib/systemd/system/chainship-verify.timer",
    "/usr/lib/sysusers.d/chainship.conf",
    "/etc/chainship/follow.toml",
    "/usr/share/man/man1/chainship-follow.1.gz",
    "/usr/share/bash-completion/completions/chainship",
    "/usr/share/chainship/grafana/chainship.json",
];

const ENABLED: [&str; 2] = [
    "/etc/systemd/system/multi-user.target.wants/chainship-follow.service",
    "/etc/systemd/system/timers.target.wants/chainship-verify.timer",
];

#[test]
fn the_debian_package_installs_works_and_purges_clean() {
    crate::readonly_db::require_root("installing the Debian package");
    let deb = std::env::var("CHAINSHIP_TEST_DEB").unwrap_or_default();
    assert!(
        !deb.is_empty() && Path::new(&deb).exists(),
        "CHAINSHIP_TEST_DEB is not set to a built package: run the suite through ./scripts/test"
    );

    // lintian: warnings are advice, errors are not allowed.
    let lint = Command::new("lintian")
        .args(["--tag-display-limit", "0", &deb])
        .output()
        .expect("lintian (Debian's), installed by the test script");
    let errors: Vec<String> = stdout(&lint)
        .lines()
        .filter(|l| l.starts_with("E: "))
        .map(str::to_owned)
        .collect();
    assert!(errors.is_empty(), "lintian errors: {errors:#?}");

    let _installed = Installed;
    must(Command::new("dpkg").args(["-i", &deb]), "dpkg -i");
    for path in INSTALLED {
        assert!(Path::new(path).exists(), "{path} was not installed");
    }
    // Enabled the way Debian packages enable units, never started.
    for link in ENABLED {
        assert!(Path::new(link).is_symlink(), "{link}: the unit is not enabled");
    }
    must(
        Command::new("systemd-analyze").args(["verify", "--man=no"]).args([
            "/usr/lib/systemd/system/chainship-follow.service",
            "/usr/lib/systemd/system/chainship-verify.service",
            "/usr/lib/systemd/system/chainship-verify.timer",
        ]),
        "systemd-analyze verify of the installed units",
    );
    // The system user, from the sysusers file, owns the state directory.
    must(Command::new("id").arg("chainship"), "the chainship user");
    let state = std::fs::metadata("/var/lib/chainship").expect("/var/lib/chainship");
    assert!(state.is_dir());

    // The packaged binary, as the packaged user: the whole demo.
    let scratch = tempfile::TempDir::new().unwrap();
    std::fs::set_permissions(scratch.path(), std::os::unix::fs::PermissionsExt::from_mode(0o1777)).unwrap();
    let demo = must(
        Command::new("runuser")
            .args([
                "-u",
                "chainship",
                "--",
                "/usr/bin/chainship",
                "demo",
                "--events",
                "2000",
            ])
            .env("TMPDIR", scratch.path()),
        "chainship demo as the chainship user",
    );
    assert!(stdout(&demo).contains("all as expected"), "{}", stdout(&demo));

    // man finds the page; bash completes from the installed script.
    let page = must(
        Command::new("man").args(["-P", "cat", "chainship-follow"]),
        "man chainship-follow",
    );
    assert!(stdout(&page).contains("--on-break"), "{}", stdout(&page));
    let completion = must(
        Command::new("bash").args([
            "-c",
            "source /usr/share/bash-completion/completions/chainship; complete -p chainship",
        ]),
        "the installed bash completion",
    );
    assert!(stdout(&completion).contains("-F _chainship chainship"));

    // Purged: nothing left but the user.
    must(Command::new("dpkg").args(["--purge", "chainship"]), "dpkg --purge");
    for path in INSTALLED
        .iter()
        .chain(&ENABLED)
        .chain(&["/etc/chainship", "/var/lib/chainship"])
    {
        assert!(
            std::fs::symlink_metadata(path).is_err(),
            "{path} is left after dpkg --purge"
        );
    }
    let status = Command::new("dpkg").args(["-s", "chainship"]).output().unwrap();
    assert!(!status.status.success(), "dpkg still knows the package after --purge");
}
