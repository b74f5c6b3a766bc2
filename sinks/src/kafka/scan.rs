//! Reading partitions from an offset to their end, the one loop both the
//! sink's read-back and `verify-export` use.
//!
//! Brokers differ in what the high watermark counts (tansu reports the last
//! batch's base offset + 1), so the end is where the consumer reports
//! end-of-partition and nothing more arrives for a moment. A scan that cannot
//! get there is an error, never a short read: a short read-back would resend
//! what the partition holds, a short verify would report a cut copy.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::{Offset, TopicPartitionList};

use super::config::classify;
use crate::error::SinkError;

/// How long a scan may take.
#[derive(Clone, Copy, Debug)]
pub(super) struct ScanLimits {
    /// No message and no end for this long: the broker is not answering.
    pub idle: Duration,
    /// The whole scan, when bounded (another producer writing non-stop could
    /// keep a read-back from ever reaching the end).
    pub total: Option<Duration>,
}

/// Quiet since the last message, once the end of the partition was
/// reported, before the scan counts as done.
const SETTLE: Duration = Duration::from_millis(600);

/// Calls `each` with every message of `partition` from `start` to the end.
pub(super) fn scan<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    topic: &str,
    partition: i32,
    start: Offset,
    limits: ScanLimits,
    each: impl FnMut(&BorrowedMessage<'_>),
) -> Result<(), SinkError> {
    scan_all(consumer, topic, &[partition], start, limits, each)
}

/// Calls `each` with every message of `partitions`, read together (each in
/// its own order, interleaved), from `start` to the end of every one.
pub(super) fn scan_all<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    topic: &str,
    partitions: &[i32],
    start: Offset,
    limits: ScanLimits,
    mut each: impl FnMut(&BorrowedMessage<'_>),
) -> Result<(), SinkError> {
    let mut tpl = TopicPartitionList::new();
    for partition in partitions {
        tpl.add_partition_offset(topic, *partition, start)
            .map_err(|e| classify("assigning the partition", &e))?;
    }
    consumer
        .assign(&tpl)
        .map_err(|e| classify("assigning the partition", &e))?;
    let named = match partitions {
        [one] => format!("partition {one}"),
        many => format!("partitions {many:?}"),
    };
    let started = Instant::now();
    let mut last_message = Instant::now();
    // The partitions that reported their end since their last message.
    let mut at_end: HashSet<i32> = HashSet::new();
    loop {
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(msg)) => {
                last_message = Instant::now();
                at_end.remove(&msg.partition());
                each(&msg);
            }
            Some(Err(KafkaError::PartitionEOF(p))) => {
                at_end.insert(p);
            }
            // The error does not say which: every partition is past its start.
            Some(Err(e)) if e.rdkafka_error_code() == Some(RDKafkaErrorCode::OffsetOutOfRange) => {
                at_end.extend(partitions)
            }
            Some(Err(e)) => return Err(classify(&format!("reading topic {topic} {named}"), &e)),
            None => {}
        }
        let quiet = last_message.elapsed();
        if partitions.iter().all(|p| at_end.contains(p)) && quiet > SETTLE {
            return Ok(());
        }
        let too_long = limits.total.is_some_and(|t| started.elapsed() > t);
        if quiet > limits.idle || too_long {
            return Err(SinkError::transient(format!(
                "Kafka sink: reading topic {topic} {named} did not reach its end within {} s \
                 (the broker is slow, or another producer writes to it non-stop)",
                started.elapsed().as_secs()
            )));
        }
    }
}
