//! The follower as every shipped deployment runs it: the audit database on a
//! mount it cannot write (Kubernetes `readOnly: true`, Compose `:ro`,
//! systemd `ReadOnlyPaths=`), or owned by another user and only readable by
//! its group, while the runtime writes and restarts. SQLite then answers
//! "not now" (`SQLITE_READONLY_RECOVERY`, `_CANTINIT`, `BUSY`, `PROTOCOL`)
//! whenever the writer rebuilds its WAL index; each is a pause, never a stop.
//!
//! Needs root (a mount namespace, another uid): CI runs as root. Without it
//! the test fails, naming why; it never skips.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::common::{KillOnDrop, code, db_head, generate, path_str, reverify_jsonl, run, stderr};

/// The uid and gid the unprivileged follower runs as, and the group the
/// database's files are readable by.
const NOBODY: u32 = 65534;
const AUDIT_GROUP: u32 = 4242;

pub fn require_root(what: &str) {
    unsafe extern "C" {
        fn geteuid() -> u32;
    }
    // SAFETY: geteuid(2) takes nothing and cannot fail.
    let euid = unsafe { geteuid() };
    assert_eq!(
        euid, 0,
        "{what} needs root (a mount namespace, another uid); CI runs as root"
    );
}

/// A copy of the binary that any uid can run (the build tree may not be
/// reachable by another user).
pub fn shared_binary(dir: &Path) -> PathBuf {
    let copy = dir.join("chainship");
    std::fs::copy(env!("CARGO_BIN_EXE_chainship"), &copy).unwrap();
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
    copy
}

/// `chainship ARGS` in a mount namespace where `ro_dir` is a read-only bind
/// mount of itself: what a container's `readOnly: true` volume is.
pub fn in_readonly_mount(bin: &Path, ro_dir: &Path, args: &[String]) -> Command {
    let mut script = format!(
        "mount --bind '{d}' '{d}' && mount -o remount,bind,ro '{d}' && exec '{b}'",
        d = path_str(ro_dir),
        b = path_str(bin)
    );
    for a in args {
        script.push_str(&format!(" '{a}'"));
    }
    let mut cmd = Command::new("unshare");
    cmd.args(["-m", "sh", "-c", &script]);
    cmd.env("RUST_LOG", "warn").env("CHAINSHIP_ANCHOR_INTERVAL", "0s");
    cmd
}

/// `chainship ARGS` as uid/gid 65534 with the audit group as a supplementary group.
fn as_other_user(bin: &Path, args: &[String]) -> Command {
    let mut cmd = Command::new("setpriv");
    cmd.args([
        &format!("--reuid={NOBODY}"),
        &format!("--regid={NOBODY}"),
        &format!("--groups={AUDIT_GROUP}"),
        "--",
        path_str(bin),
    ])
    .args(args)
    .env("RUST_LOG", "warn")
    .env("CHAINSHIP_ANCHOR_INTERVAL", "0s");
    cmd
}

fn follow_args(db: &Path, out: &Path, cursor: &Path) -> Vec<String> {
    [
        "follow",
        "--db",
        path_str(db),
        "--origin",
        "ro/agentrt",
        "--sink",
        &format!("file:{}", path_str(out)),
        "--cursor",
        path_str(cursor),
        "--from-start",
    ]
    .map(String::from)
    .to_vec()
}

fn spawn(mut cmd: Command, log: &Path) -> KillOnDrop {
    let log = std::fs::File::create(log).unwrap();
    KillOnDrop(
        cmd.stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("starting the follower"),
    )
}

