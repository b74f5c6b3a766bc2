//! Every example in every command's `--help` and in the README runs, as
//! written, and succeeds: docs cannot drift from the program again.
//!
//! Each help section's examples and each README code block (` ```sh ` and
//! ` ```cron `) run in order, in a fresh scratch root prepared the way an
//! operator's machine would be: a database at the paths the examples name,
//! keys, a config file, and exports and heads already in every sink and
//! store they mention. What the harness changes in an example, and only
//! that: absolute paths (`/data/…`, `/var/…`, `/etc/chainship/…`, `/mnt/…`,
//! `/siem/…`, `/tmp/…`) live under the scratch root, and the hosts `kafka:9092`
//! and `http://minio:9000` are the test broker and S3 server. S3 endpoints
//! come from `CHAINSHIP_S3_ENDPOINT`/`CHAINSHIP_ANCHOR_S3_ENDPOINT` in the
//! environment, as an operator's would. `cargo` and `./scripts/` lines are
//! the build and this very suite, run by CI itself, and are skipped.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;
use tempfile::TempDir;

const ORIGIN: &str = "prod-eu1/agentrt";

/// One example: where it comes from, and the shell command.
#[derive(Debug)]
struct Example {
    source: String,
    line: String,
}

/// Joins `\` continuations and drops comments.
fn commands(lines: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for raw in lines {
        let line = raw.trim();
        if current.is_empty() && (line.is_empty() || line.starts_with('#')) {
            continue;
        }
        let line = match line.find("  #").or_else(|| line.find(" # ")) {
            Some(i) if !current.is_empty() || !line.starts_with('#') => line[..i].trim_end(),
            _ => line,
        };
        match line.strip_suffix('\\') {
            Some(part) => {
                current.push_str(part.trim_end());
                current.push(' ');
            }
            None => {
                current.push_str(line);
                out.push(std::mem::take(&mut current));
            }
        }
    }
    out
}

