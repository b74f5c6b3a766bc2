//! Helpers shared by the integration tests: running the binary, making and
//! damaging databases, the lock on the real services the test script
//! started and the way to reach them, and the kill -9 loop.

use std::cell::Cell;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

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
    // Most tests count the heads of an export in batches: a head per batch.
    // The 10s default is tested on its own (`default_bin`).
    cmd.env("CHAINSHIP_ANCHOR_INTERVAL", "0s");
    cmd
}

/// The binary with the defaults a user gets (no `--anchor-interval 0s`).
pub fn default_bin() -> Command {
    let mut cmd = bin();
    cmd.env_remove("CHAINSHIP_ANCHOR_INTERVAL");
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
    generate_with(dir, name, events, &[])
}

/// The same with more flags: `--seed 3` for another chain, `--large-every`, ….
pub fn generate_with(dir: &Path, name: &str, events: u64, extra: &[&str]) -> PathBuf {
    let db = dir.join(name);
    let out = bin()
        .args(["generate", "--db", path_str(&db), "--events", &events.to_string()])
        .args(extra)
        .output()
        .expect("running chainship");
    assert_eq!(code(&out), 0, "generate failed: {}", stderr(&out));
    db
}

/// `chainship generate --append`: `events` more events at the end of `db`,
/// as the runtime would write them.
pub fn append(db: &Path, events: u64) {
    let out = run(&[
        "generate",
        "--db",
        path_str(db),
        "--append",
        "--events",
        &events.to_string(),
    ]);
    assert_eq!(code(&out), 0, "generate --append failed: {}", stderr(&out));
}

/// A row whose payload is not UTF-8, with its correct chain hash, appended
/// as a runtime storing raw bytes in a TEXT column would.
pub fn append_non_utf8_event(db: &Path) {
    append_event(
        db,
        "run-x",
        "",
        "2026-11-30T00:00:00Z",
        "tool.call",
        b"{\"note\":\"\xff\xfe raw\"}",
    );
}

