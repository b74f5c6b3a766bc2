//! `kafka://HOST:PORT[,HOST:PORT...]/TOPIC` — every event of one origin to
//! one partition, in seq order, with an idempotent producer.
//!
//! Exactly once without trusting transactions: a batch is acknowledged only
//! when every message has a successful delivery report; after any failure,
//! and on start, the sink reads its partition back from the last trusted
//! event on, proves what it holds past it (every record re-hashed and
//! linked: headers alone are never trusted), and sends only what follows.
//! A transactional id per origin (`chainship-<origin segment>`) fences an older producer, so two followers
//! of one origin cannot interleave (see the README for brokers without
//! transactions). Each message: key = origin, value = the record JSON,
//! headers `seq`, `hash`, `prev_hash`, `origin`.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use chainship_chain::record::Record;
use chainship_chain::{Head, HeldCheck, origin_segment};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, Message, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::util::Timeout;
use rdkafka::{Offset, TopicPartitionList};
use sha2::{Digest, Sha256};

use crate::Sink;
use crate::batch::Batch;
use crate::error::SinkError;

#[derive(Clone, Debug)]
pub struct KafkaSinkConfig {
    pub brokers: String,
    pub topic: String,
    /// librdkafka settings passed through (TLS, SASL, compression, ...).
    pub options: Vec<(String, String)>,
    /// Fence other producers of this origin with a transactional id.
    pub fence: bool,
    /// Pin the partition (default: derived from the origin).
    pub partition: Option<i32>,
}

pub struct KafkaSink {
    cfg: KafkaSinkConfig,
    origin: String,
    producer: Option<FutureProducer>,
    partition: Option<i32>,
    /// After a failure the partition's tail is read again before resending.
    recheck: bool,
}

/// The partition an origin's events go to: a stable hash of the origin.
pub fn partition_for(origin: &str, partitions: usize) -> i32 {
    let digest = Sha256::digest(origin.as_bytes());
    (u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]) % partitions.max(1) as u32) as i32
}

/// The transactional id that fences other producers of `origin`: one per
/// origin, and never another origin's (`x/y` and `x_y` differ).
pub fn transactional_id(origin: &str) -> String {
    format!("chainship-{}", origin_segment(origin))
}

/// Parses `kafka://brokers/topic`.
pub fn parse_kafka_url(url: &str) -> Result<(String, String), String> {
    let rest = url
        .strip_prefix("kafka://")
        .ok_or("expected kafka://HOST:PORT[,HOST:PORT...]/TOPIC")?;
    let (brokers, topic) = rest
        .split_once('/')
        .ok_or("kafka:// needs a /TOPIC after the brokers")?;
    let topic_ok = !topic.is_empty()
        && topic.len() <= 249
        && topic.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if !topic_ok {
        return Err(format!("topic {topic:?} is not a valid Kafka topic name"));
    }
    if brokers.is_empty() || brokers.split(',').any(|b| !b.contains(':')) {
        return Err("brokers must be HOST:PORT[,HOST:PORT...]".into());
    }
    Ok((brokers.to_owned(), topic.to_owned()))
}

/// Sorts a Kafka error into transient and permanent, naming the setting to change.
fn classify(what: &str, e: &KafkaError) -> SinkError {
    use RDKafkaErrorCode as C;
    // A client that cannot even be built was given settings librdkafka refuses.
    // Its own text quotes the value, which may be a secret (`sasl.pasword=…`): name the key only.
    if let KafkaError::ClientConfig(_, description, key, value) = e {
        // librdkafka's description may quote the value too.
        let description = if value.is_empty() {
            description.clone()
        } else {
            description.replace(value.as_str(), "***")
        };
        return SinkError::permanent(format!(
            "Kafka sink: {what}: setting {key:?} refused: {description} (check --kafka-opt)"
        ));
    }
    let message = format!("Kafka sink: {what}: {e}");
    if matches!(e, KafkaError::ClientCreation(_)) {
        return SinkError::permanent(format!("{message} (check --kafka-opt)"));
    }
    match e.rdkafka_error_code() {
        Some(C::MessageSizeTooLarge) | Some(C::InvalidMessageSize) => SinkError::permanent(format!(
            "{message} (one record is larger than the producer's message.max.bytes or the topic's max.message.bytes allows: raise both)"
        )),
        Some(C::TopicAuthorizationFailed)
        | Some(C::ClusterAuthorizationFailed)
        | Some(C::TransactionalIdAuthorizationFailed)
        | Some(C::SaslAuthenticationFailed) => {
            SinkError::permanent(format!("{message} (check the credentials in --kafka-opt and the ACLs)"))
        }
        Some(C::UnknownTopicOrPartition) | Some(C::UnknownTopic) => SinkError::permanent(format!(
            "{message} (create the topic, or enable auto-create on the broker)"
        )),
        Some(C::ProducerFenced) | Some(C::InvalidProducerEpoch) | Some(C::Fenced) => SinkError::permanent(format!(
            "{message}: another follower for this origin took over (its transactional id fenced this one)"
        )),
        Some(C::InvalidConfig) | Some(C::InvalidArgument) => {
            SinkError::permanent(format!("{message} (check --kafka-opt)"))
        }
        _ => SinkError::transient(message),
    }
}

