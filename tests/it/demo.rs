//! `chainship demo`, the README's first command, runs offline and shows
//! every step of the story.

use crate::common;

#[test]
fn the_demo_runs_offline_and_catches_both_tamperings() {
    let dir = tempfile::TempDir::new().unwrap();
    let work = dir.path().join("demo");
    let out = common::run(&["demo", "--dir", common::path_str(&work), "--writer-for", "1s"]);
    let text = common::stdout(&out);
    assert_eq!(common::code(&out), 0, "{text}{}", common::stderr(&out));
    for step in [
        "1. key",
        "2. followed",
        "3. anchor verify audit.db: ok",
        "4. altered seq 1000",
        "exits 1: altered at seq 1000",
        "5. restored",
        "exits 1: fork at seq",
        "checkpoints (with their Merkle tiles)",
        "check-proof of its record: ok; of the record with its payload changed: not proven",
        "8. evidence for run run_",
        "check-evidence names the unknown-outcome",
        "all as expected",
    ] {
        assert!(text.contains(step), "missing {step:?} in:\n{text}");
    }
    assert!(work.join("events.jsonl").exists() && work.join("anchors").is_dir());
    let checked = common::run(&[
        "check-evidence",
        common::path_str(&work.join("evidence.tar")),
        "--trusted-key",
        text.split("verifier ").nth(1).unwrap().split(')').next().unwrap(),
    ]);
    assert_eq!(
        common::code(&checked),
        1,
        "the run's finding: {}",
        common::stdout(&checked)
    );
    assert!(
        common::stdout(&checked).contains("unknown-outcome"),
        "{}",
        common::stdout(&checked)
    );
    let again = common::run(&["demo", "--dir", common::path_str(&work)]);
    assert_eq!(
        common::code(&again),
        2,
        "an existing directory is refused, never reused"
    );
}
