//! The Kafka sink: every event of one origin to one partition, in seq
//! order, with an idempotent producer.
//!
//! Exactly once without trusting transactions: a batch is acknowledged only
//! when every message has a successful delivery report; after any failure,
//! and on start, the sink reads its partition back from the last trusted
//! event on, proves what it holds past it (every record re-hashed and
//! linked: headers alone are never trusted), and sends only what follows.
//! A transactional id per origin ([`transactional_id`]) fences an older
//! producer, so two followers of one origin cannot interleave (see the
//! README for brokers without transactions). Each message: key = origin,
//! value = the record JSON, headers `seq`, `hash`, `prev_hash`, `origin`.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use chainship_chain::record::Record;
use chainship_chain::{Head, HeldCheck};
use rdkafka::consumer::BaseConsumer;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, Message, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::util::Timeout;

use super::config::{KafkaConfig, QuietContext, classify, drop_in_background};
use super::scan::{ScanLimits, Until, ends, scan};
use super::{belongs_to, partition};
use crate::Sink;
use crate::batch::Batch;
use crate::error::SinkError;

pub struct KafkaSink {
    cfg: KafkaConfig,
    origin: String,
    producer: Option<FutureProducer>,
    partition: Option<i32>,
    /// After a failure the partition's tail is read again before resending.
    recheck: bool,
    /// The last read-back's `after`, and whether its own record was there.
    seen_after: Option<(Head, bool)>,
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
    pub fn new(cfg: KafkaConfig, origin: &str) -> Self {
        KafkaSink {
            partition: None,
            cfg,
            origin: origin.to_owned(),
            producer: None,
            recheck: true,
            seen_after: None,
        }
    }

    /// The producer, created (and its transactions initialised) on first use
    /// and again after a fatal error.
    fn producer(&mut self) -> Result<&FutureProducer, SinkError> {
        if self.producer.is_none() {
            let config = self.cfg.producer_config(self.cfg.fence.then_some(self.origin.as_str()));
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

    /// The partition this origin's records go to (looked up once).
    fn partition(&mut self) -> Result<i32, SinkError> {
        if let Some(p) = self.partition {
            return Ok(p);
        }
        let p = partition::lookup(&self.cfg, &self.origin, partition::Lookup::ForWriting)?;
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

    /// `fence_first`: fence (and so end any transaction an earlier producer
    /// of this origin left open), then read to the end as it stands after
    /// that ([`Until::Written`]). Without it, read only what is committed
    /// now ([`Until::Stable`]): this process's own failed transaction may
    /// still be open, and waiting for it would wait for nothing.
    fn read_back_with(&mut self, after: Option<Head>, fence_first: bool) -> Result<Option<Head>, SinkError> {
        let partition = self.partition()?;
        if fence_first {
            self.producer()?;
        }
        let consumer: BaseConsumer<ReadBackContext> = self
            .cfg
            .reader_config("chainship-readback")
            .create_with_context(ReadBackContext)
            .map_err(|e| classify("creating the read-back consumer", &e))?;
        let until = if fence_first { Until::Written } else { Until::Stable };
        let held = self.read_back_on(&consumer, partition, after, until);
        drop_in_background(consumer);
        held
    }

    /// [`Self::read_back_with`]'s reading, on `consumer`.
    fn read_back_on(
        &mut self,
        consumer: &BaseConsumer<ReadBackContext>,
        partition: i32,
        after: Option<Head>,
        until: Until,
    ) -> Result<Option<Head>, SinkError> {
        let topic = self.cfg.topic.clone();
        let (low, high) = ends(&self.cfg, consumer, &topic, &[partition], until)?[0];
        if high <= low {
            self.seen_after = after.map(|a| (a, false));
            return Ok(after);
        }
        let after_seq = after.map_or(0, |h| h.seq);
        // Start just below the end, widening the window backwards until the
        // boundary — the last record at or below `after` — is in it.
        let limits = ScanLimits {
            idle: Duration::from_secs(10),
            open_transaction: Duration::from_secs(10),
        };
        let mut window = 1i64;
        loop {
            let start = (high - window).max(low);
            let mut check = HeldCheck::new(&self.origin, after);
            let mut failure: Option<String> = None;
            // A differing copy of the cursor's record: never reset by a later boundary.
            let mut planted: Option<String> = None;
            let mut boundary = false;
            let mut after_held = false;
            scan(&self.cfg, consumer, (partition, start, high), limits, |msg| {
                let parsed = Record::parse(msg.payload().unwrap_or_default());
                // A tombstone (`chainship redact`) is appended after the
                // record it stands for, which was delivered long before:
                // no delivery of this follower's, and judged by verifiers.
                if !belongs_to(&self.origin, msg.key(), &parsed) || parsed.as_ref().is_ok_and(Record::is_tombstone) {
                    return;
                }
                let offset = msg.offset();
                // What follows the last record at or below `after` is what
                // must be proven; what came before it is covered, but the
                // cursor's own record must be exactly what was delivered.
                if let Some(r) = parsed.as_ref().ok().filter(|r| after_seq > 0 && r.seq <= after_seq) {
                    let delivered = after.is_some_and(|a| {
                        r.seq != a.seq || (r.hash.as_bytes() == &a.hash[..] && r.expected_hash() == a.hash)
                    });
                    after_held |= delivered && r.seq == after_seq;
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
                    return;
                }
                if failure.is_none() {
                    let place = || format!("topic {topic} partition {partition} offset {offset}");
                    if let Err(m) = check.feed_parsed(parsed, &place) {
                        failure = Some(m.message);
                    }
                }
            })?;
            if let Some(m) = planted {
                return Err(SinkError::integrity(m));
            }
            if boundary || start == low {
                self.seen_after = after.map(|a| (a, after_held));
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
                     raise the producer's message.max.bytes=N and the topic's max.message.bytes \
                     (and the broker's message.max.bytes) above {bytes}"
                ))
                .with_setting(chainship_chain::Setting::KafkaClient));
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

    async fn holds(&mut self, head: Head) -> Result<bool, SinkError> {
        if !matches!(self.seen_after, Some((h, _)) if h == head) {
            self.read_back(Some(head))?;
        }
        Ok(self.seen_after.is_some_and(|(h, held)| h == head && held))
    }

    async fn deliver(&mut self, batch: &Batch) -> Result<(), SinkError> {
        // After a failure part of the batch may have landed: send only what
        // provably follows the event before the batch.
        let after = if self.recheck {
            let before = batch
                .records
                .first()
                .and_then(|r| Head::from_stored(r.seq - 1, r.prev_hash.as_bytes()));
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
            .cfg
            .producer_config(None)
            .create_with_context(QuietContext)
            .map_err(|e| classify("checking the producer settings", &e))?;
        let partition = self.partition()?;
        Ok(format!(
            "topic {} reachable; origin {:?} goes to partition {partition}",
            self.cfg.topic, self.origin
        ))
    }

    fn describe(&self) -> String {
        self.cfg.url()
    }
}