/// Whether a message in the origin's partition is the origin's: keyed with
/// it, or — whatever its key — a record whose value names it (a record
/// filed under another key is still one a consumer of values would take as
/// this origin's, so it must be checked, never skipped).
pub fn belongs_to(origin: &str, key: Option<&[u8]>, parsed: &Result<Record<'_>, serde_json::Error>) -> bool {
    key == Some(origin.as_bytes()) || parsed.as_ref().is_ok_and(|r| r.origin == origin)
}

/// A client whose failures come back as errors from its calls: librdkafka's
/// own log and error callbacks would repeat a down broker in dozens of lines.
struct QuietContext;

impl rdkafka::ClientContext for QuietContext {
    fn log(&self, _level: rdkafka::config::RDKafkaLogLevel, _fac: &str, _log_message: &str) {}
    fn error(&self, _error: KafkaError, _reason: &str) {}
}

impl rdkafka::consumer::ConsumerContext for QuietContext {}

impl rdkafka::producer::ProducerContext for QuietContext {
    type DeliveryOpaque = ();
    fn delivery(&self, _: &rdkafka::message::DeliveryResult<'_>, _: Self::DeliveryOpaque) {}
}

/// The read-back consumer's context: reaching the end of the partition is
/// what it is looking for, not an error to log.
struct ReadBackContext;

impl rdkafka::ClientContext for ReadBackContext {
    fn error(&self, error: KafkaError, reason: &str) {
        if error.rdkafka_error_code() != Some(RDKafkaErrorCode::PartitionEOF) {
            tracing::warn!(%error, reason, "Kafka read-back consumer");
        }
    }
}

impl rdkafka::consumer::ConsumerContext for ReadBackContext {}

impl KafkaSink {
    pub fn new(cfg: KafkaSinkConfig, origin: &str) -> Self {
        KafkaSink {
            partition: None,
            cfg,
            origin: origin.to_owned(),
            producer: None,
            recheck: true,
        }
    }

    /// The passthrough settings without the producer-only ones, for the
    /// read-back consumer (librdkafka warns about those otherwise).
    fn consumer_config(&self) -> ClientConfig {
        const PRODUCER_ONLY: [&str; 9] = [
            "message.timeout.ms",
            "delivery.timeout.ms",
            "linger.ms",
            "batch.",
            "queue.buffering",
            "compression",
            "retries",
            "retry.backoff",
            "transaction",
        ];
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &self.cfg.brokers);
        for (k, v) in self
            .cfg
            .options
            .iter()
            .filter(|(k, _)| !PRODUCER_ONLY.iter().any(|p| k.starts_with(p)))
        {
            config.set(k, v);
        }
        config
    }

    /// The producer's settings: chainship's defaults, then `--kafka-opt`,
    /// then what exactly-once depends on; the transactional id only when fencing.
    fn producer_config(&self, transactional: bool) -> ClientConfig {
        // Whole batches are enqueued at once, so no linger is needed to fill
        // librdkafka's batches; --kafka-opt can still set one.
        let mut config = ClientConfig::new();
        config.set("linger.ms", "0");
        // An undelivered batch is resent after a read-back, so a bounded
        // wait only makes failures visible sooner; --kafka-opt can raise it.
        config.set("message.timeout.ms", "30000");
        // Records are JSON with two hex hashes each: lz4 cuts the bytes sent and
        // stored several-fold for little CPU, and every Kafka client reads it.
        config.set("compression.type", "lz4");
        for (k, v) in &self.cfg.options {
            config.set(k, v);
        }
        config
            .set("bootstrap.servers", &self.cfg.brokers)
            .set("enable.idempotence", "true")
            .set("acks", "all");
        if transactional {
            config.set("transactional.id", transactional_id(&self.origin));
        }
        config
    }

