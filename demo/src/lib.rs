//! The demo: the whole story on one machine, with no network and no
//! services. It runs the real subcommands of a chainship binary, as an
//! operator would (generate, follow while a writer appends, anchor verify,
//! tamper with copies, runs, prove, evidence), and checks that each says
//! what it should. `chainship demo` maps its flags to [`Options`] and
//! prints what [`run`] says.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What the demo runs with.
pub struct Options {
    /// The chainship binary whose subcommands the demo runs.
    pub exe: PathBuf,
    /// Where it works (created; must not exist).
    pub dir: PathBuf,
    /// Keep `dir` afterwards (else it is removed however the demo ends).
    pub keep: bool,
    /// Events in the demo database before the live writer starts.
    pub events: u64,
    /// How long the live writer appends while the follower runs.
    pub writer_for: Duration,
    /// Set (by a signal handler) to stop at the next step, cleaning up.
    pub interrupted: Arc<AtomicBool>,
}

/// Why the demo stopped before the end.
#[derive(Debug)]
pub enum Failure {
    /// `interrupted` was set.
    Interrupted,
    /// Whoever reads what the demo says has gone (`chainship demo | head -3`).
    ClosedOutput,
    /// The demo could not set up or run a step (exit 2).
    Setup(String),
    /// A step did not say what it should (exit 1).
    Unexpected(String),
}

impl Failure {
    fn setup(message: impl Into<String>) -> Self {
        Failure::Setup(message.into())
    }

    fn unexpected(message: impl Into<String>) -> Self {
        Failure::Unexpected(message.into())
    }
}

/// Says one line through the caller's `tell`, stopping the demo if it cannot.
macro_rules! say {
    ($out:expr, $($arg:tt)*) => {
        $out(format!($($arg)*))?
    };
}

const ORIGIN: &str = "demo/agentrt";

struct Demo {
    exe: PathBuf,
    dir: PathBuf,
    /// Set by SIGINT/SIGTERM: the demo stops at the next step, cleaning up.
    interrupted: Arc<AtomicBool>,
}

