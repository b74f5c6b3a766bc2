//! Reading partitions from an offset to an end fixed when the read starts,
//! the one loop both the sink's read-back and `verify-export` use.
//!
//! The end is asked once, before the first fetch ([`Until`]), and never
//! moves: a partition that other producers write to non-stop (a fleet
//! sharing a topic) is read to where it stood, not until it falls quiet,
//! which it never does. Reading is `read_committed`, so the end is reached
//! only once every transaction open below it has ended: a transaction a
//! dead producer left open holds the partition's last stable offset back,
//! and the records past it (committed or not) stay invisible until the
//! broker aborts it. That wait is said, never taken for the end: a short
//! read-back would resend what the partition holds, or call a record it
//! holds missing; a short verify would report a cut copy.
//!
//! Brokers differ in the high watermark (tansu reports the last batch's base
//! offset + 1, Kafka the last offset + 1, past a commit marker), so a
//! partition counts as read when the consumer's position — which moves past
//! commit markers too — reaches the end, and the records already fetched
//! with the one that reached it are taken as well (the rest of tansu's last
//! batch).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::{Offset, TopicPartitionList};

use super::config::{KafkaConfig, QuietContext, classify, drop_in_background};
use crate::error::SinkError;

/// Quiet for this long below the end: ask the last stable offset.
const PROBE_AFTER: Duration = Duration::from_secs(1);

/// The most a scan spends taking records already fetched past its end.
const DRAIN: Duration = Duration::from_millis(200);

/// Where a scan ends, asked once as it starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Until {
    /// Every record written before the scan started: each partition's high
    /// watermark. A transaction open then is waited for (up to
    /// [`ScanLimits::open_transaction`]): its records, and every committed
    /// one after them, are only readable once it ends.
    Written,
    /// What is committed and readable now: the last stable offset. Never
    /// waits on an open transaction (used to look before fencing one's own).
    Stable,
}

/// How long a scan may take.
#[derive(Clone, Copy, Debug)]
pub(super) struct ScanLimits {
    /// No message and no end for this long: the broker is not answering.
    pub idle: Duration,
    /// Stopped below the end by a transaction still open for this long.
    pub open_transaction: Duration,
}

/// One partition's place in a scan.
#[derive(Clone, Copy, Debug)]
struct Progress {
    /// Where the scan starts, and the offset it reads up to (exclusive).
    start: i64,
    end: i64,
    reached: bool,
    /// Where the consumer last reported end-of-partition below `end`, and
    /// since when: the last stable offset, held by an open transaction.
    held: Option<(i64, Instant)>,
}

/// Each partition's (low, high) watermarks as the broker has them now,
/// whatever transaction is open (read_uncommitted).
pub(super) fn high_watermarks(
    cfg: &KafkaConfig,
    topic: &str,
    partitions: &[i32],
) -> Result<Vec<(i64, i64)>, SinkError> {
    let client: BaseConsumer<QuietContext> = cfg
        .consumer_config()
        .set("group.id", "chainship-watermarks")
        .set("isolation.level", "read_uncommitted")
        .create_with_context(QuietContext)
        .map_err(|e| classify("creating a watermark client", &e))?;
    let found = partitions
        .iter()
        .map(|p| {
            client
                .fetch_watermarks(topic, *p, Duration::from_secs(10))
                .map_err(|e| classify(&format!("reading topic {topic} partition {p}'s watermarks"), &e))
        })
        .collect();
    drop_in_background(client);
    found
}

/// The offsets a scan of `partitions` ends at: see [`Until`].
pub(super) fn ends<C: ConsumerContext>(
    cfg: &KafkaConfig,
    consumer: &BaseConsumer<C>,
    topic: &str,
    partitions: &[i32],
    until: Until,
) -> Result<Vec<(i64, i64)>, SinkError> {
    match until {
        Until::Written => high_watermarks(cfg, topic, partitions),
        // The reading consumer is read_committed: its "high" is the last stable offset.
        Until::Stable => partitions
            .iter()
            .map(|p| {
                consumer
                    .fetch_watermarks(topic, *p, Duration::from_secs(10))
                    .map_err(|e| classify(&format!("reading topic {topic} partition {p}'s last stable offset"), &e))
            })
            .collect(),
    }
}