    /// The producer, created (and its transactions initialised) on first use
    /// and again after a fatal error.
    fn producer(&mut self) -> Result<&FutureProducer, SinkError> {
        if self.producer.is_none() {
            let config = self.producer_config(self.cfg.fence);
            let producer: FutureProducer = config.create().map_err(|e| classify("creating the producer", &e))?;
            if self.cfg.fence {
                producer
                    .init_transactions(Duration::from_secs(15))
                    .map_err(|e| classify("initialising transactions (fencing older producers of this origin)", &e))?;
            }
            self.producer = Some(producer);
        }
        Ok(self.producer.as_ref().expect("just created"))
    }

    /// The partition this origin's records go to, from the topic's metadata
    /// (read once, by a plain client: never the transactional producer, whose
    /// creation would fence a running follower of this origin).
    fn partition(&mut self) -> Result<i32, SinkError> {
        if let Some(p) = self.partition {
            return Ok(p);
        }
        let topic = self.cfg.topic.clone();
        let client: BaseConsumer<QuietContext> = self
            .consumer_config()
            .set("group.id", "chainship-metadata")
            // As a producer's metadata request would: a broker with auto-create
            // on makes the topic, one without answers "unknown topic".
            .set("allow.auto.create.topics", "true")
            .create_with_context(QuietContext)
            .map_err(|e| classify("creating a metadata client", &e))?;
        let metadata = client
            .fetch_metadata(Some(&topic), Duration::from_secs(10))
            .map_err(|e| match e.rdkafka_error_code() {
                Some(
                    RDKafkaErrorCode::BrokerTransportFailure
                    | RDKafkaErrorCode::AllBrokersDown
                    | RDKafkaErrorCode::OperationTimedOut,
                ) => SinkError::transient(format!(
                    "Kafka sink: broker unreachable: no answer from {} within 10 s ({e})",
                    self.cfg.brokers
                )),
                _ => classify(&format!("reading metadata of topic {topic}"), &e),
            })?;
        let t = metadata.topics().iter().find(|t| t.name() == topic);
        let count = match t {
            Some(t) if t.error().is_none() && !t.partitions().is_empty() => t.partitions().len(),
            Some(t) => {
                let code = t.error().map(RDKafkaErrorCode::from);
                return Err(classify(
                    &format!("topic {topic}"),
                    &KafkaError::MetadataFetch(code.unwrap_or(RDKafkaErrorCode::UnknownTopic)),
                ));
            }
            None => {
                return Err(classify(
                    &format!("topic {topic}"),
                    &KafkaError::MetadataFetch(RDKafkaErrorCode::UnknownTopic),
                ));
            }
        };
        let p = match self.cfg.partition {
            // Retrying cannot make a partition exist: say so once.
            Some(p) if p < 0 || p as usize >= count => {
                return Err(SinkError::permanent(format!(
                    "Kafka sink: topic {topic} has {count} partition(s); --kafka-partition {p} does not exist"
                )));
            }
            Some(p) => p,
            None => partition_for(&self.origin, count),
        };
        self.partition = Some(p);
        Ok(p)
    }

    /// Reads back what the partition provably holds past `after` (see
    /// [`Sink::held`]): the origin's records after the last one at or below
    /// `after` (the boundary), fed to a [`HeldCheck`]. The scan starts at
    /// the tail and reaches further back until it has seen the boundary or
    /// the start of the partition.
    ///
    /// When fencing, the producer is set up first: its `init_transactions`
    /// completes or aborts whatever transaction an earlier producer of this
    /// origin left open (a follower killed mid-commit), so what is read
    /// back can no longer change under the reader.
    fn read_back(&mut self, after: Option<Head>) -> Result<Option<Head>, SinkError> {
        self.read_back_with(after, self.cfg.fence)
    }

