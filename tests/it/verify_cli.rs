//! `chainship verify` end to end: the exit codes, the report, and the bad
//! inputs that must get a one-line error and exit 2.

use std::time::Duration;

use crate::common::*;
use tempfile::TempDir;

const H1: &str = "329225706e099dcf734d05b51f7cc508a36511efdf614f97d2918cf3b2a04249";
const H2: &str = "2d17715bc635406807722f1764c509105f5ac15ad430729545bc4d87055da291";

/// The two worked events of docs/chain-format.md, in agentrt's table.
fn worked_example_db(dir: &TempDir) -> std::path::PathBuf {
    let db = dir.path().join("worked.db");
    let conn = tamper(&db);
    conn.execute_batch(&format!(
        r#"CREATE TABLE events (seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL,
             step_id TEXT NOT NULL DEFAULT '', at TEXT NOT NULL, type TEXT NOT NULL,
             payload_json TEXT NOT NULL, hash TEXT NOT NULL DEFAULT '');
           INSERT INTO events VALUES (1, 'run_7f2', '', '2026-08-17T08:00:00Z', 'run.created', '{{"goal":"triage"}}', '{H1}');
           INSERT INTO events VALUES (2, 'run_7f2', 'step_0', '2026-08-17T08:00:01.250Z', 'step.policy',
             '{{"decision":"allow","tool":"github.create_issue"}}', '{H2}');"#
    ))
    .unwrap();
    db
}

#[test]
fn worked_example_is_intact() {
    let dir = TempDir::new().unwrap();
    let db = worked_example_db(&dir);
    let out = run(&["verify", "--db", path_str(&db)]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains(&format!("head: seq 2 {H2}")), "{text}");
    assert!(text.contains("intact: 2 event(s), seq 1 to 2"), "{text}");
    assert!(text.contains(&format!("last checked: seq 2 {H2}")), "{text}");

    let out = run(&["verify", "--db", path_str(&db), "--head", &format!("1:{H1}")]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
}

#[test]
fn an_altered_event_is_named_with_both_hashes() {
    let dir = TempDir::new().unwrap();
    let db = worked_example_db(&dir);
    tamper(&db)
        .execute(
            "UPDATE events SET payload_json = '{\"goal\":\"exfiltrate\"}' WHERE seq = 1",
            [],
        )
        .unwrap();
    let out = run(&["verify", "--db", path_str(&db)]);
    assert_eq!(code(&out), 1);
    let text = stdout(&out);
    assert!(text.contains("broken at seq 1: stored hash does not match"), "{text}");
    assert!(text.contains(&format!("found:    {H1}")), "{text}");
    let expected = text.lines().find(|l| l.trim_start().starts_with("expected:")).unwrap();
    assert_eq!(expected.split_whitespace().nth(1).unwrap().len(), 64, "{text}");

    let out = run(&["verify", "--db", path_str(&db), "--json"]);
    assert_eq!(code(&out), 1);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["status"], "broken");
    assert_eq!(json["break"]["seq"], 1);
    assert_eq!(json["break"]["kind"], "hash-mismatch");
    assert_eq!(json["break"]["found"], H1);
}

