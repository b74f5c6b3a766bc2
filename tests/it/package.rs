//! The Debian package, installed as an operator installs it: `dpkg -i` on
//! this machine (the suite runs as root; `./scripts/test` built the package
//! with `scripts/package --profile dev` and names it in `CHAINSHIP_TEST_DEB`),
//! lintian with no error, the units verified where they landed and enabled
//! (not started), `chainship demo` run as the packaged user, `man` and the
//! bash completion working, the install guide's setup block run as written
//! (docs/src/guides/install.md: keys, trusted keys, the S3 credential and
//! its drop-ins), and `dpkg --purge` leaving nothing behind but the system
//! user, which Debian keeps, and what the operator made, which it names.

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

/// What the install guide makes that a purge leaves, by design (it says so).
const OPERATORS: [&str; 4] = [
    "/etc/chainship",
    "/etc/systemd/system/chainship-follow.service.d",
    "/etc/systemd/system/chainship-verify.service.d",
    "/etc/chainship/keys",
];

/// Purges the package and removes what the guide made, however the test ends.
struct Installed;

impl Drop for Installed {
    fn drop(&mut self) {
        let _ = Command::new("dpkg").args(["--purge", "chainship"]).output();
        for dir in OPERATORS {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// The install guide's setup block (the `bash` block after the comment naming
/// this test), as written.
fn guide_setup_block() -> String {
    let guide = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/guides/install.md");
    let text = std::fs::read_to_string(&guide).unwrap();
    let after = text
        .split_once("<!-- tests/it/package.rs runs this block")
        .unwrap_or_else(|| panic!("{}: the block the package test runs is not marked", guide.display()))
        .1;
    let block = after.split_once("```bash\n").expect("a bash block after the mark").1;
    block.split_once("\n```").expect("the block ends").0.to_owned()
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
    // The install guide's setup, run as written. systemd is not PID 1 here,
    // so a stand-in `systemctl` first on PATH records what it was asked.
    let keys = std::fs::metadata("/etc/chainship/keys").expect("the package makes /etc/chainship/keys");
    use std::os::unix::fs::MetadataExt;
    assert_eq!((keys.uid(), keys.mode() & 0o7777), (0, 0o700), "keys/: root's alone");
    let shim = tempfile::TempDir::new().unwrap();
    let asked = shim.path().join("asked");
    std::fs::write(
        shim.path().join("systemctl"),
        format!("#!/bin/sh\necho \"$*\" >> '{}'\n", path_str(&asked)),
    )
    .unwrap();
    std::fs::set_permissions(
        shim.path().join("systemctl"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let path = format!("{}:{}", path_str(shim.path()), std::env::var("PATH").unwrap());
    must(
        Command::new("bash")
            .args(["-euo", "pipefail", "-c", &guide_setup_block()])
            .env("PATH", path)
            .current_dir(env!("CARGO_MANIFEST_DIR")),
        "the install guide's setup block",
    );
    let mode = |p: &str| std::fs::metadata(p).unwrap_or_else(|e| panic!("{p}: {e}")).mode() & 0o7777;
    assert_eq!(mode("/etc/chainship/keys/head.key"), 0o600);
    assert_eq!(mode("/etc/chainship/keys/anchor-s3"), 0o600);
    let trusted = std::fs::read_to_string("/etc/chainship/trusted-keys").unwrap();
    assert!(trusted.starts_with("prod-eu1/chainship+"), "{trusted}");
    assert_eq!(std::fs::read_to_string(&asked).unwrap().trim(), "daemon-reload");
    must(
        Command::new("systemd-analyze").args(["verify", "--man=no"]).args([
            "/usr/lib/systemd/system/chainship-follow.service",
            "/usr/lib/systemd/system/chainship-verify.service",
        ]),
        "systemd-analyze verify of the units with the guide's drop-ins",
    );
    for unit in ["chainship-follow", "chainship-verify"] {
        let shown = must(
            Command::new("systemd-analyze").args(["cat-config", &format!("systemd/system/{unit}.service")]),
            "the unit with its drop-in",
        );
        assert!(
            stdout(&shown).contains("LoadCredential=anchor-s3:/etc/chainship/keys/anchor-s3"),
            "{unit}: {}",
            stdout(&shown)
        );
    }
    // The packaged binary reads the credential as the unit hands it (no secret echoed).
    let creds = Command::new("/usr/bin/chainship")
        .args([
            "check",
            "--origin",
            "o/a",
            "--sink",
            "stdout:",
            "--anchor",
            "s3://anchors/heads",
        ])
        .args(["--anchor-s3-endpoint", "http://127.0.0.1:9", "--json"])
        .env("CHAINSHIP_ANCHOR_S3_CREDENTIALS_FILE", "/etc/chainship/keys/anchor-s3")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .output()
        .unwrap();
    let said = format!("{}{}", stdout(&creds), stderr(&creds));
    assert!(
        !said.contains("no AWS credentials"),
        "the credentials file was read: {said}"
    );
    assert!(!said.contains("replace-with-the-anchor-writers-secret"), "{said}");

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

    // Purged: nothing left but the user and what the operator made, which it names.
    let purged = must(Command::new("dpkg").args(["--purge", "chainship"]), "dpkg --purge");
    let said = format!("{}{}", stdout(&purged), stderr(&purged));
    for left in [
        "/etc/chainship/keys/",
        "/etc/chainship/trusted-keys",
        "chainship-follow.service.d",
    ] {
        assert!(said.contains(left), "the purge says it leaves {left}: {said}");
    }
    for path in INSTALLED.iter().chain(&ENABLED).chain(&[
        "/etc/chainship/follow.toml",
        "/etc/chainship/verify.toml",
        "/var/lib/chainship",
    ]) {
        assert!(
            std::fs::symlink_metadata(path).is_err(),
            "{path} is left after dpkg --purge"
        );
    }
    for kept in ["/etc/chainship/keys/head.key", "/etc/chainship/trusted-keys"] {
        assert!(Path::new(kept).exists(), "{kept}: the operator's, kept by the purge");
    }
    let status = Command::new("dpkg").args(["-s", "chainship"]).output().unwrap();
    assert!(!status.status.success(), "dpkg still knows the package after --purge");
}
