//! `chainship follow` to the file sink: end to end with a live writer,
//! crashes, a rewritten database, a chain break, and bad input.

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use crate::common::*;
use tempfile::TempDir;

const ORIGIN: &str = "test/agentrt";

/// The `follow` arguments as a list, for the test that breaks them one at a time.
fn follow_args<'a>(db: &'a Path, out: &'a Path, cursor: &'a Path) -> Vec<String> {
    vec![
        "follow".into(),
        "--db".into(),
        path_str(db).into(),
        "--origin".into(),
        ORIGIN.into(),
        "--sink".into(),
        format!("file:{}", path_str(out)),
        "--cursor".into(),
        format!("file:{}", path_str(cursor)),
    ]
}

/// `follow` of `db` into the file `out` (the cursor given as `file:PATH`).
fn follow_cmd(db: &Path, out: &Path, cursor: &Path) -> Follow {
    Follow::new(db, ORIGIN)
        .file_sink(out)
        .args(["--cursor", &format!("file:{}", path_str(cursor))])
}

fn spawn_follow(db: &Path, out: &Path, cursor: &Path, extra: &[&str]) -> Child {
    follow_cmd(db, out, cursor)
        .args(extra)
        .command()
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn follow_once(db: &Path, out: &Path, cursor: &Path, extra: &[&str]) -> std::process::Output {
    follow_cmd(db, out, cursor).once().args(extra).output()
}

#[test]
fn live_writer_to_file_sink_every_event_once_in_order() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "live.db", 1000);
    let (out, cursor) = (dir.path().join("out.jsonl"), dir.path().join("cursor"));
    let mut writer = live_writer(&db, "400", &[]);
    let mut follower = KillOnDrop(spawn_follow(
        &db,
        &out,
        &cursor,
        &["--from-start", "--batch-size", "50"],
    ));
    std::thread::sleep(Duration::from_secs(3));
    let final_head = stop_writer(&mut writer, &db);
    let final_seq: u64 = final_head.split(':').next().unwrap().parse().unwrap();
    assert!(
        final_seq > 1500,
        "the writer appended while following: head {final_head}"
    );
    // Within a second of the last commit, the follower has delivered it.
    wait_for_cursor(&cursor, &final_head, Duration::from_secs(2));
    signal(&follower, SIGTERM);
    let status = wait_with_limit(&mut follower, Duration::from_secs(5));
    assert_eq!(status.code(), Some(0), "SIGTERM exits 0");
    let (last_seq, last_hash) = reverify_jsonl(&out, ORIGIN);
    assert_eq!(format!("{last_seq}:{last_hash}"), final_head);
    assert_eq!(
        std::fs::read_to_string(&cursor).unwrap().trim(),
        final_head,
        "the cursor matches the last record"
    );
}

#[test]
fn kill_9_at_twenty_moments_loses_and_duplicates_nothing() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "crash.db", 50_000);
    let (out, cursor) = (dir.path().join("out.jsonl"), dir.path().join("cursor"));
    // A deterministic spread of kill moments, from right at start-up to mid-export.
    // --from-start only applies while there is no cursor yet.
    let progress = kill_9_loop(
        20,
        &mut XorShift::new(0x2545_F491_4F6C_DD1D),
        5..125,
        || spawn_follow(&db, &out, &cursor, &["--from-start", "--batch-size", "200"]),
        || std::fs::metadata(&out).map(|m| m.len()).unwrap_or(0),
    );
    // Finish the export.
    // --from-start only applies if no kill let a batch through.
    let done = follow_once(&db, &out, &cursor, &["--from-start"]);
    assert_eq!(code(&done), 0, "{}", stderr(&done));
    let (last_seq, last_hash) = reverify_jsonl(&out, ORIGIN);
    assert_eq!(
        format!("{last_seq}:{last_hash}"),
        db_head(&db),
        "every event exactly once, in order"
    );
    assert!(
        progress.iter().any(|len| *len > 0),
        "some kills landed mid-export: {progress:?}"
    );
}