/// Every leaf command's `--help` examples, by walking the command list.
fn help_examples() -> Vec<(String, Vec<String>)> {
    fn walk(path: &[String], out: &mut Vec<(String, Vec<String>)>) {
        let mut args = path.to_vec();
        args.push("--help".into());
        let text = stdout(&bin().args(&args).output().unwrap());
        let name = format!("chainship {}", path.join(" ")).trim_end().to_owned();
        let lines: Vec<&str> = text.lines().collect();
        if let Some(start) = lines.iter().position(|l| l.trim() == "Examples:") {
            let block: Vec<&str> = lines[start + 1..]
                .iter()
                .take_while(|l| !l.trim().is_empty())
                .copied()
                .collect();
            out.push((format!("`{name} --help`"), commands(&block)));
        }
        if let Some(start) = lines.iter().position(|l| l.trim() == "Commands:") {
            for l in lines[start + 1..].iter().take_while(|l| l.starts_with("  ")) {
                let sub = l.split_whitespace().next().unwrap();
                if sub != "help" {
                    let mut next = path.to_vec();
                    next.push(sub.to_owned());
                    walk(&next, out);
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(&[], &mut out);
    out
}

/// The documentation's pages: the README, then every page of the book (`docs/src/`), in order.
fn doc_pages() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages = vec!["README.md".to_owned()];
    let mut dirs = vec![root.join("docs/src")];
    let mut book = Vec::new();
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                book.push(path.strip_prefix(root).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    book.sort();
    pages.extend(book);
    pages
}

/// The shell and cron code blocks of the README and the book, each with its page and line number.
fn readme_examples() -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for page in doc_pages() {
        out.extend(page_examples(&page));
    }
    out
}

fn page_examples(page: &str) -> Vec<(String, Vec<String>)> {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(page)).unwrap();
    let mut out = Vec::new();
    let mut block: Option<(usize, bool, Vec<&str>)> = None;
    for (n, line) in text.lines().enumerate() {
        match (&mut block, line.trim_end()) {
            (None, "```sh") => block = Some((n + 1, false, Vec::new())),
            (None, "```cron") => block = Some((n + 1, true, Vec::new())),
            (Some((start, cron, lines)), "```") => {
                let mut cmds = commands(lines);
                if *cron {
                    // A crontab line: five schedule fields, then the command.
                    cmds = cmds
                        .iter()
                        .map(|c| c.splitn(6, char::is_whitespace).last().unwrap().trim().to_owned())
                        .collect();
                }
                cmds.retain(|c| !c.starts_with("cargo ") && !c.starts_with("./scripts/"));
                if !cmds.is_empty() {
                    out.push((format!("{page} line {start}"), cmds));
                }
                block = None;
            }
            (Some((_, _, lines)), _) => lines.push(line),
            (None, _) => {}
        }
    }
    out
}

/// The scratch root's paths for the absolute ones examples use, and the test services for their hosts.
fn localize(line: &str, root: &Path) -> String {
    // The services' addresses only where a line names them: asking for them
    // takes the services lock, which the extractor's own test does not hold.
    let mut line = line.to_owned();
    if line.contains("kafka:9092") {
        line = line.replace("kafka:9092", &kafka_addr());
    }
    if line.contains("http://minio:9000") {
        line = line.replace("http://minio:9000", &s3_endpoint());
    }
    // One pass, so a root that itself lives under /tmp/ is not mapped again.
    const PREFIXES: [&str; 6] = ["/data/", "/var/", "/etc/chainship/", "/mnt/", "/siem/", "/tmp/"];
    let mut out = String::with_capacity(line.len() + 64);
    let mut prev = ' ';
    for (i, c) in line.char_indices() {
        if " =:'\">".contains(prev) && PREFIXES.iter().any(|p| line[i..].starts_with(p)) {
            out.push_str(&root.display().to_string());
        }
        out.push(c);
        prev = c;
    }
    out
}

const TEST_VERIFIER: &str = "prod-eu1/chainship+fd78b9dd+ARVq/TtPJ2ob3IEUsWvBFEaYV9VL0+3ncqsudkYqfRF7";
const TEST_KEY: &str = "PRIVATE+KEY+prod-eu1/chainship+fd78b9dd+AbDiNdWD8GwUGM75zy0wNHkBHHi/8zE3MJYWlrCtwNpO\n";

/// The redaction key the examples name (`/etc/chainship/redaction.key`): never a head key.
const TEST_REDACTION_VERIFIER: &str = "erasure+55a45b2c+AQZrOgAdLc3aKdqjRRXWa/waxDJI8koTmo3l4lysYevN";
const TEST_REDACTION_KEY: &str = "PRIVATE+KEY+erasure+55a45b2c+Abh4RTJcWADiGJSrIHYcvVJ3MMRDtiC08tU5ZeWr2Zvd\n";

fn write_key(path: &Path) {
    write_secret(path, TEST_KEY);
}

fn write_secret(path: &Path, key: &str) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| f.write_all(key.as_bytes()))
        .unwrap();
}

struct Scratch {
    _dir: TempDir,
    root: PathBuf,
}

impl Scratch {
    fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel.trim_start_matches('/'))
    }
}

fn env<'a>(cmd: &'a mut Command, root: &Path) -> &'a mut Command {
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_chainship")).parent().unwrap();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    s3_env(cmd)
        .current_dir(root)
        .env("PATH", path)
        .env("HOME", root)
        .env("CHAINSHIP_S3_ENDPOINT", s3_endpoint())
        .env("CHAINSHIP_S3_PATH_STYLE", "true")
        .env("CHAINSHIP_ANCHOR_S3_ENDPOINT", s3_endpoint())
        .env("CHAINSHIP_ANCHOR_S3_PATH_STYLE", "true")
}

fn must(cmd: &mut Command, what: &str) -> String {
    let out = cmd.output().unwrap();
    assert_eq!(code(&out), 0, "setup: {what}: {}{}", stdout(&out), stderr(&out));
    stdout(&out)
}

/// Empties the S3 test server once per run: the examples name fixed buckets
/// (`audit-anchors`, …), and heads kept there write-once by an earlier run of
/// a developer's machine would be signed by another key. Safe here: the
/// examples hold the services exclusively, and every other test makes its
/// own buckets (and takes the services lock before it does).
fn reset_s3_server_once() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(reset_s3_server);
}

async fn ensure_bucket(name: &str, locked: bool) {
    let made = s3_client()
        .create_bucket()
        .bucket(name)
        .object_lock_enabled_for_bucket(locked)
        .send()
        .await;
    if let Err(e) = made {
        let text = format!("{e:?}");
        assert!(text.contains("BucketAlready"), "creating {name}: {text}");
    }
}