/// Calls `each` with every message of `partition` from `start` to `end`
/// (see [`scan_all`]).
pub(super) fn scan<C: ConsumerContext>(
    cfg: &KafkaConfig,
    consumer: &BaseConsumer<C>,
    (partition, start, end): (i32, i64, i64),
    limits: ScanLimits,
    each: impl FnMut(&BorrowedMessage<'_>),
) -> Result<(), SinkError> {
    scan_all(cfg, consumer, &[(partition, start, end)], limits, each)
}

/// Calls `each` with every message of each `(partition, start, end)`, read
/// together (each in its own order, interleaved), from `start` until the
/// consumer's position reaches `end` in every one. A scan that cannot get
/// there is an error naming why, never a short read.
pub(super) fn scan_all<C: ConsumerContext>(
    cfg: &KafkaConfig,
    consumer: &BaseConsumer<C>,
    ranges: &[(i32, i64, i64)],
    limits: ScanLimits,
    mut each: impl FnMut(&BorrowedMessage<'_>),
) -> Result<(), SinkError> {
    let topic = cfg.topic.as_str();
    let mut progress: HashMap<i32, Progress> = HashMap::new();
    let mut tpl = TopicPartitionList::new();
    for &(partition, start, end) in ranges {
        if start >= end {
            continue;
        }
        tpl.add_partition_offset(topic, partition, Offset::Offset(start))
            .map_err(|e| classify("assigning the partition", &e))?;
        progress.insert(
            partition,
            Progress {
                start,
                end,
                reached: false,
                held: None,
            },
        );
    }
    if progress.is_empty() {
        return Ok(());
    }
    consumer
        .assign(&tpl)
        .map_err(|e| classify("assigning the partition", &e))?;
    let named = match ranges {
        [(one, ..)] => format!("partition {one}"),
        many => format!("partitions {:?}", many.iter().map(|r| r.0).collect::<Vec<_>>()),
    };
    let started = Instant::now();
    let mut last_progress = Instant::now();
    let mut last_probe = Instant::now();
    while progress.values().any(|p| !p.reached) {
        match consumer.poll(Duration::from_millis(20)) {
            Some(Ok(msg)) => {
                last_progress = Instant::now();
                if let Some(p) = progress.get_mut(&msg.partition()) {
                    p.reached |= msg.offset() + 1 >= p.end;
                    p.held = None;
                }
                each(&msg);
            }
            Some(Err(KafkaError::PartitionEOF(partition))) => {
                last_progress = Instant::now();
                // The position moved past commit markers and aborted records too.
                let at = position(consumer, topic, partition)?;
                if let Some(p) = progress.get_mut(&partition) {
                    if at.is_some_and(|at| at >= p.end) {
                        p.reached = true;
                    } else if p.held.is_none() {
                        p.held = Some((at.unwrap_or(p.start), Instant::now()));
                        said_held(cfg, partition, at.unwrap_or(p.start), p.end);
                    }
                }
            }
            // The start is gone (retention deleted it while the scan began): what
            // was there cannot be read, so the caller must read again, never short.
            Some(Err(e)) if e.rdkafka_error_code() == Some(RDKafkaErrorCode::OffsetOutOfRange) => {
                return Err(SinkError::transient(format!(
                    "Kafka sink: reading topic {topic} {named}: an offset the scan started from is no longer in the partition (retention removed it meanwhile): reading again"
                )));
            }
            Some(Err(e)) => return Err(classify(&format!("reading topic {topic} {named}"), &e)),
            // Nothing to hand out: a commit marker may have been passed (the
            // end on Kafka is past the last one), which no message reports.
            None => {
                for (n, p) in progress.iter_mut().filter(|(_, p)| !p.reached) {
                    p.reached = position(consumer, topic, *n)?.is_some_and(|at| at >= p.end);
                }
            }
        }
        if last_progress.elapsed() > PROBE_AFTER && last_probe.elapsed() > PROBE_AFTER {
            last_probe = Instant::now();
            // Quiet below the end: ask whether a transaction still open holds the
            // last stable offset there (the consumer says so only when it reads
            // from exactly that offset). The reading consumer is read_committed.
            for (n, p) in progress.iter_mut().filter(|(_, p)| !p.reached && p.held.is_none()) {
                let (_, stable) = consumer
                    .fetch_watermarks(topic, *n, Duration::from_secs(10))
                    .map_err(|e| classify(&format!("reading topic {topic} partition {n}'s last stable offset"), &e))?;
                if stable < p.end {
                    p.held = Some((stable, Instant::now()));
                    said_held(cfg, *n, stable, p.end);
                }
            }
            if progress.values().any(|p| p.held.is_some()) {
                last_progress = Instant::now();
            }
        }
        if let Some((partition, at, since, end)) = progress
            .iter()
            .filter(|(_, p)| !p.reached)
            .find_map(|(n, p)| p.held.map(|(at, since)| (*n, at, since, p.end)))
            .filter(|(.., since, _)| since.elapsed() > limits.open_transaction)
        {
            return Err(SinkError::transient(format!(
                "Kafka sink: topic {topic} partition {partition}: the records from offset {at} to {end} stay unreadable: a transaction opened below offset {end} is still open after {} s{} (a producer that died mid-transaction: the broker aborts it after that producer's transaction.timeout.ms, or at once when a producer of its transactional.id starts); what lies past it is not read short",
                since.elapsed().as_secs(),
                holder(cfg, partition, at)
            )));
        }
        if last_progress.elapsed() > limits.idle {
            return Err(SinkError::transient(format!(
                "Kafka sink: reading topic {topic} {named}: no answer from the broker for {} s ({} s in all)",
                limits.idle.as_secs(),
                started.elapsed().as_secs()
            )));
        }
    }
    // What was fetched with the record that reached the end is the same batch
    // (tansu's high watermark is inside its last batch): take it too. Only what
    // is already here, and briefly: records written since the start are not
    // the scan's to wait for.
    let draining = Instant::now();
    while let Some(next) = consumer.poll(Duration::ZERO).filter(|_| draining.elapsed() < DRAIN) {
        match next {
            Ok(msg) => each(&msg),
            Err(KafkaError::PartitionEOF(_)) => break,
            Err(e) => return Err(classify(&format!("reading topic {topic} {named}"), &e)),
        }
    }
    Ok(())
}

/// Says, when it is first seen, that a transaction still open holds the
/// read below its end: the wait may be long, and must not look like a hang.
fn said_held(cfg: &KafkaConfig, partition: i32, at: i64, end: i64) {
    let topic = cfg.topic.as_str();
    tracing::warn!(
        topic,
        partition,
        "Kafka: topic {topic} partition {partition}: the records from offset {at} to {end} are not readable yet: a transaction opened below offset {end} is still open{} (a producer that died mid-transaction?); waiting for the broker to end it",
        holder(cfg, partition, at)
    );
}

/// The longest key [`holder`] quotes.
const HOLDER_KEY_MAX: usize = 200;

/// What a held read says of the key of the record holding it. The key is
/// whatever the record's producer chose — anyone who can write the topic
/// can choose a real origin's — so it is quoted (escaped, cut) and the
/// transactional id is offered only for a key that is a usable origin, as
/// what that origin's follower would use, never as a finding.
fn describe_key(key: Option<&[u8]>) -> String {
    let Some(key) = key else {
        return "has no key (not a chainship follower's record)".to_owned();
    };
    let text = String::from_utf8_lossy(key);
    let mut quoted = format!("{text:?}");
    if quoted.len() > HOLDER_KEY_MAX {
        let cut = (0..=HOLDER_KEY_MAX)
            .rev()
            .find(|i| quoted.is_char_boundary(*i))
            .unwrap_or(0);
        quoted.truncate(cut);
        quoted.push_str("… (cut)");
    }
    match std::str::from_utf8(key)
        .ok()
        .and_then(|k| chainship_chain::origin::parse_origin(k).ok())
    {
        Some(origin) => format!(
            "is keyed {quoted} (if a chainship follower of that origin wrote it, its transactional.id is {}; the key is the producer's claim)",
            super::transactional_id(&origin)
        ),
        None => format!("is keyed {quoted}, not a chainship origin"),
    }
}

/// Whose transaction holds a `read_committed` read at `at`: the key of the
/// first record there, read uncommitted (a chainship follower keys its
/// records by origin, and its transactional id follows from that), so an
/// operator knows which producer to restart or fence. Best effort: empty
/// when nothing can be read there within a moment.
fn holder(cfg: &KafkaConfig, partition: i32, at: i64) -> String {
    let Ok(peek) = cfg
        .consumer_config()
        .set("group.id", "chainship-holder")
        .set("isolation.level", "read_uncommitted")
        .create_with_context::<_, BaseConsumer<QuietContext>>(QuietContext)
    else {
        return String::new();
    };
    let mut tpl = TopicPartitionList::new();
    if tpl
        .add_partition_offset(&cfg.topic, partition, Offset::Offset(at))
        .and_then(|()| peek.assign(&tpl))
        .is_err()
    {
        drop_in_background(peek);
        return String::new();
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut found = String::new();
    while Instant::now() < deadline {
        match peek.poll(Duration::from_millis(100)) {
            Some(Ok(msg)) => {
                found = format!(
                    "; the first record past the readable part, offset {}, {}",
                    msg.offset(),
                    describe_key(msg.key())
                );
                break;
            }
            Some(Err(_)) => break,
            None => {}
        }
    }
    drop_in_background(peek);
    found
}

/// The consumer's position in `partition`: the offset after the last record
/// or commit marker it passed.
fn position<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    topic: &str,
    partition: i32,
) -> Result<Option<i64>, SinkError> {
    let positions = consumer
        .position()
        .map_err(|e| classify(&format!("reading the position in topic {topic}"), &e))?;
    Ok(positions
        .find_partition(topic, partition)
        .and_then(|e| match e.offset() {
            Offset::Offset(n) => Some(n),
            _ => None,
        }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_holders_key_names_a_transactional_id_only_when_it_is_an_origin() {
        let origin = describe_key(Some(b"kafka/h"));
        assert!(origin.contains("is keyed \"kafka/h\""), "{origin}");
        assert!(origin.contains("transactional.id is chainship-kafka%2Fh"), "{origin}");
        assert!(origin.contains("the producer's claim"), "{origin}");

        let injected = describe_key(Some(b"kafka/h\n2026-12-07T00:00:00Z  INFO forged\x1b[2J"));
        assert!(!injected.contains('\n') && !injected.contains('\x1b'), "{injected}");
        assert!(injected.contains("not a chainship origin"), "{injected}");
        assert!(!injected.contains("transactional.id"), "{injected}");

        assert!(describe_key(None).contains("has no key"));
        assert!(describe_key(Some(b"")).contains("not a chainship origin"));
        assert!(describe_key(Some(&[0xff, 0xfe])).contains("not a chainship origin"));
    }

    #[test]
    fn a_huge_key_is_cut_and_never_repeated_whole() {
        let mut key = vec![b'A'; 900_000];
        key.extend_from_slice(b"\nFAKE LINE\n");
        let said = describe_key(Some(&key));
        assert!(said.len() < 400, "{} bytes", said.len());
        assert!(
            said.contains("… (cut)") && said.contains("not a chainship origin"),
            "{said}"
        );
        // 201 characters: one over an origin's limit, so no transactional id either.
        let said = describe_key(Some("a".repeat(201).as_bytes()));
        assert!(!said.contains("transactional.id"), "{said}");
    }
}
