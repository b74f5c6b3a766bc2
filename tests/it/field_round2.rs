//! Issue 46, "the field, round 2": verdicts an operator reads and the
//! residual traps an earlier round left open. Each test failed before its fix.

use serde_json::Value;

use crate::common::*;

const ORIGIN: &str = "field/agentrt";

/// `anchored`'s database exported and anchored by one `follow --once`.
fn export_once(a: &Anchored, extra: &[&str]) -> std::process::Output {
    bin()
        .args(["follow", "--once", "--from-start"])
        .args(["--db", path_str(&a.db), "--origin", ORIGIN])
        .args([
            "--sink",
            &format!("file:{}", path_str(&a.dir.path().join("events.jsonl"))),
        ])
        .args(["--cursor", path_str(&a.dir.path().join("cursor"))])
        .args(["--anchor", &a.anchor_url(), "--signing-key", path_str(&a.key)])
        .args(extra)
        .output()
        .unwrap()
}

/// Heads kept at 1000 and 2000.
fn anchored_2000() -> Anchored {
    let a = Anchored::new(1000, "field/chainship");
    let out = export_once(&a, &[]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    append(&a.db, 1000);
    let out = export_once(&a, &[]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    a
}

fn anchor_verify_json(a: &Anchored) -> (i32, Value) {
    let out = bin()
        .args(["anchor", "verify", "--db", path_str(&a.db), "--origin", ORIGIN])
        .args(["--anchor", &a.anchor_url(), "--trusted-key", &a.verifier, "--json"])
        .output()
        .unwrap();
    let json = serde_json::from_str(stdout(&out).trim())
        .unwrap_or_else(|e| panic!("no JSON ({e}): {} {}", stdout(&out), stderr(&out)));
    (code(&out), json)
}

fn findings_of(json: &Value, kind: &str) -> Vec<Value> {
    json["findings"]
        .as_array()
        .unwrap_or_else(|| panic!("no findings: {json}"))
        .iter()
        .filter(|f| f["kind"] == kind)
        .cloned()
        .collect()
}

/// A database with a row altered AND its tail cut below a kept head: both named.
#[test]
fn anchor_verify_names_a_cut_tail_beside_an_altered_row() {
    let a = anchored_2000();
    let conn = tamper(&a.db);
    conn.execute("UPDATE events SET payload_json = '{\"x\":1}' WHERE seq = 700", [])
        .unwrap();
    conn.execute("DELETE FROM events WHERE seq > 1800", []).unwrap();
    drop(conn);
    let (code, json) = anchor_verify_json(&a);
    assert_eq!(code, 1, "{json}");
    let altered = findings_of(&json, "altered");
    assert!(
        altered.iter().any(|f| f["seq"] == 700),
        "the altered row is named: {json}"
    );
    let cut = findings_of(&json, "cut");
    assert_eq!(cut.len(), 1, "the cut below the kept head 2000 is named too: {json}");
    assert_eq!(cut[0]["seq"], 2000, "{json}");
    assert!(
        cut[0]["message"].as_str().unwrap().contains("ends at seq 1800"),
        "{json}"
    );
    let trusted = json["last_trusted_head"]["seq"].as_u64().unwrap_or(0);
    assert!(trusted < 700, "trust ends below the alteration: {json}");
}

/// `check` says no where `follow` would refuse to start: a database cut below the cursor.
#[test]
fn check_fails_on_a_database_cut_below_the_cursor() {
    let a = Anchored::new(300, "field/chainship");
    let out = export_once(&a, &[]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let cursor = a.dir.path().join("cursor");
    let sink = format!("file:{}", path_str(&a.dir.path().join("events.jsonl")));
    let check = |json: bool| {
        let mut cmd = bin();
        cmd.args(["check", "--db", path_str(&a.db), "--origin", ORIGIN, "--sink", &sink])
            .args(["--cursor", path_str(&cursor)]);
        if json {
            cmd.arg("--json");
        }
        cmd.output().unwrap()
    };
    let before = check(false);
    assert_eq!(code(&before), 0, "{}{}", stdout(&before), stderr(&before));
    tamper(&a.db).execute("DELETE FROM events WHERE seq > 200", []).unwrap();
    let after = check(false);
    assert_eq!(code(&after), 1, "{}{}", stdout(&after), stderr(&after));
    assert!(
        stdout(&after).contains("FAIL  cursor") && stdout(&after).contains("does not hold seq 300"),
        "{}",
        stdout(&after)
    );
    let follow = export_once(&a, &[]);
    assert_eq!(code(&follow), 1, "follow refuses it too: {}", stderr(&follow));
    let json: Value = serde_json::from_str(stdout(&check(true)).trim()).unwrap();
    assert_eq!(json["ok"], false, "{json}");
}

/// A follower of `a` that keeps tailing into `sink`, its stderr in `log`.
fn tailing(a: &Anchored, sink: &str, log: &std::path::Path) -> KillOnDrop {
    let log = std::fs::File::create(log).unwrap();
    KillOnDrop(
        bin()
            .args(["follow", "--from-start", "--db", path_str(&a.db), "--origin", ORIGIN])
            .args(["--sink", sink])
            .args(["--cursor", path_str(&a.dir.path().join("cursor"))])
            .args(["--batch-size", "20", "--poll-interval", "50ms"])
            .env("RUST_LOG", "warn")
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    )
}

fn wait_for_file(path: &std::path::Path, log: &std::path::Path) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !path.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "{}",
            std::fs::read_to_string(log).unwrap()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The cursor's lock deleted under a running follower. A second follower
/// that then takes the new lock file and runs makes the first stop before it
/// delivers again (exit 2, naming the holder); one that takes it and stops
/// (here: the file sink's own lock refuses it) leaves the first running,
/// which takes the lock again. Either way each event reaches the copy once.
#[test]
fn a_lock_deleted_under_a_running_follower_is_taken_again_or_stops_it() {
    let a = Anchored::new(50, "field/chainship");
    let copy = a.dir.path().join("events.jsonl");
    let file_sink = format!("file:{}", path_str(&copy));
    let (cursor, lock) = (a.dir.path().join("cursor"), a.dir.path().join("cursor.lock"));
    let mut writer = live_writer(&a.db, "100", &[]);
    let (log1, log2, log3) = (
        a.dir.path().join("1.log"),
        a.dir.path().join("2.log"),
        a.dir.path().join("3.log"),
    );
    let mut first = tailing(&a, &file_sink, &log1);
    wait_for_file(&cursor, &log1);
    // A second follower of the same file copy, started while the first is
    // paused (so the order is fixed): it takes the new lock, then the file
    // sink refuses it. The first, resumed, takes the lock back and goes on.
    signal(&first, SIGSTOP);
    std::fs::remove_file(&lock).unwrap();
    let mut second = tailing(&a, &file_sink, &log2);
    let status = wait_with_limit(&mut second, std::time::Duration::from_secs(30));
    signal(&first, SIGCONT);
    let said = std::fs::read_to_string(&log2).unwrap();
    assert_eq!(status.code(), Some(2), "{said}");
    assert!(said.contains("holds it"), "the file sink's own lock refused it: {said}");
    let before = std::fs::read_to_string(&cursor).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::fs::read_to_string(&cursor).unwrap() == before {
        assert!(
            std::time::Instant::now() < deadline,
            "{}",
            std::fs::read_to_string(&log1).unwrap()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // A delivery the pause caught past its check ends first; the next one
    // finds the lock replaced and takes it again.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !std::fs::read_to_string(&log1).unwrap().contains("taken again") {
        assert!(
            std::time::Instant::now() < deadline,
            "{}",
            std::fs::read_to_string(&log1).unwrap()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(
        first.try_wait().unwrap().is_none(),
        "{}",
        std::fs::read_to_string(&log1).unwrap()
    );
    // A second follower that keeps running (a sink with no lock of its own):
    // the first stops before it delivers again.
    signal(&first, SIGSTOP);
    std::fs::remove_file(&lock).unwrap();
    let mut third = tailing(&a, "stdout:", &log3);
    let moved = std::fs::read_to_string(&cursor).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::fs::read_to_string(&cursor).unwrap() == moved {
        assert!(
            std::time::Instant::now() < deadline,
            "{}",
            std::fs::read_to_string(&log3).unwrap()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    signal(&first, SIGCONT);
    let status = wait_with_limit(&mut first, std::time::Duration::from_secs(30));
    let said = std::fs::read_to_string(&log1).unwrap();
    assert_eq!(status.code(), Some(2), "{said}");
    // Paused past its check, the first may finish that delivery and then
    // find its cursor written under it (the other follower renamed the
    // shared temp file): a stop too, before it delivers again.
    assert!(
        (said.contains("another follower now holds it") && said.contains("pid "))
            || said.contains("the batch was delivered but the cursor could not be written"),
        "{said}"
    );
    assert!(
        third.try_wait().unwrap().is_none(),
        "{}",
        std::fs::read_to_string(&log3).unwrap()
    );
    signal(&third, SIGTERM);
    let _ = wait_with_limit(&mut third, std::time::Duration::from_secs(20));
    let _ = stop_writer(&mut writer, &a.db);
    // What the first delivered: every event once, in order, from seq 1.
    let (last_seq, _) = reverify_jsonl(&copy, ORIGIN);
    assert!(last_seq > 0);
}

/// Names in the store that are no part of its layout are said as warnings,
/// never taken for notes and never silent.
#[test]
fn junk_names_in_the_store_are_warnings() {
    let a = Anchored::new(300, "field/chainship");
    let out = export_once(&a, &[]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let (code0, clean) = anchor_verify_json(&a);
    assert_eq!(code0, 0, "{clean}");
    assert_eq!(clean["warnings"], serde_json::json!([]), "{clean}");
    let at = a.anchors.join(ORIGIN);
    std::fs::write(at.join("checkpoints/foo"), "junk").unwrap();
    std::fs::create_dir_all(at.join("tile/0")).unwrap();
    std::fs::write(at.join("tile/0/bogus"), "junk").unwrap();
    std::fs::write(at.join("00000000000000000100.x.head"), "junk").unwrap();
    let (code1, json) = anchor_verify_json(&a);
    assert_eq!(code1, 0, "junk vouches for nothing and breaks nothing: {json}");
    let warnings = json["warnings"].to_string();
    assert!(
        warnings.contains("3 name(s)") && warnings.contains("not part of its layout"),
        "{json}"
    );
    for name in ["checkpoints/foo", "tile/0/bogus", "00000000000000000100.x.head"] {
        assert!(warnings.contains(name), "{name}: {json}");
    }
}

/// Tiles planted where no checkpoint reaches yet (someone with write access
/// to the store, ahead of the follower) no longer stop it for good: they are
/// replaced with the chain's own, said, and the log verifies.
#[test]
fn tiles_planted_ahead_of_the_follower_are_replaced_not_a_stop() {
    let a = Anchored::new(300, "field/chainship");
    let out = export_once(&a, &[]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    append(&a.db, 300);
    let tiles = a.anchors.join(ORIGIN).join("tile/0");
    // 600 events: the full tile 001 (256..511) and the partial 002.p/88.
    std::fs::write(tiles.join("001"), vec![0x55u8; 256 * 32]).unwrap();
    std::fs::create_dir_all(tiles.join("002.p")).unwrap();
    std::fs::write(tiles.join("002.p/88"), b"junk").unwrap();
    let out = export_once(&a, &[]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stderr(&out).contains("tile-replaced"), "said: {}", stderr(&out));
    let (code, json) = anchor_verify_json(&a);
    assert_eq!(code, 0, "{json}");
    assert_eq!(json["last_trusted_head"]["seq"], 600, "{json}");
    let out = aics_tlog()
        .args(["verify-checkpoint", "--tiles", path_str(&a.anchors.join(ORIGIN))])
        .args(["--log-key", &a.verifier, "--origin", ORIGIN])
        .output()
        .unwrap();
    let verified: Value = serde_json::from_str(stdout(&out).trim()).unwrap_or_else(|e| panic!("{e}: {}", stderr(&out)));
    assert_eq!(
        verified["ok"], true,
        "an independent C2SP client reads the replaced tiles: {verified}"
    );
}

/// A follower killed between a publication's checkpoint and its head leaves
/// the checkpoint without it; the next start publishes the missing head.
#[test]
fn a_checkpoint_left_without_its_head_gets_it_at_the_next_start() {
    let a = Anchored::new(300, "field/chainship");
    let out = export_once(&a, &[]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    // What the crash leaves: the head not written, the publication still
    // recorded as pending, and the last anchored head not moved to it.
    let head = std::fs::read_to_string(a.dir.path().join("cursor")).unwrap();
    let note = a.anchors.join(ORIGIN).join("00000000000000000300.head");
    std::fs::remove_file(&note).unwrap();
    std::fs::remove_file(a.dir.path().join("cursor.anchored")).unwrap();
    std::fs::write(a.dir.path().join("cursor.tlog.pending"), &head).unwrap();
    let (_, json) = anchor_verify_json(&a);
    assert!(json["warnings"].to_string().contains("has no head yet"), "{json}");
    let out = export_once(&a, &[]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(note.exists(), "the missing head was published: {}", stderr(&out));
    let (code, json) = anchor_verify_json(&a);
    assert_eq!(code, 0, "{json}");
    assert_eq!(json["warnings"], serde_json::json!([]), "{json}");
    assert_eq!(json["last_trusted_head"]["seq"], 300, "{json}");
}

/// Errors an operator reads: a missing directory is named as the parent; a
/// permission error names who the process runs as and who owns the file (or
/// the directory that refuses entry); a key someone else owns asks for a
/// `chown`, not a `chmod 600` of a file already 0600.
#[test]
fn errors_name_the_missing_parent_the_users_and_the_fix() {
    crate::readonly_db::require_root("running as another user");
    let a = Anchored::new(20, "field/chainship");
    let out = export_once(&a, &[]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let missing = a.dir.path().join("no/such");
    let at = |name: &str| path_str(&missing.join(name)).to_owned();
    let parent = format!("its directory {} does not exist", path_str(&missing));
    let runs: [Vec<String>; 3] = [
        vec![
            "keygen".into(),
            "--name".into(),
            "x/y".into(),
            "--out".into(),
            at("k.key"),
        ],
        vec!["--metrics-textfile".into(), at("v.prom")],
        vec!["--state".into(), at("state.json")],
    ];
    for extra in runs {
        let mut cmd = bin();
        if extra[0] == "keygen" {
            cmd.args(&extra);
        } else {
            cmd.args(["anchor", "verify", "--db", path_str(&a.db), "--origin", ORIGIN])
                .args(["--anchor", &a.anchor_url(), "--trusted-key", &a.verifier])
                .args(&extra);
        }
        let out = cmd.output().unwrap();
        assert_eq!(code(&out), 2, "{extra:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(&parent), "{extra:?}: {}", stderr(&out));
        assert_eq!(stderr(&out).trim().lines().count(), 1, "{extra:?}: {}", stderr(&out));
    }
    // The database in a directory only root may enter, read as nobody.
    let closed = a.dir.path().join("closed");
    std::fs::create_dir(&closed).unwrap();
    std::fs::copy(&a.db, closed.join("audit.db")).unwrap();
    std::fs::set_permissions(&closed, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    std::fs::set_permissions(a.dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let shared = crate::readonly_db::shared_binary(a.dir.path());
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(&shared)
        .args(["verify", "--db", path_str(&closed.join("audit.db"))])
        .output()
        .unwrap();
    let said = stderr(&out);
    assert_eq!(code(&out), 2, "{said}");
    assert!(
        said.contains("Permission denied") && said.contains("this process runs as uid 65534"),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "its directory {} is owned by 0 (root):0 (root) mode 0700",
            path_str(&closed)
        )),
        "{said}"
    );
    // A key file another user owns, already 0600.
    let (key, _) = keygen(a.dir.path(), "field/other", "other.key");
    std::os::unix::fs::chown(&key, Some(12345), Some(12345)).unwrap();
    let out = bin()
        .args([
            "check",
            "--origin",
            ORIGIN,
            "--sink",
            "stdout:",
            "--signing-key",
            path_str(&key),
        ])
        .output()
        .unwrap();
    let said = stdout(&out);
    assert!(
        said.contains("user 12345 (its owner) can read it; chown it to user 0 (root)"),
        "{said}"
    );
    assert!(!said.contains("chmod 600"), "{said}");
}

/// The anchor store's S3 credentials: plainly missing, `follow` stops at
/// start in one line naming the setting (nothing shipped, no SDK warnings);
/// given as a credentials file (what the systemd drop-in hands over), the
/// heads are published with them.
#[tokio::test(flavor = "multi_thread")]
async fn s3_credentials_missing_are_one_line_and_a_credentials_file_is_used() {
    let _services = services().await;
    let bucket = bucket("field-creds").await;
    let a = Anchored::new(30, "field/chainship");
    let follow = |extra: &[&str]| {
        let mut cmd = bin();
        cmd.args([
            "follow",
            "--once",
            "--from-start",
            "--db",
            path_str(&a.db),
            "--origin",
            ORIGIN,
        ])
        .args([
            "--sink",
            &format!("file:{}", path_str(&a.dir.path().join("events.jsonl"))),
        ])
        .args(["--cursor", path_str(&a.dir.path().join("cursor"))])
        .args(["--anchor", &format!("s3://{bucket}/heads"), "--anchor-s3-path-style"])
        .args([
            "--anchor-s3-endpoint",
            &s3_endpoint(),
            "--signing-key",
            path_str(&a.key),
        ])
        .args(extra)
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .env_remove("AWS_PROFILE")
        .env_remove("RUST_LOG")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_REGION", "us-east-1")
        .env("HOME", a.dir.path());
        cmd.output().unwrap()
    };
    let out = follow(&[]);
    let said = stderr(&out);
    assert_eq!(code(&out), 2, "{said}");
    assert_eq!(said.trim().lines().count(), 1, "one line: {said}");
    assert!(
        said.contains("no AWS credentials") && said.contains("--anchor-s3-credentials-file"),
        "{said}"
    );
    assert!(!said.to_lowercase().contains("metadata"), "{said}");
    assert!(
        !a.dir.path().join("events.jsonl").exists(),
        "nothing shipped before the store can be used"
    );
    let file = a.dir.path().join("anchor-s3");
    std::fs::write(
        &file,
        "[default]\naws_access_key_id = anchor\naws_secret_access_key = the-secret-42\n",
    )
    .unwrap();
    let out = follow(&["--anchor-s3-credentials-file", path_str(&file)]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(!stderr(&out).contains("the-secret-42"), "{}", stderr(&out));
    let listed = s3_client().list_objects_v2().bucket(&bucket).send().await.unwrap();
    assert!(
        listed
            .contents()
            .iter()
            .any(|o| o.key().is_some_and(|k| k.ends_with("00000000000000000030.head"))),
        "the head was published with the file's credentials: {listed:?}"
    );
}

/// Removes a whole publication of size `n` from the store: its head, its
/// checkpoint and the partial tiles written for it.
fn delete_publication(a: &Anchored, n: u64) {
    let at = a.anchors.join(ORIGIN);
    std::fs::remove_file(at.join(format!("{n:020}.head"))).unwrap();
    std::fs::remove_file(at.join(format!("checkpoints/{n:020}"))).unwrap();
    let width = n % 256;
    for dir in ["tile/0", "tile/entries"] {
        let partial = at.join(format!("{dir}/{:03}.p/{width}", n / 256));
        if partial.exists() {
            std::fs::remove_file(partial).unwrap();
        }
    }
}

/// A whole publication deleted from the middle of the store is named with no
/// state kept between runs: each head names the head kept before it. The
/// newest ones deleted with the pointer rolled back stay invisible without a
/// witness or `--state` (the documented limit, pinned here).
#[test]
fn a_publication_deleted_from_the_middle_is_named_without_state() {
    let a = Anchored::new(100, "field/chainship");
    for n in 0..3 {
        if n > 0 {
            append(&a.db, 100);
        }
        let out = export_once(&a, &["--batch-size", "100"]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
    }
    let note = std::fs::read_to_string(a.anchors.join(ORIGIN).join(format!("{:020}.head", 300))).unwrap();
    assert!(note.contains("\nprevious 200\n"), "{note}");
    let (code0, clean) = anchor_verify_json(&a);
    assert_eq!(code0, 0, "{clean}");
    // The middle one, 200: head, checkpoint and partial tiles.
    let saved = tempfile::TempDir::new().unwrap();
    copy_tree(&a.anchors, saved.path());
    delete_publication(&a, 200);
    let (code1, json) = anchor_verify_json(&a);
    assert_eq!(code1, 1, "{json}");
    let missing = findings_of(&json, "head-missing");
    assert!(
        missing
            .iter()
            .any(|f| f["seq"] == 200 && f["message"].as_str().unwrap().contains("head 300:")),
        "{json}"
    );
    // The newest, 300, with the pointer rolled back to 200's checkpoint.
    std::fs::remove_dir_all(&a.anchors).unwrap();
    copy_tree(saved.path(), &a.anchors);
    let at = a.anchors.join(ORIGIN);
    delete_publication(&a, 300);
    std::fs::copy(at.join(format!("checkpoints/{:020}", 200)), at.join("checkpoint")).unwrap();
    let (code2, json) = anchor_verify_json(&a);
    assert_eq!(
        code2, 0,
        "the newest publications deleted together: not visible without state: {json}"
    );
    assert_eq!(json["last_trusted_head"]["seq"], 200, "{json}");
}

/// The row at a kept head's seq deleted from the middle: a gap there, never
/// a "cut" (the database goes on past the head).
#[test]
fn a_row_deleted_at_a_kept_head_is_a_gap_not_a_cut() {
    let a = anchored_2000();
    tamper(&a.db)
        .execute("DELETE FROM events WHERE seq = 1000", [])
        .unwrap();
    let (code, json) = anchor_verify_json(&a);
    assert_eq!(code, 1, "{json}");
    assert!(
        findings_of(&json, "cut").is_empty(),
        "no cut: the database ends at 2000: {json}"
    );
    assert!(findings_of(&json, "gap").iter().any(|f| f["seq"] == 1000), "{json}");
}

/// A file to be made in a directory this process may enter but not write:
/// the directory's owner and mode are named.
#[test]
fn a_directory_that_refuses_a_new_file_is_named_with_its_owner() {
    crate::readonly_db::require_root("running as another user");
    let a = Anchored::new(20, "field/chainship");
    std::fs::set_permissions(a.dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let ro = a.dir.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    std::fs::set_permissions(&ro, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let shared = crate::readonly_db::shared_binary(a.dir.path());
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(&shared)
        .args(["keygen", "--name", "x/y", "--out", path_str(&ro.join("k.key"))])
        .output()
        .unwrap();
    let said = stderr(&out);
    assert_eq!(code(&out), 2, "{said}");
    assert!(
        said.contains(&format!(
            "its directory {} is owned by 0 (root):0 (root) mode 0755",
            path_str(&ro)
        )),
        "{said}"
    );
}