#[test]
fn a_torn_last_line_is_cut_and_resent() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "torn.db", 300);
    let (out, cursor) = (dir.path().join("out.jsonl"), dir.path().join("cursor"));
    let first = follow_once(&db, &out, &cursor, &["--from-start"]);
    assert_eq!(code(&first), 0, "{}", stderr(&first));
    // Simulate a crash mid-write: drop the last 40 records' worth of
    // lines and leave half a line behind, with the cursor still at the end.
    let text = std::fs::read(&out).unwrap();
    let lines: Vec<&[u8]> = text.split_inclusive(|b| *b == b'\n').collect();
    let mut damaged: Vec<u8> = lines[..260].concat();
    damaged.extend_from_slice(&lines[260][..lines[260].len() / 2]);
    std::fs::write(&out, &damaged).unwrap();
    std::fs::write(
        &cursor,
        format!("{}\n", {
            let r = chainship_chain::record::Record::parse(lines[199].strip_suffix(b"\n").unwrap()).unwrap();
            format!("{}:{}", r.seq, r.hash)
        }),
    )
    .unwrap();
    let again = follow_once(&db, &out, &cursor, &[]);
    assert_eq!(code(&again), 0, "{}", stderr(&again));
    let (last_seq, _) = reverify_jsonl(&out, ORIGIN);
    assert_eq!(last_seq, 300);
}

#[test]
fn a_rewritten_or_restored_database_stops_the_follower() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "rw.db", 500);
    let older = dir.path().join("older.db");
    std::fs::copy(&db, &older).unwrap();
    append(&db, 200);
    let (out, cursor) = (dir.path().join("out.jsonl"), dir.path().join("cursor"));
    assert_eq!(code(&follow_once(&db, &out, &cursor, &["--from-start"])), 0);

    // An event below the cursor altered: the cursor's own hash is fine, so
    // change the event at the cursor's seq.
    let altered = dir.path().join("altered.db");
    std::fs::copy(&db, &altered).unwrap();
    tamper(&altered)
        .execute(
            "UPDATE events SET hash = replace(hash, substr(hash, 1, 1), 'f') WHERE seq = 700",
            [],
        )
        .unwrap();
    let out2 = follow_once(&altered, &out, &cursor, &[]);
    assert_eq!(code(&out2), 1, "{}", stderr(&out2));
    assert!(
        stderr(&out2).contains("rewritten under the cursor: event seq 700"),
        "{}",
        stderr(&out2)
    );

    // The file replaced by an older copy (500 events, cursor at 700).
    let out3 = follow_once(&older, &out, &cursor, &[]);
    assert_eq!(code(&out3), 1, "{}", stderr(&out3));
    assert!(stderr(&out3).contains("does not hold seq 700"), "{}", stderr(&out3));
    assert!(stderr(&out3).contains("database head is 500:"), "{}", stderr(&out3));
}

#[test]
fn a_break_ships_nothing_past_the_last_good_event() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "brk.db", 1000);
    tamper(&db)
        .execute("UPDATE events SET payload_json = '{}' WHERE seq = 640", [])
        .unwrap();
    let (out, cursor) = (dir.path().join("out.jsonl"), dir.path().join("cursor"));
    let res = follow_once(&db, &out, &cursor, &["--from-start", "--batch-size", "100"]);
    assert_eq!(code(&res), 1, "{}", stderr(&res));
    assert!(stderr(&res).contains("broken at seq 640"), "{}", stderr(&res));
    let (last_seq, last_hash) = reverify_jsonl(&out, ORIGIN);
    assert_eq!(last_seq, 639);
    assert_eq!(
        std::fs::read_to_string(&cursor).unwrap().trim(),
        format!("639:{last_hash}")
    );
}

#[test]
fn a_sink_holding_a_record_the_database_lacks_stops_the_follower() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "a.db", 100);
    let (out, cursor) = (dir.path().join("out.jsonl"), dir.path().join("cursor"));
    assert_eq!(code(&follow_once(&db, &out, &cursor, &["--from-start"])), 0);
    std::fs::remove_file(&cursor).unwrap();
    // A different database, same origin, into the same file.
    let db2 = generate_with(dir.path(), "c.db", 150, &["--seed", "7"]);
    let res = follow_once(&db2, &out, &cursor, &["--from-start"]);
    assert_eq!(code(&res), 1, "{}", stderr(&res));
    assert!(
        stderr(&res).contains("rewritten under the sink file:"),
        "{}",
        stderr(&res)
    );
}