/// Appends one event, chained to the last, as the runtime would; the payload
/// is stored as TEXT whatever its bytes.
pub fn append_event(db: &Path, run: &str, step: &str, at: &str, kind: &str, payload: &[u8]) {
    let conn = tamper(db);
    let (seq, prev): (i64, String) = conn
        .query_row("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    let seq = seq + 1;
    let hash = chainship_chain::event_hash(
        prev.as_bytes(),
        seq as u64,
        run.as_bytes(),
        step.as_bytes(),
        at.as_bytes(),
        kind.as_bytes(),
        payload,
    );
    conn.execute(
        "INSERT INTO events (seq, run_id, step_id, at, type, payload_json, hash) VALUES (?1, ?2, ?3, ?4, ?5, CAST(?6 AS TEXT), ?7)",
        rusqlite::params![seq, run, step, at, kind, payload, std::str::from_utf8(&hash).unwrap()],
    )
    .unwrap();
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

// ---- The real services: one lock for the whole binary ----

/// Every module's tests run in this one binary, several at once, and the
/// Kafka broker and the S3 server are shared by all of them. So a test that
/// touches either takes this lock first thing and holds it to its end:
///
/// - [`services`] (shared) when it works only in topics and buckets of its
///   own ([`kafka_topic`], [`bucket`], [`locked_bucket`]) and under an origin
///   no other Kafka test follows (a follower's transactional id is its
///   origin's, broker-wide: two at once would fence each other): such tests
///   run side by side;
/// - [`services_exclusive`] when it pauses a service ([`Paused`]), resets
///   one ([`reset_s3_server`]), uses names other tests could use too, or
///   asserts on how soon a service answers (kill -9 loops, live writers
///   against a deadline): it runs with no other service test.
///
/// Tests that touch neither service take nothing and run alongside any.
/// The addresses, clients and pids of the services are handed only to a
/// thread that holds the lock ([`kafka_addr`], [`s3_endpoint`],
/// [`service_pid`]), so a test that forgot it fails at once, saying so.
/// A tokio lock: never poisoned by a failing test, and writer-fair, so a
/// test waiting for exclusive use is not starved by a stream of shared ones.
static SERVICES: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

#[derive(Clone, Copy, PartialEq, Debug)]
enum Hold {
    Nothing,
    Shared,
    Exclusive,
}

thread_local! {
    /// What the test running on this thread holds of [`SERVICES`] (async
    /// tests run on their own thread too: `#[tokio::test]` is single-threaded).
    static HOLDS: Cell<Hold> = const { Cell::new(Hold::Nothing) };
}

/// The services lock, held until dropped.
#[must_use = "the lock is released as soon as this is dropped"]
pub struct Services {
    _shared: Option<tokio::sync::RwLockReadGuard<'static, ()>>,
    _exclusive: Option<tokio::sync::RwLockWriteGuard<'static, ()>>,
}

impl Services {
    fn held(
        shared: Option<tokio::sync::RwLockReadGuard<'static, ()>>,
        exclusive: Option<tokio::sync::RwLockWriteGuard<'static, ()>>,
    ) -> Services {
        let hold = if exclusive.is_some() {
            Hold::Exclusive
        } else {
            Hold::Shared
        };
        HOLDS.with(|h| {
            assert_eq!(h.get(), Hold::Nothing, "a test takes the services lock once");
            h.set(hold);
        });
        Services {
            _shared: shared,
            _exclusive: exclusive,
        }
    }
}

impl Drop for Services {
    fn drop(&mut self) {
        HOLDS.with(|h| h.set(Hold::Nothing));
    }
}

/// Shared use of the services, in an async test.
pub async fn services() -> Services {
    Services::held(Some(SERVICES.read().await), None)
}

/// Exclusive use of the services, in an async test.
pub async fn services_exclusive() -> Services {
    Services::held(None, Some(SERVICES.write().await))
}

/// Shared use of the services, in a plain `#[test]`.
pub fn services_blocking() -> Services {
    Services::held(Some(SERVICES.blocking_read()), None)
}

fn require(hold: Hold, what: &str) {
    let held = HOLDS.with(Cell::get);
    let enough = match hold {
        Hold::Exclusive => held == Hold::Exclusive,
        _ => held != Hold::Nothing,
    };
    assert!(
        enough,
        "{what} needs the services lock ({}) held by this test, which holds {held:?}: see common::SERVICES",
        match hold {
            Hold::Exclusive => "services_exclusive()",
            _ => "services() or services_blocking()",
        }
    );
}

/// The Kafka broker the test script started. Panics, loudly, when the test
/// runs without it: a service test never skips silently.
pub fn kafka_addr() -> String {
    require(Hold::Shared, "the Kafka broker");
    service_env("CHAINSHIP_TEST_KAFKA", "a Kafka-protocol broker")
}

/// The S3 endpoint the test script started.
pub fn s3_endpoint() -> String {
    require(Hold::Shared, "the S3 server");
    service_env("CHAINSHIP_TEST_S3", "an S3 server")
}

/// The independent C2SP transparency-log verifier the test script installs
/// (`aics-tlog`): a tool, not a server, so no lock. Panics when missing.
pub fn aics_tlog() -> Command {
    Command::new(service_env(
        "CHAINSHIP_TEST_AICS_TLOG",
        "the aics-tlog tool (an independent C2SP tlog verifier)",
    ))
}

/// Every stored hash of `db`, in seq order, one a line (aics-tlog's leaves file).
pub fn hashes_file(db: &Path, out: &Path) {
    let conn = Connection::open(db).unwrap();
    let mut stmt = conn.prepare("SELECT hash FROM events ORDER BY seq").unwrap();
    let hashes: Vec<String> = stmt.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
    std::fs::write(out, hashes.iter().map(|h| format!("{h}\n")).collect::<String>()).unwrap();
}

/// Validates a JSON Lines file against the published OCSF schema with the
/// independent validator the test script installs (tests/validators).
pub fn ocsf_validate(file: &Path) -> Output {
    let python = service_env(
        "CHAINSHIP_TEST_OCSF_PYTHON",
        "Python with ocsf-json-schema and jsonschema",
    );
    Command::new(python)
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/validators/ocsf_validate.py"
        ))
        .arg(file)
        .output()
        .expect("running the OCSF validator")
}

/// Validates a JSON Lines file against Elastic's ECS field definitions
/// (@elastic/ecs), with the validator in tests/validators.
pub fn ecs_validate(file: &Path) -> Output {
    let node = service_env("CHAINSHIP_TEST_NODE", "node");
    let package = service_env("CHAINSHIP_TEST_ECS_PACKAGE", "the @elastic/ecs package");
    Command::new(node)
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/validators/ecs_validate.js"))
        .arg(package)
        .arg(file)
        .output()
        .expect("running the ECS validator")
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

/// A bucket (or topic) name no other test uses: the pid and clock set runs
/// apart (the services outlive a run), the counter the tests of this one.
pub fn unique_bucket(prefix: &str) -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{prefix}-{}-{n}-{}", std::process::id(), nanos % 1_000_000_000)
}

