//! Reading the origin's partition back from its beginning, for
//! `verify-export`: by assignment (no consumer group joined, nothing
//! committed), committed transactions only, to the partition's end.

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

/// Calls `each(line, place)` for every record of `origin` in the partition.
pub fn read_records(cfg: &KafkaConfig, origin: &str, each: &mut OnRecord<'_>) -> Result<(), SinkError> {
    let partition = partition::lookup(cfg, origin, partition::Lookup::ForReading)?;
    let consumer: BaseConsumer<QuietContext> = cfg
        .reader_config("chainship-verify-export")
        .create_with_context(QuietContext)
        .map_err(|e| classify("creating a consumer", &e))?;
    let url = cfg.url();
    let limits = ScanLimits {
        idle: Duration::from_secs(10),
        total: None,
    };
    scan(&consumer, &cfg.topic, partition, Offset::Beginning, limits, |msg| {
        let payload = msg.payload().unwrap_or_default();
        // Messages of other origins sharing the partition are not this copy's.
        if !belongs_to(origin, msg.key(), &Record::parse(payload)) {
            return;
        }
        let offset = msg.offset();
        each(payload, &|| format!("{url} partition {partition} offset {offset}"));
    })
}