#[test]
fn bad_input_gets_one_line_and_exit_2() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "bad.db", 10);
    let (out, cursor) = (dir.path().join("out.jsonl"), dir.path().join("cursor"));
    let check = |args: Vec<String>, names: &str| {
        let res = bin().args(&args).output().unwrap();
        let err = stderr(&res);
        assert_eq!(code(&res), 2, "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(names), "{args:?}: {err}");
    };
    let mut args = follow_args(&db, &out, &cursor);
    args[6] = "ftp://host/x".into();
    check(args, "unknown scheme \"ftp\"");

    let mut args = follow_args(&db, &out, &cursor);
    args[8] = "file:/nonexistent-chainship-dir/cursor".into();
    args.push("--once".into());
    check(args, "/nonexistent-chainship-dir/cursor");

    std::fs::write(&cursor, "garbage\n").unwrap();
    let mut args = follow_args(&db, &out, &cursor);
    args.push("--once".into());
    check(args, "corrupt");
    std::fs::remove_file(&cursor).unwrap();

    let mut args = follow_args(&db, &out, &cursor);
    args.drain(3..5);
    check(args, "--origin");

    // The sink file is opened on first use: a missing directory still stops the start, named.
    let mut args = follow_args(&db, &out, &cursor);
    args[6] = "file:/nonexistent-chainship-dir/out.jsonl".into();
    args.push("--from-start".into());
    check(args, "file sink /nonexistent-chainship-dir/out.jsonl: cannot open");

    let mut args = follow_args(&db, &out, &cursor);
    args.push("--once".into());
    check(args, "no cursor at");

    // S3 settings are checked before anything is read, whatever the sink.
    for (flags, names) in [
        (
            &["--s3-compression", "zstd", "--s3-compression-level", "25"][..],
            "zstd accepts (1..=19)",
        ),
        (&["--s3-compression-level", "0"][..], "gzip accepts (1..=9)"),
        (&["--s3-compression", "lz4"][..], "unknown compression \"lz4\""),
        (&["--s3-part-size", "1MiB"][..], "S3 parts are at least 5MiB"),
        (&["--s3-batch-bytes", "lots"][..], "\"lots\" is not a size"),
    ] {
        let mut args = follow_args(&db, &out, &cursor);
        args.extend(["--once", "--from-start"].map(String::from));
        args.extend(flags.iter().map(|f| f.to_string()));
        check(args, names);
    }
    assert!(
        !out.exists() || std::fs::read(&out).unwrap().is_empty(),
        "nothing was shipped"
    );
}

#[test]
fn check_with_a_file_sink_creates_nothing() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "c.db", 10);
    let check = |sink: &Path| {
        let out = bin()
            .args(["check", "--json", "--db", path_str(&db), "--origin", "c/agentrt"])
            .args(["--sink", &format!("file:{}", path_str(sink))])
            .output()
            .unwrap();
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let sink_check = json["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["check"].as_str().unwrap().starts_with("sink "))
            .cloned()
            .unwrap();
        (code(&out), sink_check)
    };
    let sink = dir.path().join("out.jsonl");
    let (c, found) = check(&sink);
    assert_eq!(c, 0, "{found}");
    assert!(found["detail"].as_str().unwrap().contains("not there yet"), "{found}");
    let left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("out.jsonl"))
        .collect();
    assert!(left.is_empty(), "no sink file, no probe left: {left:?}");

    std::fs::write(&sink, "{}\n").unwrap();
    let (c, found) = check(&sink);
    assert_eq!(
        (c, found["detail"].as_str()),
        (0, Some("writable, 3 bytes held")),
        "{found}"
    );

    let (c, found) = check(&dir.path().join("missing-dir/out.jsonl"));
    assert_eq!(c, 1, "{found}");
    assert!(
        found["error"].as_str().unwrap().contains("missing-dir/out.jsonl"),
        "{found}"
    );
}

#[test]
fn the_audit_database_is_never_a_sink_or_a_cursor_by_any_path() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "a.db", 65);
    let before = std::fs::read(&db).unwrap();
    let link = dir.path().join("link.jsonl");
    std::os::unix::fs::symlink(&db, &link).unwrap();
    let wal = dir.path().join("a.db-wal");
    let cursor = dir.path().join("cursor");
    for (sink, cursor) in [(&db, &cursor), (&link, &cursor), (&wal, &cursor), (&cursor, &cursor)] {
        for command in ["follow", "check"] {
            let out = bin()
                .args([command, "--db", path_str(&db), "--origin", "f"])
                .args(["--sink", &format!("file:{}", path_str(sink))])
                .args(["--cursor", path_str(cursor)])
                .args(if command == "check" {
                    &[][..]
                } else {
                    &["--from-start", "--once"][..]
                })
                .output()
                .unwrap();
            assert_eq!(code(&out), 2, "{command} --sink {}: {}", sink.display(), stderr(&out));
            assert!(stderr(&out).contains("refusing to write there"), "{}", stderr(&out));
        }
    }
    assert_eq!(std::fs::read(&db).unwrap(), before, "the audit database was changed");
}