#[test]
fn a_cut_end_is_caught_only_by_a_kept_head() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "cut.db", 300);
    let head = db_head(&db);
    tamper(&db).execute("DELETE FROM events WHERE seq > 250", []).unwrap();

    let out = run(&["verify", "--db", path_str(&db)]);
    assert_eq!(code(&out), 0, "a cut end alone is not a break: {}", stdout(&out));
    assert!(stdout(&out).contains("intact: 250 event(s), seq 1 to 250"));

    let out = run(&["verify", "--db", path_str(&db), "--head", &head]);
    assert_eq!(code(&out), 1);
    assert!(
        stdout(&out).contains("head not reached: seq 300 is past the database's last seq 250"),
        "{}",
        stdout(&out)
    );

    let out = run(&["verify", "--db", path_str(&db), "--to", "280"]);
    assert_eq!(code(&out), 1);
    assert!(
        stdout(&out).contains("not reached: --to 280; the database ends at seq 250"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn a_head_with_another_hash_fails() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "fork.db", 50);
    let out = run(&["verify", "--db", path_str(&db), "--head", &format!("20:{H1}")]);
    assert_eq!(code(&out), 1);
    assert!(
        stdout(&out).contains("head not matched: seq 20: the database holds"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn from_and_to_bound_the_walk() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "range.db", 100);
    tamper(&db)
        .execute("UPDATE events SET at = 'x' WHERE seq = 10", [])
        .unwrap();
    let out = run(&["verify", "--db", path_str(&db), "--from", "20", "--to", "60"]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    assert!(
        stdout(&out).contains("intact: 41 event(s), seq 20 to 60"),
        "{}",
        stdout(&out)
    );
    let out = run(&["verify", "--db", path_str(&db), "--from", "5", "--to", "60"]);
    assert_eq!(code(&out), 1);
    assert!(stdout(&out).contains("broken at seq 10"), "{}", stdout(&out));
    let out = run(&["verify", "--db", path_str(&db), "--from", "60", "--to", "20"]);
    assert_eq!(code(&out), 2);
    // Seqs are SQLite's signed 64-bit integers: past them is a usage error.
    let out = run(&["verify", "--db", path_str(&db), "--to", "9223372036854775808"]);
    assert_eq!(code(&out), 2, "{}", stdout(&out));
    // A kept head past them is never reached, and the walk stays where rows
    // can be: the same report for any number of threads.
    let far = format!("18446744073709551615:{}", "0".repeat(64));
    let reports: Vec<(i32, String)> = ["1", "4"]
        .iter()
        .map(|jobs| {
            let out = run(&[
                "verify",
                "--db",
                path_str(&db),
                "--from",
                "20",
                "--head",
                &far,
                "--jobs",
                jobs,
                "--json",
            ]);
            (code(&out), stdout(&out))
        })
        .collect();
    assert_eq!(reports[0], reports[1], "--jobs 1 and 4");
    let json: serde_json::Value = serde_json::from_str(&reports[0].1).unwrap();
    assert_eq!(reports[0].0, 1);
    assert_eq!(json["checked"], 81, "{json}");
    assert_eq!(json["heads"][0]["result"], "not-reached", "{json}");

    // A head below --from is only looked up (the events up to it are
    // trusted as stored), and says so: never "matched" as if walked.
    let hash_30: String = tamper(&db)
        .query_row("SELECT hash FROM events WHERE seq = 30", [], |r| r.get(0))
        .unwrap();
    let head = format!("30:{hash_30}");
    let out = run(&["verify", "--db", path_str(&db), "--from", "40", "--head", &head]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    assert!(
        stdout(&out).contains(&format!("head matched by lookup, below --from (not walked): {head}")),
        "{}",
        stdout(&out)
    );
    let out = run(&[
        "verify",
        "--db",
        path_str(&db),
        "--from",
        "40",
        "--head",
        &head,
        "--json",
    ]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["heads"][0]["result"], "matched-below-from", "{json}");
}

#[test]
fn verify_during_a_live_writer_reports_intact() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "live.db", 2000);
    let mut writer = KillOnDrop(
        bin()
            .args(["generate", "--db", path_str(&db), "--append", "--events", "0"])
            .args(["--follow-rate", "2000", "--follow-for", "20s"])
            .spawn()
            .unwrap(),
    );
    let mut heads = Vec::new();
    for _ in 0..8 {
        std::thread::sleep(Duration::from_millis(300));
        let out = run(&["verify", "--db", path_str(&db), "--json"]);
        assert_eq!(code(&out), 0, "{}", stdout(&out));
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        heads.push(json["last_checked"]["seq"].as_u64().unwrap());
    }
    writer.kill().unwrap();
    writer.wait().unwrap();
    assert!(
        heads.windows(2).all(|w| w[0] <= w[1]) && heads.last() > heads.first(),
        "the writer appended while verify ran: {heads:?}"
    );
    let out = run(&["verify", "--db", path_str(&db)]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
}

#[test]
fn a_64_mib_event_is_verified() {
    let dir = TempDir::new().unwrap();
    let db = generate_with(
        dir.path(),
        "big.db",
        3,
        &["--large-every", "2", "--large-bytes", "67108864"],
    );
    let out = run(&["verify", "--db", path_str(&db)]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    assert!(stdout(&out).contains("intact: 3 event(s)"));
}

#[test]
fn verify_never_writes_the_database() {
    let dir = TempDir::new().unwrap();
    let db = dir.path().join("rollback.db");
    let conn = tamper(&db);
    // A database in rollback-journal mode: opening it for writing and
    // switching to WAL would change its header.
    conn.execute_batch("PRAGMA journal_mode=DELETE; CREATE TABLE events (seq INTEGER PRIMARY KEY, run_id TEXT, step_id TEXT, at TEXT, type TEXT, payload_json TEXT, hash TEXT);").unwrap();
    conn.execute(&format!("INSERT INTO events VALUES (1, 'run_7f2', '', '2026-08-17T08:00:00Z', 'run.created', '{{\"goal\":\"triage\"}}', '{H1}')"), []).unwrap();
    drop(conn);
    let before = std::fs::read(&db).unwrap();
    let out = run(&["verify", "--db", path_str(&db)]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    assert_eq!(std::fs::read(&db).unwrap(), before, "the database file changed");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(leftovers.len(), 1, "files appeared beside the database: {leftovers:?}");
}

/// Each bad input: exit 2, exactly one line on stderr, naming the culprit.
fn assert_damage(db: &str, names: &str) {
    let out = run(&["verify", "--db", db]);
    let all = format!("{}{}", stdout(&out), stderr(&out));
    assert_eq!(code(&out), 1, "{db}: {all}");
    assert!(
        all.contains("seq 1") && all.contains(names),
        "{db}: {all:?} should name {names:?}"
    );
    assert!(!all.contains("panicked"), "{all}");
}

fn assert_usage_error(args: &[&str], names: &str) {
    let out = run(args);
    let err = stderr(&out);
    assert_eq!(code(&out), 2, "args {args:?}: {err}");
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "one line expected for {args:?}: {err}"
    );
    assert!(err.contains(names), "{args:?}: {err:?} should name {names:?}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn bad_inputs_get_one_line_and_exit_2() {
    let dir = TempDir::new().unwrap();
    let p = |n: &str| dir.path().join(n).to_str().unwrap().to_owned();

    assert_usage_error(&["verify", "--db", &p("missing.db")], "missing.db: no such file");

    std::fs::write(p("text.db"), "not a database at all, just some text\n").unwrap();
    assert_usage_error(&["verify", "--db", &p("text.db")], "text.db: not a SQLite database");

    tamper(std::path::Path::new(&p("other.db")))
        .execute_batch("CREATE TABLE runs (id TEXT);")
        .unwrap();
    assert_usage_error(&["verify", "--db", &p("other.db")], "no table named \"events\"");

    let view = tamper(std::path::Path::new(&p("view.db")));
    view.execute_batch(
        "CREATE TABLE raw (seq INTEGER PRIMARY KEY, run_id TEXT, step_id TEXT, at TEXT, type TEXT, payload_json TEXT, hash TEXT);
         CREATE VIEW events AS SELECT * FROM raw;",
    )
    .unwrap();
    assert_usage_error(&["verify", "--db", &p("view.db")], "\"events\" is a view");

    let nulls = tamper(std::path::Path::new(&p("null.db")));
    nulls
        .execute_batch(
            "CREATE TABLE events (seq INTEGER PRIMARY KEY, run_id TEXT, step_id TEXT, at TEXT, type TEXT, payload_json TEXT, hash TEXT);
             INSERT INTO events VALUES (1, 'r', NULL, 't', 'k', '{}', 'h');",
        )
        .unwrap();
    // Damage to the record, not a setup error: a finding (exit 1) naming the seq and column.
    assert_damage(&p("null.db"), "column \"step_id\" is NULL");

    let ints = tamper(std::path::Path::new(&p("int.db")));
    ints.execute_batch(
        "CREATE TABLE events (seq INTEGER PRIMARY KEY, run_id TEXT, step_id TEXT, at TEXT, type TEXT, payload_json BLOB, hash TEXT);
         INSERT INTO events VALUES (1, 'r', '', 't', 'k', x'00ff', 'h');",
    )
    .unwrap();
    assert_damage(&p("int.db"), "column \"payload_json\" is a blob");

    let good = generate(dir.path(), "good.db", 5);
    let good = path_str(&good);
    assert_usage_error(&["verify", "--db", good, "--head", "12"], "a head is SEQ:HASH");
    assert_usage_error(&["verify", "--db", good, "--head", "3:zz"], "not 64 lower-case hex");
    assert_usage_error(
        &["verify", "--db", good, "--payload-column", "payload;--"],
        "payload_json column \"payload;--\"",
    );
    assert_usage_error(
        &["verify", "--db", good, "--hash-column", "digest"],
        "no column \"digest\"",
    );

    std::os::unix::fs::symlink(good, p("link.db")).unwrap();
    assert_usage_error(&["verify", "--db", &p("link.db")], "is a symbolic link");
    let out = run(&["verify", "--db", &p("link.db"), "--allow-symlink"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

#[test]
fn custom_table_and_column_names() {
    let dir = TempDir::new().unwrap();
    let db = dir.path().join("custom.db");
    tamper(&db)
        .execute_batch(&format!(
            r#"CREATE TABLE audit_log (id INTEGER PRIMARY KEY, run TEXT, step TEXT, ts TEXT, kind TEXT, body TEXT, digest TEXT);
               INSERT INTO audit_log VALUES (1, 'run_7f2', '', '2026-08-17T08:00:00Z', 'run.created', '{{"goal":"triage"}}', '{H1}');"#
        ))
        .unwrap();
    let out = run(&[
        "verify",
        "--db",
        path_str(&db),
        "--table",
        "audit_log",
        "--seq-column",
        "id",
        "--run-id-column",
        "run",
        "--step-id-column",
        "step",
        "--at-column",
        "ts",
        "--type-column",
        "kind",
        "--payload-column",
        "body",
        "--hash-column",
        "digest",
    ]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains(&format!("last checked: seq 1 {H1}")));
}

#[test]
fn generate_refuses_to_touch_an_existing_file_without_append() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "g.db", 10);
    let before = std::fs::read(&db).unwrap();
    let out = run(&["generate", "--db", path_str(&db), "--events", "5"]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("already exists; append to it to add events (--append)"));
    assert_eq!(std::fs::read(&db).unwrap(), before);
    let out = run(&["generate", "--db", path_str(&db), "--events", "5", "--append"]);
    assert_eq!(code(&out), 0);
    assert!(db_head(&db).starts_with("15:"));
    let out = run(&["verify", "--db", path_str(&db)]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
}

#[test]
fn a_walk_that_checked_nothing_never_passes() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "a.db", 30);
    let empty = dir.path().join("empty.db");
    tamper(&empty)
        .execute_batch(
            "CREATE TABLE events (seq INTEGER PRIMARY KEY, run_id TEXT, step_id TEXT, at TEXT, type TEXT, payload_json TEXT, hash TEXT);",
        )
        .unwrap();
    for args in [
        vec!["verify", "--db", path_str(&db), "--from", "99"],
        vec!["verify", "--db", path_str(&empty)],
    ] {
        let out = run(&args);
        assert_eq!(code(&out), 1, "{args:?}: {}", stdout(&out));
        assert!(stdout(&out).contains("nothing checked"), "{}", stdout(&out));
        let mut json = args.clone();
        json.push("--json");
        let out = run(&json);
        assert_eq!(code(&out), 1);
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["status"], "nothing-checked", "{report}");
    }
    assert_eq!(code(&run(&["verify", "--db", path_str(&db), "--from", "30"])), 0);
}

#[test]
fn a_missing_or_bad_column_names_its_flag() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "a.db", 5);
    let out = run(&["verify", "--db", path_str(&db), "--hash-column", "nope"]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).trim_end().ends_with("(--hash-column)"), "{}", stderr(&out));
    let out = run(&["verify", "--db", path_str(&db), "--run-id-column", "no pe"]);
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).trim_end().ends_with("(--run-id-column)"),
        "{}",
        stderr(&out)
    );
}
