//! Helpers shared by the integration tests: running the binary, making and
//! damaging databases, and finding the real services the test script started.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rusqlite::Connection;

/// The `chainship` binary under test.
pub fn bin() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_chainship"));
    // Tests must not pick up a developer's settings.
    for (key, _) in std::env::vars() {
        if key.starts_with("CHAINSHIP_") && !key.starts_with("CHAINSHIP_TEST_") {
            cmd.env_remove(key);
        }
    }
    cmd.env("RUST_LOG", "warn");
    cmd
}

/// Runs `chainship ARGS` and returns its output.
pub fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("running chainship")
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn code(out: &Output) -> i32 {
    out.status.code().expect("exited, not killed")
}

/// `chainship generate --db PATH --events N` with a fresh file.
pub fn generate(dir: &Path, name: &str, events: u64) -> PathBuf {
    let db = dir.join(name);
    let out = run(&["generate", "--db", path_str(&db), "--events", &events.to_string()]);
    assert_eq!(code(&out), 0, "generate failed: {}", stderr(&out));
    db
}

pub fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

/// A read-write connection for tests that damage a database on purpose.
pub fn tamper(db: &Path) -> Connection {
    Connection::open(db).expect("opening the database to damage it")
}

/// The database's head as `SEQ:HASH`.
pub fn db_head(db: &Path) -> String {
    let conn = Connection::open(db).unwrap();
    conn.query_row(
        "SELECT seq || ':' || hash FROM events ORDER BY seq DESC LIMIT 1",
        [],
        |r| r.get(0),
    )
    .unwrap()
}

/// The Kafka broker the test script started. Panics, loudly, when the test
/// runs without it: a service test never skips silently.
pub fn kafka_addr() -> String {
    service_env("CHAINSHIP_TEST_KAFKA", "a Kafka-protocol broker")
}

/// The S3 endpoint the test script started.
pub fn s3_endpoint() -> String {
    service_env("CHAINSHIP_TEST_S3", "an S3 server")
}

fn service_env(var: &str, what: &str) -> String {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => v,
        _ => panic!("{var} is not set: this test needs {what}; run it through ./scripts/test, which starts one"),
    }
}

/// Re-verifies an exported JSON Lines file from scratch, record by record:
/// every record's hash recomputed from its own fields and `prev_hash`, each
/// `prev_hash` the previous record's `hash`, seqs 1, 2, 3, ... Returns the
/// last record's `SEQ:HASH`, and panics naming the first problem.
pub fn reverify_jsonl(path: &Path, origin: &str) -> (u64, String) {
    use chainship_chain::record::Record;
    let text = std::fs::read(path).expect("reading the exported file");
    assert!(
        text.is_empty() || text.ends_with(b"\n"),
        "the export ends with a torn line"
    );
    let mut prev_hash = String::new();
    let mut last_seq = 0u64;
    for (i, line) in text.split(|b| *b == b'\n').filter(|l| !l.is_empty()).enumerate() {
        let r = Record::parse(line).unwrap_or_else(|e| panic!("line {}: not a record: {e}", i + 1));
        assert_eq!(r.origin, origin, "line {}", i + 1);
        assert_eq!(
            r.seq,
            last_seq + 1,
            "line {}: seq {} follows seq {last_seq}: a gap or a duplicate",
            i + 1,
            r.seq
        );
        assert_eq!(
            r.prev_hash, prev_hash,
            "seq {}: prev_hash is not the previous record's hash",
            r.seq
        );
        assert_eq!(
            r.expected_hash()[..],
            *r.hash.as_bytes(),
            "seq {}: hash does not match the record's fields",
            r.seq
        );
        prev_hash = r.hash.to_string();
        last_seq = r.seq;
    }
    (last_seq, prev_hash)
}

/// Sends a signal to a child process.
pub fn signal(child: &std::process::Child, sig: i32) {
    // SAFETY: kill(2) with a pid we own; no memory is touched.
    let rc = unsafe { libc_kill(child.id() as i32, sig) };
    assert_eq!(rc, 0, "kill({}, {sig}) failed", child.id());
}

unsafe extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

pub const SIGKILL: i32 = 9;
pub const SIGTERM: i32 = 15;
pub const SIGSTOP: i32 = 19;
pub const SIGCONT: i32 = 18;

/// Waits for a child, at most `limit`; panics (after killing it) past that.
pub fn wait_with_limit(child: &mut std::process::Child, limit: std::time::Duration) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("process {} did not exit within {limit:?}", child.id());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// An S3 client for the test server (any credentials are accepted there).
pub fn s3_client() -> aws_sdk_s3::Client {
    let config = aws_sdk_s3::config::Builder::new()
        .behavior_version(aws_sdk_s3::config::BehaviorVersion::latest())
        .endpoint_url(s3_endpoint())
        .region(aws_sdk_s3::config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_s3::config::Credentials::new("test", "test", None, None, "test"))
        .force_path_style(true)
        .build();
    aws_sdk_s3::Client::from_conf(config)
}

/// A bucket name no other test uses.
pub fn unique_bucket(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{prefix}-{}-{}", std::process::id(), nanos % 1_000_000_000)
}

/// Environment for a chainship process talking to the test S3 server.
pub fn s3_env(cmd: &mut Command) -> &mut Command {
    cmd.env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_EC2_METADATA_DISABLED", "true")
}

/// The pid of a service the test script started.
pub fn service_pid(var: &str) -> i32 {
    service_env(var, "the pid of a service started by ./scripts/test")
        .parse()
        .expect("a pid")
}

