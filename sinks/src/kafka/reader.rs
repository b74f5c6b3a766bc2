//! Reading a topic back from its beginning, for `verify-export`: by
//! assignment (no consumer group joined, nothing committed), committed
//! transactions only, each partition to its end. The origin's own
//! partition comes first; then every other one, because a SIEM reading the
//! topic ingests them all: a record of the origin there is a stray.

use std::collections::BTreeMap;
use std::time::Duration;

use chainship_chain::record::Record;
use rdkafka::consumer::BaseConsumer;
use rdkafka::message::{BorrowedMessage, Message};

use super::config::{KafkaConfig, QuietContext, classify, drop_in_background};
use super::scan::{ScanLimits, Until, ends, scan, scan_all};
use super::{belongs_to, partition};
use crate::error::SinkError;
use crate::lines::OnRecord;
use crate::{ReadReport, Stray};

/// A transaction a producer left open when it died holds the end back
/// until the broker aborts it (its transaction.timeout.ms, a minute by
/// default): a reader of a copy waits that long before saying why the copy
/// cannot be read.
const COPY_LIMITS: ScanLimits = ScanLimits {
    idle: Duration::from_secs(10),
    open_transaction: Duration::from_secs(90),
};

/// The consumer a reader of a copy reads with (assigned, nothing committed).
fn copy_consumer(cfg: &KafkaConfig) -> Result<BaseConsumer<QuietContext>, SinkError> {
    cfg.reader_config("chainship-verify-export")
        .create_with_context(QuietContext)
        .map_err(|e| classify("creating a consumer", &e))
}

/// Each of `partitions` with the offsets a read of it starts and ends at:
/// its end as the read starts (a live topic never stops growing).
fn read_ranges(
    cfg: &KafkaConfig,
    consumer: &BaseConsumer<QuietContext>,
    partitions: &[i32],
) -> Result<Vec<(i32, i64, i64)>, SinkError> {
    Ok(ends(cfg, consumer, &cfg.topic, partitions, Until::Written)?
        .into_iter()
        .zip(partitions)
        .map(|((low, high), p)| (*p, low, high))
        .collect())
}

/// Calls `each(line, place)` for every record of `origin` in the topic:
/// its own partition first, then all the others together (unless
/// `--kafka-partition` narrowed the reading to one), whose records of
/// `origin` are reported.
pub fn read_records(cfg: &KafkaConfig, origin: &str, each: &mut OnRecord<'_>) -> Result<ReadReport, SinkError> {
    let (own, count) = partition::lookup_with_count(cfg, origin, partition::Lookup::ForReading)?;
    let consumer = copy_consumer(cfg)?;
    let url = cfg.url();
    let mut report = ReadReport::default();
    let others: Vec<i32> = match cfg.partition {
        Some(_) => {
            if count > 1 {
                report.narrowed = Some(format!(
                    "read only the pinned partition {own}: the topic's {} other partition(s), which a SIEM reading the topic also ingests, were not checked",
                    count - 1
                ));
            }
            Vec::new()
        }
        None => (0..count as i32).filter(|p| *p != own).collect(),
    };
    // The origin's own partition in its order; then every other one at once.
    let mut strays: BTreeMap<i32, (u64, i64)> = BTreeMap::new();
    let mut read = |msg: &BorrowedMessage<'_>| {
        let payload = msg.payload().unwrap_or_default();
        // Messages of other origins sharing the partition are not this copy's.
        if !belongs_to(origin, msg.key(), &Record::parse(payload)) {
            return;
        }
        let (partition, offset) = (msg.partition(), msg.offset());
        if partition != own {
            strays.entry(partition).or_insert((0, offset)).0 += 1;
        }
        each(payload, &|| format!("{url} partition {partition} offset {offset}"));
    };
    // Every partition's end as the read starts: what is written meanwhile is
    // not this check's (a live topic never stops growing).
    let mut all = vec![own];
    all.extend(&others);
    let ranges = read_ranges(cfg, &consumer, &all)?;
    scan(cfg, &consumer, ranges[0], COPY_LIMITS, &mut read)?;
    if !others.is_empty() {
        scan_all(cfg, &consumer, &ranges[1..], COPY_LIMITS, &mut read)?;
    }
    for (partition, (records, first_offset)) in strays {
        report.strays.push(Stray {
            place: format!(
                "{url} partition {partition} (from offset {first_offset}), not origin {origin:?}'s partition {own}"
            ),
            records,
        });
    }
    drop_in_background(consumer);
    Ok(report)
}

/// The topic's shape for a shared read: its partitions, and those `shard`
/// takes (all of them without one; only the pinned one with `--kafka-partition`).
pub fn shared_shape(cfg: &KafkaConfig, shard: Option<crate::Shard>) -> Result<crate::SharedRead, SinkError> {
    let (_, count) = partition::lookup_with_count(cfg, "", partition::Lookup::ForReading)?;
    let all: Vec<i32> = match cfg.partition {
        Some(p) => vec![p],
        None => (0..count as i32).collect(),
    };
    Ok(crate::SharedRead {
        partitions: Some(count),
        pinned: cfg.partition,
        read: all
            .into_iter()
            .filter(|p| shard.is_none_or(|s| s.takes_partition(*p)))
            .collect(),
    })
}

/// Calls `each(line, partition, place)` for every record of every origin
/// in the partitions `shape` reads, each partition in its order, to the end
/// every partition had as the read started: one read of a fleet's topic for
/// all its origins.
pub fn read_shared(
    cfg: &KafkaConfig,
    shape: &crate::SharedRead,
    each: &mut crate::OnSharedRecord<'_>,
) -> Result<(), SinkError> {
    if shape.read.is_empty() {
        return Ok(());
    }
    let consumer = copy_consumer(cfg)?;
    let url = cfg.url();
    let ranges = read_ranges(cfg, &consumer, &shape.read)?;
    scan_all(cfg, &consumer, &ranges, COPY_LIMITS, |msg| {
        let (partition, offset) = (msg.partition(), msg.offset());
        each(msg.payload().unwrap_or_default(), Some(partition), &|| {
            format!("{url} partition {partition} offset {offset}")
        });
    })?;
    drop_in_background(consumer);
    Ok(())
}
