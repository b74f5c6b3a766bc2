//! Reading a topic back from its beginning, for `verify-export`: by
//! assignment (no consumer group joined, nothing committed), committed
//! transactions only, each partition to its end. The origin's own
//! partition comes first; then every other one, because a SIEM reading the
//! topic ingests them all: a record of the origin there is a stray.

use std::time::Duration;

use chainship_chain::record::Record;
use rdkafka::Offset;
use rdkafka::consumer::BaseConsumer;
use rdkafka::message::Message;

use super::config::{KafkaConfig, QuietContext, classify};
use super::scan::{ScanLimits, scan};
use super::{belongs_to, partition};
use crate::error::SinkError;
use crate::lines::OnRecord;
use crate::{ReadReport, Stray};

/// Calls `each(line, place)` for every record of `origin` in the topic:
/// its own partition first, then the others (unless `--kafka-partition`
/// narrowed the reading to one), whose records of `origin` are reported.
pub fn read_records(cfg: &KafkaConfig, origin: &str, each: &mut OnRecord<'_>) -> Result<ReadReport, SinkError> {
    let (own, count) = partition::lookup_with_count(cfg, origin, partition::Lookup::ForReading)?;
    let consumer: BaseConsumer<QuietContext> = cfg
        .reader_config("chainship-verify-export")
        .create_with_context(QuietContext)
        .map_err(|e| classify("creating a consumer", &e))?;
    let url = cfg.url();
    let limits = ScanLimits {
        idle: Duration::from_secs(10),
        total: None,
    };
    let mut report = ReadReport::default();
    let partitions: Vec<i32> = match cfg.partition {
        Some(_) => {
            if count > 1 {
                report.narrowed = Some(format!(
                    "read partition {own} only (--kafka-partition): the topic's {} other partition(s), which a SIEM reading the topic also ingests, were not checked",
                    count - 1
                ));
            }
            vec![own]
        }
        None => std::iter::once(own)
            .chain((0..count as i32).filter(|p| *p != own))
            .collect(),
    };
    for partition in partitions {
        let mut strays = 0u64;
        let mut first_offset = None;
        scan(&consumer, &cfg.topic, partition, Offset::Beginning, limits, |msg| {
            let payload = msg.payload().unwrap_or_default();
            // Messages of other origins sharing the partition are not this copy's.
            if !belongs_to(origin, msg.key(), &Record::parse(payload)) {
                return;
            }
            let offset = msg.offset();
            if partition != own {
                strays += 1;
                first_offset.get_or_insert(offset);
            }
            each(payload, &|| format!("{url} partition {partition} offset {offset}"));
        })?;
        if strays > 0 {
            report.strays.push(Stray {
                place: format!(
                    "{url} partition {partition} (from offset {}), not origin {origin:?}'s partition {own}",
                    first_offset.unwrap_or_default()
                ),
                records: strays,
            });
        }
    }
    Ok(report)
}