/// A new bucket (no Object Lock), as an export sink would have.
pub async fn bucket(prefix: &str) -> String {
    let bucket = unique_bucket(prefix);
    s3_client()
        .create_bucket()
        .bucket(&bucket)
        .send()
        .await
        .expect("the S3 server creates a bucket");
    bucket
}

/// Empties the S3 test server: every bucket of every test goes, so only
/// with exclusive use of the services.
pub fn reset_s3_server() {
    require(Hold::Exclusive, "resetting the S3 server");
    let endpoint = s3_endpoint();
    let host = endpoint.trim_start_matches("http://").trim_end_matches('/');
    let mut stream = std::net::TcpStream::connect(host).expect("the S3 test server");
    write!(
        stream,
        "POST /moto-api/reset HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 200") || answer.starts_with("HTTP/1.0 200"),
        "{answer}"
    );
}

/// Environment for a chainship process talking to the test S3 server.
pub fn s3_env(cmd: &mut Command) -> &mut Command {
    cmd.env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_EC2_METADATA_DISABLED", "true")
}

/// The pid of a service the test script started (to pause it: exclusive use).
pub fn service_pid(var: &str) -> i32 {
    require(Hold::Exclusive, "pausing a service");
    service_env(var, "the pid of a service started by ./scripts/test")
        .parse()
        .expect("a pid")
}

/// Pauses a service (SIGSTOP) until the guard is dropped (SIGCONT), so a
/// failing test cannot leave it paused for the rest of the suite.
pub struct Paused(pub i32);

impl Paused {
    pub fn new(pid: i32) -> Paused {
        require(Hold::Exclusive, "pausing a service");
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
        .set("enable.partition.eof", "true")
        .create()
        .unwrap();
    let mut tpl = rdkafka::TopicPartitionList::new();
    tpl.add_partition_offset(topic, partition, rdkafka::Offset::Beginning)
        .unwrap();
    consumer.assign(&tpl).unwrap();
    let mut out = Vec::new();
    let mut last = std::time::Instant::now();
    let started = std::time::Instant::now();
    // Done once the end was reported and nothing came for 3 s; a broker slow
    // to answer (a loaded machine) is waited for up to 15 s of silence.
    let mut at_end = false;
    while last.elapsed() < std::time::Duration::from_secs(if at_end { 3 } else { 15 }) {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(120),
            "reading {topic} took too long"
        );
        if let Some(msg) = consumer.poll(std::time::Duration::from_millis(200)) {
            let msg = match msg {
                Err(rdkafka::error::KafkaError::PartitionEOF(_)) => {
                    at_end = true;
                    continue;
                }
                other => other.unwrap(),
            };
            at_end = false;
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

/// What an anchored export starts from: a database of its own
/// (`audit.db`) in a scratch directory, an empty file anchor store
/// (`anchors/`) beside it, and a signing key (`head.key`) with its verifier.
pub struct Anchored {
    pub dir: tempfile::TempDir,
    pub db: PathBuf,
    pub anchors: PathBuf,
    pub key: PathBuf,
    pub verifier: String,
}

impl Anchored {
    /// `events` events, and a key named `key_name`.
    pub fn new(events: u64, key_name: &str) -> Anchored {
        let dir = tempfile::TempDir::new().unwrap();
        let db = generate(dir.path(), "audit.db", events);
        let anchors = dir.path().join("anchors");
        std::fs::create_dir(&anchors).unwrap();
        let (key, verifier) = keygen(dir.path(), key_name, "head.key");
        Anchored {
            dir,
            db,
            anchors,
            key,
            verifier,
        }
    }

    /// The store as `--anchor` takes it.
    pub fn anchor_url(&self) -> String {
        format!("file:{}", path_str(&self.anchors))
    }

    /// The lines of the export a test wrote to `events.jsonl`.
    pub fn lines(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("events.jsonl"))
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }
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

/// `chainship follow --db DB --origin ORIGIN --cursor CURSOR`: the sink and the rest to add.
fn follow_cmd(db: &Path, origin: &str, cursor: &Path) -> Command {
    let mut cmd = bin();
    cmd.args(["follow", "--db", path_str(db), "--origin", origin]).args([
        "--cursor",
        path_str(cursor),
        "--retry-max-delay",
        "1s",
    ]);
    cmd
}

/// `chainship follow` of `db` as `origin` into the test broker's `topic`.
pub fn kafka_follow(db: &Path, topic: &str, origin: &str, cursor: &Path, extra: &[&str]) -> Command {
    let mut cmd = follow_cmd(db, origin, cursor);
    cmd.args(["--sink", &format!("kafka://{}/{topic}", kafka_addr())])
        .args(extra);
    cmd
}

/// `chainship follow` of `db` as `origin` into `s3://BUCKET/exports` on the test server.
pub fn s3_follow(db: &Path, bucket: &str, origin: &str, cursor: &Path, extra: &[&str]) -> Command {
    let mut cmd = follow_cmd(db, origin, cursor);
    s3_env(&mut cmd)
        .args(["--sink", &format!("s3://{bucket}/exports")])
        .args(["--s3-endpoint", &s3_endpoint(), "--s3-path-style"])
        .args(extra);
    cmd
}

/// GET `path` from a port on loopback (a follower's `--metrics-addr`),
/// connecting and reading within `limit` each: (status, body), or None
/// while nothing answers there.
pub fn http_get(port: u16, path: &str, limit: Duration) -> Option<(u16, String)> {
    let mut stream = std::net::TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), limit).ok()?;
    stream.set_read_timeout(Some(limit)).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_owned());
    Some((status, body.unwrap_or_default()))
}