async fn ensure_topic(name: &str) {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    let admin: AdminClient<_> = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", kafka_addr())
        .create()
        .unwrap();
    // Already there from an earlier block is as good.
    let _ = admin
        .create_topics(
            &[NewTopic::new(name, 1, TopicReplication::Fixed(1))],
            &AdminOptions::new(),
        )
        .await;
}

/// An operator's machine for the examples: `keys` is false for a block that makes its own keys.
async fn scratch(keys: bool) -> Scratch {
    let dir = TempDir::new().unwrap();
    let root = dir.path().to_owned();
    let s = Scratch { _dir: dir, root };
    for d in [
        "data",
        "var/lib/agentrt",
        "var/lib/chainship",
        "var/log",
        "etc/chainship",
        "mnt/anchors",
        "siem",
        "tmp",
    ] {
        std::fs::create_dir_all(s.path(d)).unwrap();
    }
    let db = s.path("data/audit.db");
    must(
        bin().args(["generate", "--db", path_str(&db), "--events", "3000"]),
        "generate",
    );
    for copy in ["var/lib/agentrt/audit.db", "audit.db"] {
        std::fs::copy(&db, s.path(copy)).unwrap();
    }
    reset_s3_server_once();
    for b in ["siem-bucket", "siem-exports"] {
        ensure_bucket(b, false).await;
    }
    for b in ["audit-anchors", "anchors"] {
        ensure_bucket(b, true).await;
    }
    for t in ["audit", "agentrt.audit"] {
        ensure_topic(t).await;
    }
    if !keys {
        return s;
    }
    // One fixed test key: heads kept write-once in the S3 server outlive a
    // run, and must verify in the next one too. Never a real key.
    let key = s.path("etc/chainship/head.key");
    write_key(&key);
    let verifier = format!("{TEST_VERIFIER}\n");
    for file in [
        "etc/chainship/head.pub",
        "etc/chainship/trusted-keys",
        "keys.txt",
        "trusted-keys",
    ] {
        std::fs::write(s.path(file), &verifier).unwrap();
    }
    write_secret(&s.path("etc/chainship/redaction.key"), TEST_REDACTION_KEY);
    std::fs::write(
        s.path("etc/chainship/redaction.pub"),
        format!("{TEST_REDACTION_VERIFIER}\n"),
    )
    .unwrap();
    // A fleet's keys file: the test key given for its origin by origin=.
    std::fs::write(s.path("fleet-keys.txt"), format!("{TEST_VERIFIER} origin={ORIGIN}\n")).unwrap();
    write_key(&s.path("head.key"));
    let config = format!(
        "db = \"{}\"\norigin = \"{ORIGIN}\"\nsink = \"file:{}\"\ncursor = \"file:{}\"\nanchor = \"file:{}\"\nsigning-key = \"{}\"\n",
        db.display(),
        s.path("var/lib/chainship/events.jsonl").display(),
        s.path("var/lib/chainship/cursor").display(),
        s.path("mnt/anchors").display(),
        key.display(),
    );
    for file in ["etc/chainship/chainship.toml", "chainship.toml"] {
        std::fs::write(s.path(file), &config).unwrap();
    }
    // Exports and heads in every sink and store the examples read.
    let follow = |sink: String, anchor: &str, cursor: &str| {
        let mut cmd = bin();
        env(&mut cmd, &s.root)
            .args([
                "follow",
                "--once",
                "--from-start",
                "--db",
                path_str(&db),
                "--origin",
                ORIGIN,
            ])
            .args(["--sink", &sink, "--anchor", anchor, "--signing-key", path_str(&key)])
            .args(["--cursor", path_str(&s.path(cursor))]);
        must(&mut cmd, &sink);
    };
    let anchors = format!("file:{}", s.path("mnt/anchors").display());
    follow(
        format!("file:{}", s.path("var/lib/chainship/events.jsonl").display()),
        &anchors,
        "var/lib/chainship/cursor",
    );
    follow(
        format!("file:{}", s.path("siem/events.jsonl").display()),
        &anchors,
        "c-siem",
    );
    follow(format!("kafka://{}/audit", kafka_addr()), &anchors, "c-kafka");
    follow("s3://siem-bucket/exports".into(), "s3://audit-anchors/heads", "c-s3a");
    follow("s3://siem-exports/agentrt".into(), "s3://audit-anchors/heads", "c-s3b");
    s
}