    fn read_back_with(&mut self, after: Option<Head>, fence_first: bool) -> Result<Option<Head>, SinkError> {
        let partition = self.partition()?;
        if fence_first {
            self.producer()?;
        }
        let topic = self.cfg.topic.clone();
        let mut config = self.consumer_config();
        config
            .set("group.id", "chainship-readback")
            .set("enable.auto.commit", "false")
            .set("enable.partition.eof", "true")
            .set("auto.offset.reset", "error")
            .set("isolation.level", "read_committed");
        let consumer: BaseConsumer<ReadBackContext> = config
            .create_with_context(ReadBackContext)
            .map_err(|e| classify("creating the read-back consumer", &e))?;
        let (low, high) = consumer
            .fetch_watermarks(&topic, partition, Duration::from_secs(10))
            .map_err(|e| classify("reading the partition's watermarks", &e))?;
        if high <= low {
            return Ok(after);
        }
        let after_seq = after.map_or(0, |h| h.seq);
        // Brokers differ in what the high watermark counts (tansu reports the
        // last batch's base offset + 1): start just below it and read on
        // until nothing more comes, widening the window backwards if needed.
        let mut window = 1i64;
        loop {
            let start = (high - window).max(low);
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition_offset(&topic, partition, Offset::Offset(start))
                .map_err(|e| classify("assigning the partition", &e))?;
            consumer
                .assign(&tpl)
                .map_err(|e| classify("assigning the partition", &e))?;
            let mut check = HeldCheck::new(&self.origin, after);
            let mut failure: Option<String> = None;
            // A differing copy of the cursor's record: never reset by a later boundary.
            let mut planted: Option<String> = None;
            let mut boundary = false;
            let started = Instant::now();
            let mut last_message = Instant::now();
            let mut at_end = false;
            loop {
                match consumer.poll(Duration::from_millis(200)) {
                    Some(Ok(msg)) => {
                        last_message = Instant::now();
                        at_end = false;
                        let parsed = Record::parse(msg.payload().unwrap_or_default());
                        if !belongs_to(&self.origin, msg.key(), &parsed) {
                            continue;
                        }
                        let offset = msg.offset();
                        // What follows the last record at or below `after` is
                        // what must be proven; what came before it is covered,
                        // but the cursor's own record must be exactly what was delivered.
                        if let Some(r) = parsed.as_ref().ok().filter(|r| after_seq > 0 && r.seq <= after_seq) {
                            let delivered = after.is_some_and(|a| {
                                r.seq != a.seq || (r.hash.as_bytes() == &a.hash[..] && r.expected_hash() == a.hash)
                            });
                            if !delivered && planted.is_none() {
                                planted = Some(format!(
                                    "Kafka sink: topic {topic} partition {partition} offset {offset}: seq {} is not the record delivered at the cursor ({}); the partition holds what the chain does not",
                                    r.seq,
                                    after.map_or(String::new(), |a| a.to_string())
                                ));
                            }
                            boundary = true;
                            check = HeldCheck::new(&self.origin, after);
                            failure = None;
                            continue;
                        }
                        if failure.is_none() {
                            let place = || format!("topic {topic} partition {partition} offset {offset}");
                            if let Err(m) = check.feed_parsed(parsed, &place) {
                                failure = Some(m);
                            }
                        }
                    }
                    Some(Err(KafkaError::PartitionEOF(_))) => at_end = true,
                    Some(Err(e)) if e.rdkafka_error_code() == Some(RDKafkaErrorCode::OffsetOutOfRange) => at_end = true,
                    Some(Err(e)) => return Err(classify("reading the partition's tail", &e)),
                    None => {}
                }
                let idle = last_message.elapsed();
                if at_end && idle > Duration::from_millis(600) {
                    break;
                }
                // A scan cut short would prove less than the partition holds and
                // resend the rest as duplicates: say so and let the caller retry.
                if idle > Duration::from_secs(10) || started.elapsed() > Duration::from_secs(60) {
                    return Err(SinkError::transient(format!(
                        "Kafka sink: reading back topic {topic} partition {partition} did not reach its end \
                         (no end-of-partition within {} s; the broker is slow or another producer writes non-stop)",
                        started.elapsed().as_secs()
                    )));
                }
            }
            if let Some(m) = planted {
                return Err(SinkError::integrity(m));
            }
            if boundary || start == low {
                return match failure {
                    Some(m) => Err(SinkError::integrity(format!(
                        "Kafka sink: {m}; the partition holds what the chain does not"
                    ))),
                    None => Ok(check.head()),
                };
            }
            window = window.saturating_mul(16);
        }
    }