fn assert_running(follower: &mut KillOnDrop, log: &Path, name: &str) {
    if let Some(status) = follower.try_wait().unwrap() {
        panic!(
            "the {name} follower exited ({status}) while the runtime wrote: {}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
    }
}

#[test]
fn followers_on_a_read_only_mount_and_as_another_user_outlive_two_minutes_of_a_restarting_writer() {
    require_root("following a read-only database");
    let dir = TempDir::new().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = shared_binary(dir.path());
    // The runtime's directory: its group may read, nobody else (setgid, so a
    // new -wal and -shm are the group's too).
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let db = generate(&data, "audit.db", 1000);
    std::os::unix::fs::chown(&data, None, Some(AUDIT_GROUP)).unwrap();
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o2750)).unwrap();
    for entry in std::fs::read_dir(&data).unwrap() {
        let path = entry.unwrap().path();
        std::os::unix::fs::chown(&path, None, Some(AUDIT_GROUP)).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
    }
    // Each follower's own state, writable by it alone.
    let ro_state = dir.path().join("ro-state");
    let uid_state = dir.path().join("uid-state");
    std::fs::create_dir(&ro_state).unwrap();
    std::fs::create_dir(&uid_state).unwrap();
    std::os::unix::fs::chown(&uid_state, Some(NOBODY), Some(NOBODY)).unwrap();
    let (ro_out, ro_cursor, ro_log) = (
        ro_state.join("out.jsonl"),
        ro_state.join("cursor"),
        dir.path().join("ro.log"),
    );
    let (uid_out, uid_cursor, uid_log) = (
        uid_state.join("out.jsonl"),
        uid_state.join("cursor"),
        dir.path().join("uid.log"),
    );

    let mut ro = spawn(
        in_readonly_mount(&bin, &data, &follow_args(&db, &ro_out, &ro_cursor)),
        &ro_log,
    );
    let mut other = spawn(as_other_user(&bin, &follow_args(&db, &uid_out, &uid_cursor)), &uid_log);

    // Two minutes of a runtime writing 200 events a second, restarting
    // every 4 to 11 seconds (each restart deletes and recreates -wal/-shm).
    let started = Instant::now();
    let mut restarts = 0;
    let mut rng = crate::common::XorShift::new(0x5eed_0028);
    while started.elapsed() < Duration::from_secs(120) {
        let lasting = format!("{}s", 4 + rng.below(8));
        let writer = run(&[
            "generate",
            "--db",
            path_str(&db),
            "--append",
            "--events",
            "0",
            "--follow-rate",
            "200",
            "--follow-for",
            &lasting,
        ]);
        assert_eq!(code(&writer), 0, "{}", stderr(&writer));
        restarts += 1;
        assert_running(&mut ro, &ro_log, "read-only mount");
        assert_running(&mut other, &uid_log, "other-uid");
    }
    assert!(restarts >= 10, "only {restarts} writer restarts");
    let head = db_head(&db);
    let deadline = Instant::now() + Duration::from_secs(30);
    for (cursor, follower, log, name) in [
        (&ro_cursor, &mut ro, &ro_log, "read-only mount"),
        (&uid_cursor, &mut other, &uid_log, "other-uid"),
    ] {
        while std::fs::read_to_string(cursor).unwrap_or_default().trim() != head {
            assert_running(follower, log, name);
            assert!(Instant::now() < deadline, "the {name} follower did not reach {head}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let hash = head.split(':').nth(1).unwrap();
    let seq: u64 = head.split(':').next().unwrap().parse().unwrap();
    assert!(seq > 20_000, "the writer wrote for two minutes: {head}");
    for out in [&ro_out, &uid_out] {
        let (records, last) = reverify_jsonl(out, "ro/agentrt");
        assert_eq!(
            (records, last.as_str()),
            (seq, hash),
            "every event exactly once in {}",
            out.display()
        );
    }
}

/// A -wal left without its -shm (copied or restored so) on a directory the
/// follower cannot write: SQLite cannot read it until a writer opens it once.
/// The follower says so within seconds, then delivers once a writer comes.
#[test]
fn a_wal_without_its_shm_on_a_read_only_mount_is_said_then_followed() {
    require_root("a read-only mount");
    let dir = TempDir::new().unwrap();
    let bin = shared_binary(dir.path());
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let db = generate(&data, "audit.db", 100);
    // A writer killed mid-stream leaves its -wal behind; the -shm is removed.
    let mut writer = crate::common::live_writer(&db, "500", &[]);
    std::thread::sleep(Duration::from_millis(1500));
    crate::common::signal(&writer, crate::common::SIGKILL);
    let _ = writer.wait();
    let _ = std::fs::remove_file(data.join("audit.db-shm"));
    assert!(data.join("audit.db-wal").exists());
    let state = dir.path().join("state");
    std::fs::create_dir(&state).unwrap();
    let (out, cursor, log) = (state.join("out.jsonl"), state.join("cursor"), dir.path().join("f.log"));
    let port = crate::common::free_port();
    let mut args = follow_args(&db, &out, &cursor);
    args.extend([
        "--metrics-addr".into(),
        format!("127.0.0.1:{port}"),
        "--unhealthy-after".into(),
        "2s".into(),
    ]);
    let mut follower = spawn(in_readonly_mount(&bin, &data, &args), &log);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("answered \"not now\"")
    {
        assert_running(&mut follower, &log, "read-only mount");
        assert!(
            Instant::now() < deadline,
            "nothing said: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // A database that stays unreadable is not ready (issue 46); alive all the same.
    let ready = crate::common::http_get(port, "/readyz", Duration::from_secs(5));
    assert!(
        ready
            .as_ref()
            .is_some_and(|(status, body)| *status == 503 && body.contains("database unreadable")),
        "/readyz while the database stays unreadable: {ready:?}"
    );
    let live = crate::common::http_get(port, "/livez", Duration::from_secs(5));
    assert_eq!(live.map(|(s, _)| s), Some(200));
    // A writer opens it (and recovers the WAL): everything is delivered once.
    let more = run(&["generate", "--db", path_str(&db), "--append", "--events", "10"]);
    assert_eq!(code(&more), 0, "{}", stderr(&more));
    let head = db_head(&db);
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::read_to_string(&cursor).unwrap_or_default().trim() != head {
        assert_running(&mut follower, &log, "read-only mount");
        assert!(
            Instant::now() < deadline,
            "not delivered: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let seq: u64 = head.split(':').next().unwrap().parse().unwrap();
    assert_eq!(reverify_jsonl(&out, "ro/agentrt").0, seq);
    let ready = crate::common::http_get(port, "/readyz", Duration::from_secs(5));
    assert_eq!(
        ready.as_ref().map(|(s, _)| *s),
        Some(200),
        "ready once readable: {ready:?}"
    );
}

/// `restore --out` through a bind mount of the anchor store is inside it.
#[test]
fn restore_never_writes_into_the_anchor_store_through_a_bind_mount() {
    require_root("a bind mount");
    let a = crate::common::Anchored::new(50, "bind/k");
    let copy = a.dir.path().join("copy.jsonl");
    let out = crate::common::bin()
        .args([
            "follow",
            "--once",
            "--from-start",
            "--db",
            path_str(&a.db),
            "--origin",
            "bind/agentrt",
        ])
        .args(["--sink", &format!("file:{}", path_str(&copy))])
        .args(["--cursor", path_str(&a.dir.path().join("cursor"))])
        .args(["--anchor", &a.anchor_url(), "--signing-key", path_str(&a.key)])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let elsewhere = a.dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let bin = shared_binary(a.dir.path());
    let script = format!(
        "mount --bind '{store}' '{elsewhere}' && exec '{bin}' restore --from 'file:{copy}' --anchor '{anchor}' --trusted-key '{key}' --out '{elsewhere}/restored.db'",
        store = path_str(&a.anchors),
        elsewhere = path_str(&elsewhere),
        bin = path_str(&bin),
        copy = path_str(&copy),
        anchor = a.anchor_url(),
        key = a.verifier,
    );
    let out = Command::new("unshare")
        .args(["-m", "sh", "-c", &script])
        .output()
        .unwrap();
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("inside the anchor store"), "{}", stderr(&out));
    assert!(
        std::fs::read_dir(&a.anchors)
            .unwrap()
            .all(|e| !e.unwrap().file_name().to_string_lossy().ends_with(".db"))
    );
}