#[test]
fn a_sink_file_that_lost_the_cursors_record_stops_the_follower() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "a.db", 60);
    let (out, cursor) = (dir.path().join("out.jsonl"), dir.path().join("cursor"));
    assert_eq!(code(&follow_once(&db, &out, &cursor, &["--from-start"])), 0);
    // The sink restored from an older copy: its first 20 records.
    let text = std::fs::read_to_string(&out).unwrap();
    let older: String = text.lines().take(20).map(|l| format!("{l}\n")).collect();
    std::fs::write(&out, &older).unwrap();
    append(&db, 5);
    let res = follow_once(&db, &out, &cursor, &[]);
    assert_eq!(code(&res), 1, "{}", stderr(&res));
    assert!(stderr(&res).contains("no longer holds seq 60"), "{}", stderr(&res));
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        older,
        "nothing was appended after the gap"
    );
}

#[test]
fn no_file_written_for_the_cursor_is_the_audit_database_or_its_journal() {
    let dir = TempDir::new().unwrap();
    let out = dir.path().join("out.jsonl");
    // Each database named like a file the follower writes beside cursor `d`.
    for name in ["d.tmp", "d.probe", "d.lock", "d.anchored", "d.anchored.tmp"] {
        let db = generate(dir.path(), name, 20);
        let before = std::fs::read(&db).unwrap();
        let res = follow_once(&db, &out, &dir.path().join("d"), &["--from-start"]);
        assert_eq!(code(&res), 2, "{name}: {}", stderr(&res));
        assert!(stderr(&res).contains("refusing to write there"), "{}", stderr(&res));
        assert_eq!(std::fs::read(&db).unwrap(), before, "{name} was changed");
    }
    let db = generate(dir.path(), "j.db", 20);
    for (sink, cursor) in [("j.db-journal", "c1"), ("o2.jsonl", "j.db-journal")] {
        let res = follow_once(&db, &dir.path().join(sink), &dir.path().join(cursor), &["--from-start"]);
        assert_eq!(code(&res), 2, "{sink} {cursor}: {}", stderr(&res));
        assert!(!dir.path().join("j.db-journal").exists());
    }
}

#[test]
fn records_past_the_cursor_do_not_stand_in_for_its_own() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "a.db", 60);
    let (out, cursor) = (dir.path().join("out.jsonl"), dir.path().join("cursor"));
    assert_eq!(code(&follow_once(&db, &out, &cursor, &["--from-start"])), 0);
    // As after a crash between delivery and the cursor write: cursor at 50,
    // the sink at 60; then the sink loses seq 50's record.
    let lines: Vec<String> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let hash = serde_json::from_str::<serde_json::Value>(&lines[49]).unwrap()["hash"]
        .as_str()
        .unwrap()
        .to_owned();
    std::fs::write(&cursor, format!("50:{hash}\n")).unwrap();
    let kept: String = lines
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 49)
        .map(|(_, l)| format!("{l}\n"))
        .collect();
    std::fs::write(&out, &kept).unwrap();
    append(&db, 5);
    let res = follow_once(&db, &out, &cursor, &[]);
    assert_eq!(code(&res), 1, "{}", stderr(&res));
    assert!(stderr(&res).contains("no longer holds seq 50"), "{}", stderr(&res));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), kept);
}

#[test]
fn a_follower_of_another_origin_does_not_append_to_this_ones_sink() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "a.db", 60);
    let (out, cursor) = (dir.path().join("out.jsonl"), dir.path().join("cursor"));
    assert_eq!(code(&follow_once(&db, &out, &cursor, &["--from-start"])), 0);
    let before = std::fs::read(&out).unwrap();
    append(&db, 5);
    // The same cursor and file, a follower told another --origin.
    let res = Follow::new(&db, "other/origin")
        .file_sink(&out)
        .args(["--cursor", &format!("file:{}", path_str(&cursor))])
        .once()
        .output();
    assert_eq!(code(&res), 1, "{}", stderr(&res));
    assert!(stderr(&res).contains("another --origin"), "{}", stderr(&res));
    assert_eq!(
        std::fs::read(&out).unwrap(),
        before,
        "records of another origin were appended"
    );
}