    async fn send_all(&mut self, batch: &Batch, after_seq: u64) -> Result<(), SinkError> {
        let partition = self.partition()?;
        let topic = self.cfg.topic.clone();
        let origin = self.origin.clone();
        let fence = self.cfg.fence;
        let producer = self.producer()?.clone();
        let started = Instant::now();
        if fence {
            producer
                .begin_transaction()
                .map_err(|e| classify("beginning a transaction", &e))?;
        }
        let mut pending = Vec::with_capacity(batch.len());
        let mut sent = Vec::with_capacity(batch.len());
        for (i, meta) in batch.records.iter().enumerate() {
            if meta.seq <= after_seq {
                continue;
            }
            let seq = meta.seq.to_string();
            let headers = OwnedHeaders::new_with_capacity(4)
                .insert(Header {
                    key: "seq",
                    value: Some(seq.as_str()),
                })
                .insert(Header {
                    key: "hash",
                    value: Some(meta.hash_str()),
                })
                .insert(Header {
                    key: "prev_hash",
                    value: Some(meta.prev_hash_str()),
                })
                .insert(Header {
                    key: "origin",
                    value: Some(origin.as_str()),
                });
            let record = FutureRecord::to(&topic)
                .partition(partition)
                .key(origin.as_bytes())
                .payload(batch.record_json(i))
                .headers(headers);
            pending.push(producer.send(record, Timeout::After(Duration::from_secs(300))));
            sent.push((meta.seq, meta.end - meta.start));
        }
        let enqueued = Instant::now();
        let results = futures::future::join_all(pending).await;
        let acked = Instant::now();
        let failed = results
            .into_iter()
            .zip(&sent)
            .find_map(|(r, at)| r.err().map(|(e, _)| (e, at)));
        if let Some((e, &(seq, bytes))) = failed {
            // No abort here: after timeouts librdkafka needs an epoch bump that
            // not every broker grants. The caller drops this producer instead;
            // the next one's init_transactions aborts what is left open.
            if matches!(
                e.rdkafka_error_code(),
                Some(RDKafkaErrorCode::MessageSizeTooLarge | RDKafkaErrorCode::InvalidMessageSize)
            ) {
                // Retrying or smaller batches cannot help: this one record is too big.
                return Err(SinkError::permanent(format!(
                    "Kafka sink: seq {seq}'s record is {bytes} bytes, more than the producer or topic {topic} accepts ({e}): \
                     raise the producer's message.max.bytes (--kafka-opt message.max.bytes=N) and the topic's max.message.bytes \
                     (and the broker's message.max.bytes) above {bytes}"
                )));
            }
            return Err(classify("delivering a batch", &e));
        }
        if fence {
            // rust-rdkafka's commit first flushes, and its flush sleeps 100 ms whenever the
            // queue is not empty yet; the last delivery report's event is often still being
            // released when our futures complete. Wait that moment out here instead (a blocking
            // sleep: finer than tokio's 1 ms timer, and the commit below blocks this thread anyway).
            let settle = Instant::now();
            while producer.in_flight_count() > 0 && settle.elapsed() < Duration::from_millis(100) {
                std::thread::sleep(Duration::from_micros(100));
            }
            producer
                .commit_transaction(Duration::from_secs(15))
                .map_err(|e| classify("committing the batch", &e))?;
        }
        tracing::debug!(
            enqueue_ms = (enqueued - started).as_millis() as u64,
            acks_ms = (acked - enqueued).as_millis() as u64,
            commit_ms = acked.elapsed().as_millis() as u64,
            "Kafka sink: batch delivered"
        );
        Ok(())
    }
}

#[async_trait]
impl Sink for KafkaSink {
    async fn held(&mut self, after: Option<Head>) -> Result<Option<Head>, SinkError> {
        let held = self.read_back(after)?;
        self.recheck = false;
        Ok(held)
    }

