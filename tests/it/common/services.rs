//! The real services the test script started (Kafka, S3): one lock for the
//! whole test binary, the way to reach each, and the `follow` commands into them.

use std::cell::Cell;
use std::io::{Read, Write};
use std::path::Path;
use std::process::Command;

use super::*;

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

/// The two Kafka brokers the test script starts: tansu (a Kafka-protocol
/// broker, fast, with quirks of its own) and Apache Kafka itself, whose
/// semantics count (transaction markers take offsets, `read_committed` stops
/// at the last stable offset and hides aborted records, the high watermark
/// is the last offset + 1).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Broker {
    Tansu,
    ApacheKafka,
}

thread_local! {
    /// The broker the test on this thread runs against ([`on_broker`]).
    static BROKER: Cell<Broker> = const { Cell::new(Broker::Tansu) };
}

/// Runs `test` with [`kafka_addr`] and [`kafka_pid`] naming `broker`.
pub async fn on_broker(broker: Broker, test: impl std::future::Future<Output = ()>) {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            BROKER.with(|b| b.set(Broker::Tansu));
        }
    }
    BROKER.with(|b| b.set(broker));
    let _reset = Reset;
    test.await;
}

/// The broker this thread's test runs against.
pub fn broker() -> Broker {
    BROKER.with(Cell::get)
}

/// The Kafka broker the test script started (the one [`on_broker`] chose).
/// Panics, loudly, when the test runs without it: a service test never skips.
pub fn kafka_addr() -> String {
    require(Hold::Shared, "the Kafka broker");
    match broker() {
        Broker::Tansu => service_env("CHAINSHIP_TEST_KAFKA", "a Kafka-protocol broker (tansu)"),
        Broker::ApacheKafka => service_env("CHAINSHIP_TEST_APACHE_KAFKA", "Apache Kafka"),
    }
}

/// The pid of [`kafka_addr`]'s broker (to pause it: exclusive use).
pub fn kafka_pid() -> i32 {
    match broker() {
        Broker::Tansu => service_pid("CHAINSHIP_TEST_KAFKA_PID"),
        Broker::ApacheKafka => service_pid("CHAINSHIP_TEST_APACHE_KAFKA_PID"),
    }
}

/// The S3 endpoint the test script started.
pub fn s3_endpoint() -> String {
    require(Hold::Shared, "the S3 server");
    service_env("CHAINSHIP_TEST_S3", "an S3 server")
}

pub(super) fn service_env(var: &str, what: &str) -> String {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => v,
        _ => panic!("{var} is not set: this test needs {what}; run it through ./scripts/test, which starts one"),
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

/// Turns versioning on for `bucket` (an overwritten object keeps its older versions).
pub async fn versioned(bucket: &str) {
    s3_client()
        .put_bucket_versioning()
        .bucket(bucket)
        .versioning_configuration(
            aws_sdk_s3::types::VersioningConfiguration::builder()
                .status(aws_sdk_s3::types::BucketVersioningStatus::Enabled)
                .build(),
        )
        .send()
        .await
        .expect("the S3 server turns versioning on");
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
    kafka_read_partition_as(topic, partition, origin, "read_committed")
}

/// [`kafka_read_partition`] at the given `isolation.level`.
pub fn kafka_read_partition_as(topic: &str, partition: i32, origin: &str, isolation: &str) -> Vec<u8> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::message::{Headers, Message};
    let consumer: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", kafka_addr())
        .set("isolation.level", isolation)
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

/// `chainship follow` of `db` as `origin` into the test broker's `topic`.
pub fn kafka_follow(db: &Path, topic: &str, origin: &str, cursor: &Path, extra: &[&str]) -> Command {
    Follow::new(db, origin)
        .cursor(cursor)
        .sink(&format!("kafka://{}/{topic}", kafka_addr()))
        .args(["--retry-max-delay", "1s"])
        .args(extra)
        .command()
}

/// `chainship follow` of `db` as `origin` into `s3://BUCKET/exports` on the test server.
pub fn s3_follow(db: &Path, bucket: &str, origin: &str, cursor: &Path, extra: &[&str]) -> Command {
    let mut cmd = Follow::new(db, origin)
        .cursor(cursor)
        .sink(&format!("s3://{bucket}/exports"))
        .args([
            "--retry-max-delay",
            "1s",
            "--s3-endpoint",
            &s3_endpoint(),
            "--s3-path-style",
        ])
        .args(extra)
        .command();
    s3_env(&mut cmd);
    cmd
}