/// Pauses a service (SIGSTOP) until the guard is dropped (SIGCONT), so a
/// failing test cannot leave it paused for the rest of the suite.
pub struct Paused(pub i32);

impl Paused {
    pub fn new(pid: i32) -> Paused {
        // SAFETY: kill(2) on a pid we were given; no memory is touched.
        assert_eq!(unsafe { libc_kill(pid, SIGSTOP) }, 0, "SIGSTOP {pid}");
        Paused(pid)
    }
}

impl Drop for Paused {
    fn drop(&mut self) {
        // SAFETY: as above.
        unsafe { libc_kill(self.0, SIGCONT) };
    }
}

/// Every message of `origin` in a partition, from the start, as JSON Lines
/// (the message values) — read without joining a consumer group. Reads on
/// until nothing more arrives (brokers differ in what the high watermark
/// counts). Panics if a record lacks the headers or they disagree with it.
pub fn kafka_read_partition(topic: &str, partition: i32, origin: &str) -> Vec<u8> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::message::{Headers, Message};
    let consumer: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", kafka_addr())
        .set("group.id", "chainship-tests-readback")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut tpl = rdkafka::TopicPartitionList::new();
    tpl.add_partition_offset(topic, partition, rdkafka::Offset::Beginning)
        .unwrap();
    consumer.assign(&tpl).unwrap();
    let mut out = Vec::new();
    let mut last = std::time::Instant::now();
    let started = std::time::Instant::now();
    while last.elapsed() < std::time::Duration::from_secs(3) {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(120),
            "reading {topic} took too long"
        );
        if let Some(msg) = consumer.poll(std::time::Duration::from_millis(200)) {
            let msg = msg.unwrap();
            last = std::time::Instant::now();
            if msg.key() != Some(origin.as_bytes()) {
                continue;
            }
            let value = msg.payload().unwrap();
            let record = chainship_chain::record::Record::parse(value).unwrap();
            let headers = msg.headers().expect("headers");
            let get = |name: &str| {
                headers
                    .iter()
                    .find(|h| h.key == name)
                    .and_then(|h| h.value)
                    .map(|v| String::from_utf8(v.to_vec()).unwrap())
            };
            assert_eq!(get("seq"), Some(record.seq.to_string()));
            assert_eq!(get("hash").as_deref(), Some(&*record.hash));
            assert_eq!(get("prev_hash").as_deref(), Some(&*record.prev_hash));
            assert_eq!(get("origin").as_deref(), Some(origin));
            out.extend_from_slice(value);
            out.push(b'\n');
        }
    }
    out
}

/// A child process that is killed if the test ends before it does (a
/// failing assertion must not leave writers or followers running).
pub struct KillOnDrop(pub std::process::Child);

impl std::ops::Deref for KillOnDrop {
    type Target = std::process::Child;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for KillOnDrop {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// A live writer appending `rate` events per second to `db`, as a runtime
/// would (`extra`: e.g. `--follow-max N`); killed if the test ends first.
pub fn live_writer(db: &Path, rate: &str, extra: &[&str]) -> KillOnDrop {
    let child = bin()
        .args([
            "generate",
            "--db",
            path_str(db),
            "--append",
            "--events",
            "0",
            "--follow-rate",
            rate,
        ])
        .args(extra)
        .spawn()
        .expect("starting the writer");
    KillOnDrop(child)
}

/// Stops a live writer (SIGTERM) and returns the database head it left.
pub fn stop_writer(writer: &mut KillOnDrop, db: &Path) -> String {
    signal(writer, SIGTERM);
    let status = wait_with_limit(writer, std::time::Duration::from_secs(5));
    assert!(status.success(), "the writer stops cleanly on SIGTERM: {status}");
    db_head(db)
}

/// Writes a signing key `dir/file` named `name` and returns it with its verifier key.
pub fn keygen(dir: &Path, name: &str, file: &str) -> (PathBuf, String) {
    let key = dir.join(file);
    let out = run(&["keygen", "--name", name, "--out", path_str(&key)]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    (key, stdout(&out).trim().to_owned())
}

/// A new bucket with Object Lock, as an anchor store should have.
pub async fn locked_bucket(prefix: &str) -> String {
    let bucket = unique_bucket(prefix);
    s3_client()
        .create_bucket()
        .bucket(&bucket)
        .object_lock_enabled_for_bucket(true)
        .send()
        .await
        .expect("the S3 server creates an Object Lock bucket");
    bucket
}

/// Waits until the cursor file holds `head`, at most `limit`.
pub fn wait_for_cursor(cursor: &Path, head: &str, limit: std::time::Duration) {
    let deadline = std::time::Instant::now() + limit;
    while std::fs::read_to_string(cursor).unwrap_or_default().trim() != head {
        assert!(
            std::time::Instant::now() < deadline,
            "the follower did not reach {head} within {limit:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// A free TCP port on loopback (for `--metrics-addr`).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A new topic with `partitions` partitions on the test broker.
pub async fn kafka_topic(name: &str, partitions: i32) -> String {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    let topic = unique_bucket(name);
    let admin: AdminClient<_> = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", kafka_addr())
        .create()
        .unwrap();
    let made = admin
        .create_topics(
            &[NewTopic::new(&topic, partitions, TopicReplication::Fixed(1))],
            &AdminOptions::new(),
        )
        .await
        .expect("the broker creates a topic");
    assert!(made[0].is_ok(), "{made:?}");
    topic
}