/// The value of one series in a /metrics body, named with its labels as
/// exported (`chainship_sink_errors_total{kind="transient"}`).
pub fn metric(body: &str, series: &str) -> Option<f64> {
    body.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .and_then(|l| l.split_whitespace().last()?.parse().ok())
}

// ---- kill -9 ----

/// A small xorshift generator: spread-out moments without a crate.
pub struct XorShift(u64);

impl XorShift {
    /// The same moments on every run.
    pub fn new(seed: u64) -> Self {
        XorShift(seed | 1)
    }

    /// Other moments on every run.
    pub fn from_clock() -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        XorShift::new(nanos)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// The kill -9 loop: `rounds` times, starts a follower (`start`), lets it
/// run for a moment drawn from `delay_ms` by `rng`, checks it is still
/// running, SIGKILLs it and reaps it, then records `after()` (the cursor,
/// the sink's length). Returns the records, one a round.
pub fn kill_9_loop<T: PartialEq>(
    rounds: usize,
    rng: &mut XorShift,
    delay_ms: std::ops::Range<u64>,
    start: impl FnMut() -> std::process::Child,
    after: impl FnMut() -> T,
) -> Vec<T> {
    kill_rounds(rounds, rng, delay_ms, start, after, false)
}

/// The kill -9 loop for followers whose start-up time depends on the
/// machine's load (Kafka: fencing, reading the tail back): every other
/// round kills at any moment (start-up included), and the rounds between
/// first wait until `after()` changes (a batch delivered in that life,
/// within 60 s, or the test fails), then kill within `delay_ms`, so kills
/// also land mid-export however slow the start.
pub fn kill_9_loop_mid_export<T: PartialEq>(
    rounds: usize,
    rng: &mut XorShift,
    delay_ms: std::ops::Range<u64>,
    start: impl FnMut() -> std::process::Child,
    after: impl FnMut() -> T,
) -> Vec<T> {
    kill_rounds(rounds, rng, delay_ms, start, after, true)
}

fn kill_rounds<T: PartialEq>(
    rounds: usize,
    rng: &mut XorShift,
    delay_ms: std::ops::Range<u64>,
    mut start: impl FnMut() -> std::process::Child,
    mut after: impl FnMut() -> T,
    progress_first: bool,
) -> Vec<T> {
    let mut records = Vec::with_capacity(rounds);
    for round in 0..rounds {
        let delay = delay_ms.start + rng.below(delay_ms.end - delay_ms.start);
        let wait_for_progress = progress_first && round % 2 == 1;
        let before = wait_for_progress.then(&mut after);
        let mut child = KillOnDrop(start());
        if let Some(before) = before {
            let deadline = Instant::now() + Duration::from_secs(60);
            while after() == before {
                assert!(
                    Instant::now() < deadline,
                    "kill {round}: no batch delivered within 60 s of start"
                );
                if let Some(status) = child.try_wait().unwrap() {
                    panic!("kill {round}: the follower stopped on its own ({status}), before delivering");
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        std::thread::sleep(Duration::from_millis(delay));
        if let Some(status) = child.try_wait().unwrap() {
            panic!("kill {round}: the follower stopped on its own after {delay} ms ({status}), before the kill");
        }
        signal(&child, SIGKILL);
        child.wait().unwrap();
        records.push(after());
    }
    records
}

/// Copies the directory tree `from` to `to` (an anchor store, to tamper with a copy).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}
