//! `--config chainship.toml` and `chainship config check`.

use crate::common::*;
use tempfile::TempDir;

fn write(dir: &TempDir, name: &str, text: &str) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path_str(&path).to_owned()
}

#[test]
fn unknown_keys_and_bad_values_name_file_line_and_key() {
    let dir = TempDir::new().unwrap();
    let unknown = write(&dir, "a.toml", "origin = \"x/y\"\n\nbatch_sise = 3\n");
    let out = run(&["config", "check", "--config", &unknown]);
    assert_eq!(code(&out), 2);
    assert_eq!(
        stderr(&out).trim(),
        format!("chainship: {unknown}:3: batch_sise: unknown key (not a flag of any chainship command)")
    );

    let bad_url = write(&dir, "b.toml", "origin = \"x/y\"\nsink = \"ftp://host/x\"\n");
    let out = run(&["config", "check", "--config", &bad_url]);
    assert_eq!(code(&out), 2);
    let err = stderr(&out);
    assert!(
        err.starts_with(&format!("chainship: {bad_url}:2: sink: invalid value 'ftp://host/x'")),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1);

    // The same checks guard every command, not only config check.
    let out = run(&["verify", "--config", &unknown]);
    assert_eq!(code(&out), 2);
    // Valid one by one, not together: zstd has no level 25.
    let clash = write(&dir, "d.toml", "s3-compression = \"zstd\"\ns3-compression-level = 25\n");
    let out = run(&["config", "check", "--config", &clash]);
    assert_eq!(code(&out), 2);
    assert_eq!(
        stderr(&out).trim(),
        format!("chainship: {clash}: --s3-compression-level: compression level 25 is not one zstd accepts (1..=19)")
    );
    let broken = write(&dir, "c.toml", "origin = [\n");
    let out = run(&["config", "check", "--config", &broken]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("c.toml:"), "{}", stderr(&out));
}

#[test]
fn flags_and_environment_override_the_file_and_secrets_are_masked() {
    let dir = TempDir::new().unwrap();
    let cfg = write(
        &dir,
        "chainship.toml",
        "db = \"audit.db\"\norigin = \"prod/agentrt\"\nsink = \"file:out.jsonl\"\ncursor = \"file:cursor\"\nbatch-size = 250\n\
         s3_secret_access_key = \"AKIA-SECRET\"\n[kafka]\n\"sasl.password\" = \"hunter2\"\n\"compression.type\" = \"zstd\"\n",
    );
    let out = bin()
        .args(["config", "check", "--config", &cfg, "--json"])
        .env("CHAINSHIP_POLL_INTERVAL", "1s")
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        !text.contains("hunter2") && !text.contains("AKIA-SECRET"),
        "secrets printed: {text}"
    );
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let get = |key: &str| {
        json["settings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["key"] == key)
            .cloned()
            .unwrap()
    };
    assert_eq!(get("batch-size")["values"][0], "250");
    assert!(
        get("batch-size")["source"]
            .as_str()
            .unwrap()
            .ends_with("chainship.toml:5")
    );
    assert_eq!(get("poll-interval")["source"], "environment");
    assert_eq!(
        get("kafka-opt")["values"],
        serde_json::json!(["sasl.password=****", "compression.type=zstd"])
    );
    assert_eq!(get("s3-secret-access-key")["values"][0], "****");

    // A real run takes its settings from the file, a flag overriding one.
    let db = generate(dir.path(), "audit.db", 300);
    let out = bin()
        .current_dir(dir.path())
        .args([
            "follow",
            "--once",
            "--config",
            &cfg,
            "--from-start",
            "--batch-size",
            "100",
        ])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let (last, _) = reverify_jsonl(&dir.path().join("out.jsonl"), "prod/agentrt");
    assert_eq!(last, 300);
    assert!(db.exists());
}

#[test]
fn config_check_reports_what_a_command_still_needs() {
    let dir = TempDir::new().unwrap();
    let cfg = write(&dir, "partial.toml", "origin = \"prod/agentrt\"\n");
    let out = run(&["config", "check", "--config", &cfg]);
    // A file that cannot run its command is a setup error (exit 2), named on one line.
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("partial.toml: missing for `chainship follow`: --sink, --db, --cursor"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn config_check_checks_a_file_as_the_command_it_is_for() {
    // The shipped nightly settings hold `trusted-key`, which only the
    // verifiers take: checked as `anchor verify`, with nothing missing.
    let shipped = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/verify.toml");
    let out = run(&["config", "check", "--config", shipped]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert!(
        stdout(&out).contains("for `chainship anchor verify`"),
        "{}",
        stdout(&out)
    );
    let follower = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/chainship.toml");
    let out = run(&["config", "check", "--config", follower]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("for `chainship follow`"), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("on-break = wait"),
        "the shipped follower waits at a break: {}",
        stdout(&out)
    );
}

#[test]
fn a_closed_stdout_ends_quietly_without_a_panic() {
    let dir = TempDir::new().unwrap();
    let file = write(&dir, "a.toml", "origin = \"x/y\"\n");
    // The reader is gone before chainship writes a byte, as with `chainship ... | head -0`.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = bin()
        .args(["config", "check", "--config", &file])
        .stdout(writer)
        .output()
        .unwrap();
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
    assert_eq!(code(&out), 141, "the status of a tool ended by a closed pipe");
}

#[test]
fn the_file_applies_to_the_command_that_runs_whatever_the_arguments_spell() {
    // A config file named like a command, given before the command: the
    // settings must reach `check`, not `verify`.
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "a.db", 10);
    std::fs::write(
        dir.path().join("verify"),
        format!("db = \"{}\"\norigin = \"t/o\"\nsink = \"stdout:\"\n", path_str(&db)),
    )
    .unwrap();
    let out = bin()
        .current_dir(dir.path())
        .args(["--config", "verify", "check", "--json"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let checks = report["checks"].as_array().unwrap();
    assert!(
        checks
            .iter()
            .any(|c| c["check"].as_str().unwrap().starts_with("database ") && c["ok"] == true),
        "{report}"
    );
}

#[test]
fn a_config_file_can_never_narrow_what_a_check_covers() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "a.db", 30);
    for (key, value) in [
        ("allow-no-heads", "true"),
        ("after", "\"5:abc\""),
        ("allow_no_heads", "false"),
        ("profile", "\"none\""),
    ] {
        let cfg = write(&dir, "n.toml", &format!("origin = \"x/y\"\n{key} = {value}\n"));
        let out = run(&["verify", "--config", &cfg, "--db", path_str(&db)]);
        assert_eq!(code(&out), 2, "{key}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(&format!("{cfg}:2: {key}: taken from the command line only")),
            "{}",
            stderr(&out)
        );
    }
    // `from` is verify's range start and verify-export's source: a file may
    // name the source, and verify still checks the whole chain.
    let cfg = write(&dir, "f.toml", "from = \"file:/siem/events.jsonl\"\n");
    let out = run(&["verify", "--config", &cfg, "--db", path_str(&db)]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).contains("30 event(s), seq 1 to 30"), "{}", stdout(&out));
}