    async fn deliver(&mut self, batch: &Batch) -> Result<(), SinkError> {
        // After a failure part of the batch may have landed: send only what
        // provably follows the event before the batch.
        let after = if self.recheck {
            let before = batch.records.first().and_then(|r| {
                let prev = &r.prev_hash[..r.prev_len];
                Head::from_stored(r.seq - 1, prev)
            });
            let last = batch.last_head().map_or(0, |h| h.seq);
            if self.cfg.fence {
                // Records past this batch appeared while it failed: another
                // follower of this origin is writing. Look before fencing,
                // and stop: never take the origin back from it.
                let seen = self.read_back_with(before, false)?.map_or(0, |h| h.seq);
                if seen > last {
                    return Err(SinkError::permanent(format!(
                        "Kafka sink: another follower for this origin took over: the topic holds seq {seen}, past this batch's seq {last}"
                    )));
                }
            }
            self.read_back(before)?.map_or(0, |h| h.seq)
        } else {
            0
        };
        self.recheck = false;
        let result = self.send_all(batch, after).await;
        if result.is_err() {
            self.recheck = true;
            let fatal = self.producer.as_ref().and_then(|p| p.client().fatal_error());
            if self.cfg.fence {
                // A failed transaction leaves the producer unusable: start afresh.
                self.producer = None;
            }
            if let Some((code, reason)) = fatal {
                self.producer = None;
                if matches!(
                    code,
                    RDKafkaErrorCode::Fenced
                        | RDKafkaErrorCode::ProducerFenced
                        | RDKafkaErrorCode::InvalidProducerEpoch
                ) {
                    // Never take the origin back: that would fence the newer follower in turn.
                    return Err(SinkError::permanent(format!(
                        "Kafka sink: another follower for this origin took over (its transactional id fenced this one): {reason}"
                    )));
                }
                // Any other fatal producer error: the next attempt builds a new producer.
                tracing::warn!(%reason, "Kafka producer hit a fatal error; recreating it");
            }
        }
        result
    }

    async fn check(&mut self) -> Result<String, SinkError> {
        // The producer's settings as follow would use them, without a
        // transactional id (that would fence a running follower) and unused.
        let _: rdkafka::producer::BaseProducer<QuietContext> = self
            .producer_config(false)
            .create_with_context(QuietContext)
            .map_err(|e| classify("checking the producer settings", &e))?;
        let partition = self.partition()?;
        Ok(format!(
            "topic {} reachable; origin {:?} goes to partition {partition}",
            self.cfg.topic, self.origin
        ))
    }

    fn describe(&self) -> String {
        format!("kafka://{}/{}", self.cfg.brokers, self.cfg.topic)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_urls_and_spreads_origins() {
        assert_eq!(
            parse_kafka_url("kafka://a:9092,b:9092/audit.events").unwrap(),
            ("a:9092,b:9092".into(), "audit.events".into())
        );
        assert!(parse_kafka_url("kafka://a:9092").is_err());
        assert!(parse_kafka_url("kafka://a:9092/bad topic").is_err());
        assert!(parse_kafka_url("kafka:///t").is_err());
        assert_eq!(partition_for("x", 1), 0);
        assert_eq!(partition_for("prod/agentrt", 12), partition_for("prod/agentrt", 12));
    }

    #[test]
    fn tls_sasl_and_every_compression_are_built_in() {
        // The settings operators pass through --kafka-opt must be accepted by this
        // build of librdkafka (creating a producer does not connect anywhere).
        let cases: [&[(&str, &str)]; 6] = [
            &[("security.protocol", "ssl")],
            &[
                ("security.protocol", "sasl_ssl"),
                ("sasl.mechanisms", "SCRAM-SHA-512"),
                ("sasl.username", "u"),
                ("sasl.password", "p"),
            ],
            &[
                ("security.protocol", "sasl_ssl"),
                ("sasl.mechanisms", "PLAIN"),
                ("sasl.username", "u"),
                ("sasl.password", "p"),
            ],
            &[("compression.type", "zstd")],
            &[("compression.type", "gzip")],
            &[("compression.type", "snappy")],
        ];
        for settings in cases {
            let mut config = ClientConfig::new();
            config.set("bootstrap.servers", "127.0.0.1:1");
            for (key, value) in settings {
                config.set(*key, *value);
            }
            let created = config.create::<FutureProducer>();
            assert!(created.is_ok(), "{settings:?}: {:?}", created.err());
        }
    }

    #[test]
    fn settings_librdkafka_refuses_are_permanent_errors() {
        let err = ClientConfig::new()
            .set("compression.type", "brotli")
            .create::<FutureProducer>()
            .err()
            .expect("refused");
        let e = classify("creating the producer", &err);
        assert_eq!(e.kind, crate::ErrorKind::Permanent);
        assert!(e.message.contains("check --kafka-opt"), "{}", e.message);
    }
}