/// Runs one example; a `follow` without `--once`, and `monitor`, are
/// long-running: they must still be running after a few seconds, and stop with 0 on SIGTERM.
fn run_example(ex: &Example, root: &Path) {
    let line = localize(&ex.line, root);
    let long_running = (line.contains(" follow ") && !line.contains("--once") || line.contains(" monitor "))
        && !line.contains("--help");
    let script = if long_running {
        // exec, so the signal reaches chainship itself (through env for leading assignments).
        let words: Vec<&str> = line.split_whitespace().collect();
        let assignments = words
            .iter()
            .take_while(|w| w.contains('=') && !w.starts_with('-'))
            .count();
        if assignments > 0 {
            format!("exec env {line}")
        } else {
            format!("exec {line}")
        }
    } else {
        line.clone()
    };
    let mut cmd = Command::new("sh");
    env(&mut cmd, root).args(["-c", &script]);
    if !long_running {
        let started = Instant::now();
        let out = cmd.output().unwrap();
        assert_eq!(
            code(&out),
            0,
            "{}: `{}` exited {:?} after {:?}\n{}{}",
            ex.source,
            ex.line,
            out.status,
            started.elapsed(),
            stdout(&out),
            stderr(&out)
        );
        return;
    }
    let mut child = KillOnDrop(cmd.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap());
    std::thread::sleep(Duration::from_secs(4));
    if let Ok(Some(status)) = child.try_wait() {
        let mut err = String::new();
        use std::io::Read;
        child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        panic!("{}: `{}` stopped on its own ({status}): {err}", ex.source, ex.line);
    }
    signal(&child, SIGTERM);
    let status = wait_with_limit(&mut child, Duration::from_secs(20));
    assert!(status.success(), "{}: `{}` after SIGTERM: {status}", ex.source, ex.line);
}

async fn run_blocks(blocks: Vec<(String, Vec<String>)>) -> usize {
    let mut ran = 0;
    for (source, lines) in blocks {
        // A block that makes its own keys gets a machine without them (keygen never overwrites).
        let own_keys = lines.iter().any(|l| l.contains("chainship keygen"));
        let s = scratch(!own_keys).await;
        for line in lines {
            run_example(
                &Example {
                    source: source.clone(),
                    line,
                },
                &s.root,
            );
            ran += 1;
        }
    }
    ran
}

#[tokio::test]
async fn every_help_example_runs_as_written() {
    let _services = services_exclusive().await;
    let blocks = help_examples();
    let leaves = [
        "verify",
        "generate",
        "follow",
        "keygen",
        "demo",
        "verify-export",
        "monitor",
        "check",
        "config check",
        "anchor verify",
        "anchor list",
        "restore",
        "diff",
        "runs",
    ];
    for leaf in leaves {
        assert!(
            blocks.iter().any(|(s, _)| s == &format!("`chainship {leaf} --help`")),
            "`chainship {leaf} --help` has no examples: {:?}",
            blocks.iter().map(|b| &b.0).collect::<Vec<_>>()
        );
    }
    let ran = run_blocks(blocks).await;
    assert!(ran >= 20, "only {ran} examples found in --help");
}

#[tokio::test]
async fn every_readme_example_runs_as_written() {
    let _services = services_exclusive().await;
    let blocks = readme_examples();
    let ran = run_blocks(blocks).await;
    assert!(ran >= 12, "only {ran} examples found in the README");
}

#[test]
fn the_extractor_joins_continuations_and_drops_comments() {
    let lines = [
        "# a comment",
        "chainship a \\",
        "    --b c   # trailing",
        "",
        "chainship d",
    ];
    assert_eq!(commands(&lines), vec!["chainship a --b c", "chainship d"]);
    let root = Path::new("/r");
    assert_eq!(
        localize("chainship x --db /data/a.db --sink file:/var/x --y=/tmp/z", root),
        "chainship x --db /r/data/a.db --sink file:/r/var/x --y=/r/tmp/z"
    );
}