impl Demo {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn p(&self, name: &str) -> String {
        self.path(name).display().to_string()
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.exe);
        cmd.args(args).env("RUST_LOG", "error").env_remove("CHAINSHIP_DB");
        cmd
    }

    fn check_interrupted(&self) -> Result<(), Failure> {
        if self.interrupted.load(Ordering::Relaxed) {
            return Err(Failure::Interrupted);
        }
        Ok(())
    }

    fn run(&self, args: &[&str]) -> Result<Output, Failure> {
        self.check_interrupted()?;
        self.cmd(args)
            .output()
            .map_err(|e| Failure::setup(format!("demo: cannot run {}: {e}", self.exe.display())))
    }

    fn expect_ok(&self, what: &str, args: &[&str]) -> Result<Output, Failure> {
        let out = self.run(args)?;
        if !out.status.success() {
            return Err(Failure::unexpected(format!(
                "demo: {what} failed unexpectedly: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        Ok(out)
    }

    fn spawn(&self, args: &[&str]) -> Result<Running, Failure> {
        self.check_interrupted()?;
        self.cmd(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map(Running)
            .map_err(|e| Failure::setup(format!("demo: cannot start {}: {e}", self.exe.display())))
    }

    fn anchor_verify(&self, db: &str, verifier: &str) -> Result<(Output, serde_json::Value), Failure> {
        let anchors = format!("file:{}", self.p("anchors"));
        let out = self.run(&[
            "anchor",
            "verify",
            "--json",
            "--db",
            db,
            "--anchor",
            &anchors,
            "--origin",
            ORIGIN,
            "--trusted-key",
            verifier,
        ])?;
        let json = serde_json::from_slice(&out.stdout).map_err(|e| {
            Failure::unexpected(format!(
                "demo: anchor verify printed no JSON ({e}): {}",
                String::from_utf8_lossy(&out.stderr)
            ))
        })?;
        Ok((out, json))
    }
}

/// A child that is killed if the demo ends before it does, so that a demo
/// failing midway leaves no writer or follower running in its directory.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// The demo's own temporary directory, removed however the demo ends (an
/// error returned midway included). `None` for a `--dir`, which is kept.
struct Cleanup(Option<PathBuf>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(dir) = &self.0
            && let Err(e) = std::fs::remove_dir_all(dir)
        {
            tracing::warn!("demo: cannot remove {}: {e}", dir.display());
        }
    }
}

fn first_line(text: &[u8]) -> String {
    String::from_utf8_lossy(text).lines().next().unwrap_or("").to_owned()
}

fn seq_in(path: &Path) -> u64 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| t.split(':').next()?.trim().parse().ok())
        .unwrap_or(0)
}

fn describe(finding: &serde_json::Value) -> String {
    format!(
        "{} at seq {}",
        finding["kind"].as_str().unwrap_or("?"),
        finding["seq"].as_u64().map_or("-".into(), |s| s.to_string())
    )
}

/// Runs the demo with `exe` (a chainship binary), saying each step through
/// `tell`. The directory is removed at the end unless `options.keep`.
pub fn run(options: &Options, tell: &mut dyn FnMut(String) -> Result<(), Failure>) -> Result<(), Failure> {
    let args = options;
    let dir = options.dir.clone();
    std::fs::create_dir(&dir).map_err(|e| match options.keep {
        true => Failure::setup(format!("--dir {}: {e}", dir.display())),
        false => Failure::setup(format!("demo: cannot create {}: {e}", dir.display())),
    })?;
    // Declared before the children: dropped after them, once they are gone.
    let _cleanup = Cleanup((!options.keep).then(|| dir.clone()));
    std::fs::create_dir(dir.join("anchors")).map_err(|e| Failure::setup(format!("{}: {e}", dir.display())))?;
    let d = Demo {
        exe: options.exe.clone(),
        dir,
        interrupted: Arc::clone(&options.interrupted),
    };
    match options.keep {
        true => say!(tell, "chainship demo in {}", d.dir.display()),
        false => say!(
            tell,
            "chainship demo in {} (removed at the end; --dir DIR keeps the files)",
            d.dir.display()
        ),
    }

    // 1. A signing key and a demo audit database.
    let key_out = d.expect_ok("keygen", &["keygen", "--name", ORIGIN, "--out", &d.p("head.key")])?;
    let verifier = first_line(&key_out.stdout);
    // One tool call whose outcome was never recorded, for the run check to name (step 6).
    let fault = format!("unknown-outcome@{}", (args.events / 4).max(1));
    d.expect_ok(
        "generate",
        &[
            "generate",
            "--db",
            &d.p("audit.db"),
            "--events",
            &args.events.to_string(),
            "--inject",
            &fault,
        ],
    )?;
    std::fs::copy(d.path("audit.db"), d.path("backup.db")).map_err(|e| Failure::setup(format!("demo: {e}")))?;
    say!(
        tell,
        "1. key {ORIGIN} (verifier {verifier}); audit.db with {} events; a backup copy taken",
        args.events
    );

    // 2. A live writer and the follower, shipping to a file and anchoring to a directory.
    let mut writer = d.spawn(&[
        "generate",
        "--db",
        &d.p("audit.db"),
        "--append",
        "--events",
        "0",
        "--follow-rate",
        "300",
        "--follow-for",
        &humantime::format_duration(args.writer_for).to_string(),
    ])?;
    let mut follower = d.spawn(&[
        "follow",
        "--db",
        &d.p("audit.db"),
        "--origin",
        ORIGIN,
        "--from-start",
        "--sink",
        &format!("file:{}", d.p("events.jsonl")),
        "--cursor",
        &format!("file:{}", d.p("cursor")),
        "--anchor",
        &format!("file:{}", d.p("anchors")),
        "--signing-key",
        &d.p("head.key"),
        "--batch-size",
        "100",
    ])?;
    let writer_ok = writer.0.wait().map(|s| s.success()).unwrap_or(false);
    let head_out = d.expect_ok("verify", &["verify", "--db", &d.p("audit.db"), "--json"])?;
    let head: serde_json::Value = serde_json::from_slice(&head_out.stdout).unwrap_or_default();
    let final_seq = head["head"]["seq"].as_u64().unwrap_or(0);
    let deadline = Instant::now() + Duration::from_secs(30);
    while seq_in(&d.path("cursor")) < final_seq || seq_in(&d.path("cursor.anchored")) < final_seq {
        if Instant::now() > deadline {
            return Err(Failure::unexpected("demo: the follower did not catch up within 30 s"));
        }
        d.check_interrupted()?;
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(follower.0.id() as i32, libc::SIGTERM) };
    let follower_ok = follower.0.wait().map(|s| s.success()).unwrap_or(false);
    if !writer_ok || !follower_ok {
        return Err(Failure::unexpected(
            "demo: the writer or the follower did not exit cleanly",
        ));
    }
    let count = |dir: &Path, ext: Option<&str>| {
        std::fs::read_dir(dir).map_or(0, |r| {
            r.filter_map(Result::ok)
                .filter(|e| ext.is_none_or(|x| e.path().extension().is_some_and(|y| y == x)))
                .count()
        })
    };
    let log = d.path("anchors").join(ORIGIN);
    let (heads, checkpoints) = (count(&log, Some("head")), count(&log.join("checkpoints"), None));
    say!(
        tell,
        "2. followed while a writer appended for {}: {final_seq} events in events.jsonl, {heads} signed heads and {checkpoints} checkpoints (with their Merkle tiles) in anchors/",
        humantime::format_duration(args.writer_for)
    );

    // 3. The nightly check passes.
    let (out, json) = d.anchor_verify(&d.p("audit.db"), &verifier)?;
    if !out.status.success() {
        return Err(Failure::unexpected(format!(
            "demo: anchor verify failed on the intact database: {json}"
        )));
    }
    say!(
        tell,
        "3. anchor verify audit.db: ok, last trusted head seq {}",
        json["last_trusted_head"]["seq"]
    );

    // 4. One event altered in a copy.
    let altered_seq = (args.events / 2).max(1);
    std::fs::copy(d.path("audit.db"), d.path("altered.db")).map_err(|e| Failure::setup(format!("demo: {e}")))?;
    rusqlite::Connection::open(d.path("altered.db"))
        .and_then(|c| {
            c.execute(
                "UPDATE events SET payload_json = '{\"decision\":\"deny\"}' WHERE seq = ?1",
                [altered_seq as i64],
            )
        })
        .map_err(|e| Failure::setup(format!("demo: altering the copy: {e}")))?;
    let (out, json) = d.anchor_verify(&d.p("altered.db"), &verifier)?;
    let first = &json["findings"][0];
    if out.status.code() != Some(1) || first["kind"] != "altered" || first["seq"] != altered_seq {
        return Err(Failure::unexpected(format!(
            "demo: the altered copy was not caught as expected: {json}"
        )));
    }
    say!(
        tell,
        "4. altered seq {altered_seq} in a copy: anchor verify exits 1: {}; {} run(s) touched, {} side effect(s) need reconciliation",
        describe(first),
        json["affected"]["runs"].as_array().map_or(0, Vec::len),
        json["affected"]["side_effect_count"]
    );

    // 5. The old backup restored, and written to again.
    d.expect_ok(
        "generate --append",
        &[
            "generate",
            "--db",
            &d.p("backup.db"),
            "--append",
            "--events",
            &(final_seq - args.events + 50).to_string(),
            "--seed",
            "42",
        ],
    )?;
    let (out, json) = d.anchor_verify(&d.p("backup.db"), &verifier)?;
    let first = &json["findings"][0];
    if out.status.code() != Some(1) || first["kind"] != "fork" {
        return Err(Failure::unexpected(format!(
            "demo: the restored backup was not caught as a fork: {json}"
        )));
    }
    say!(
        tell,
        "5. restored the backup and appended new events: anchor verify exits 1: {}, last trusted head seq {}",
        describe(first),
        json["last_trusted_head"]["seq"]
    );

    // 6. The run check names the tool call left with no outcome.
    let out = d.run(&["runs", "--db", &d.p("audit.db"), "--findings-only", "--json"])?;
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let unknown = json["findings"]
        .as_array()
        .and_then(|f| f.iter().find(|f| f["kind"] == "unknown-outcome"))
        .cloned();
    let unknown_run = unknown
        .as_ref()
        .and_then(|f| f["run_id"].as_str())
        .unwrap_or_default()
        .to_owned();
    match (out.status.code(), unknown) {
        (Some(1), Some(f)) => say!(
            tell,
            "6. runs audit.db: unknown-outcome at seq {} (run {}, step {}, tool {}): {}",
            f["seq"],
            f["run_id"].as_str().unwrap_or("?"),
            f["step_id"].as_str().unwrap_or("?"),
            f["tool"].as_str().unwrap_or("?"),
            f["message"].as_str().unwrap_or("")
        ),
        _ => {
            return Err(Failure::unexpected(format!(
                "demo: the run check did not name the unknown outcome: {json}"
            )));
        }
    }
    // 7. One event proven to a third party: a few hundred bytes, no other event.
    let proven_seq = (final_seq / 3).max(1);
    let proof = d.expect_ok(
        "prove",
        &[
            "prove",
            "--anchor",
            &format!("file:{}", d.p("anchors")),
            "--origin",
            ORIGIN,
            "--seq",
            &proven_seq.to_string(),
        ],
    )?;
    std::fs::write(d.path("event.tlog-proof"), &proof.stdout).map_err(|e| Failure::setup(format!("demo: {e}")))?;
    let exported = std::fs::read_to_string(d.path("events.jsonl")).map_err(|e| Failure::setup(format!("demo: {e}")))?;
    let record = exported
        .lines()
        .nth(proven_seq as usize - 1)
        .unwrap_or_default()
        .to_owned();
    let checked = d.run(&[
        "check-proof",
        "--proof",
        &d.p("event.tlog-proof"),
        "--record",
        &record,
        "--trusted-key",
        &verifier,
    ])?;
    let mut altered: serde_json::Value = serde_json::from_str(&record).unwrap_or_default();
    let payload = altered["payload_json"].as_str().unwrap_or_default().to_owned();
    altered["payload_json"] = serde_json::Value::String(format!("{payload} "));
    let refused = d.run(&[
        "check-proof",
        "--proof",
        &d.p("event.tlog-proof"),
        "--record",
        &altered.to_string(),
        "--trusted-key",
        &verifier,
    ])?;
    if !checked.status.success() || refused.status.code() != Some(1) {
        return Err(Failure::unexpected(format!(
            "demo: the proof of seq {proven_seq} did not check out as expected: {}{}",
            String::from_utf8_lossy(&checked.stdout),
            String::from_utf8_lossy(&refused.stdout)
        )));
    }
    say!(
        tell,
        "7. prove seq {proven_seq}: a {}-byte proof (C2SP tlog-proof); check-proof of its record: ok; of the record with its payload changed: not proven",
        proof.stdout.len()
    );
    // 8. The evidence for that run, as one bundle an auditor checks offline.
    let bundle = d.p("evidence.tar");
    let anchors = format!("file:{}", d.p("anchors"));
    let db = d.p("audit.db");
    let store = ["--origin", ORIGIN, "--anchor", &anchors, "--trusted-key", &verifier];
    let made = ["evidence", "--run", &unknown_run, "--db", &db, "--out", &bundle];
    d.expect_ok("evidence", &[&made[..], &store[..]].concat())?;
    let out = d.run(&["check-evidence", &bundle, "--trusted-key", &verifier, "--json"])?;
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let named = json["findings"]
        .as_array()
        .is_some_and(|f| f.iter().any(|f| f["kind"] == "unknown-outcome"));
    if out.status.code() != Some(1) || json["proven"]["all"] != true || !named {
        return Err(Failure::unexpected(format!(
            "demo: the run's evidence did not check out as expected: {json}"
        )));
    }
    say!(
        tell,
        "8. evidence for run {unknown_run}: {} events, each proven in checkpoint {} (evidence.tar, {} bytes, with report.html); check-evidence names the unknown-outcome",
        json["proven"]["records"],
        json["checkpoint"]["size"],
        std::fs::metadata(d.path("evidence.tar")).map_or(0, |m| m.len())
    );
    if options.keep {
        say!(
            tell,
            "all as expected. Try: chainship anchor verify --db {} --anchor file:{} --origin {ORIGIN} --trusted-key '{verifier}'",
            d.p("audit.db"),
            d.p("anchors")
        );
    } else {
        say!(
            tell,
            "all as expected. Run `chainship demo --dir DIR` to keep the files and try the commands yourself."
        );
    }
    Ok(())
}
