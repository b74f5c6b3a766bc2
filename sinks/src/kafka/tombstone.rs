//! A tombstone in a Kafka copy (see [`crate::tombstone`]): a record cannot
//! be changed in a topic, so the tombstone is appended to the origin's
//! partition, keyed with the origin, with the same headers the follower
//! writes and `redacted` beside them. A compacted topic keeps only the
//! newest record of a key, which would drop the origin's whole history:
//! chainship's topics are never compacted, so the original stays until the
//! topic's retention removes it (a consumer takes the tombstone's
//! `redacted` member as "delete the payload you hold for this seq").

use std::time::Duration;

use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::util::Timeout;

use super::config::{KafkaConfig, classify};
use super::partition;
use crate::SinkError;
use crate::tombstone::Placed;

pub async fn append(
    cfg: &KafkaConfig,
    origin: &str,
    seq: u64,
    hash: &str,
    tombstone: &[u8],
) -> Result<Placed, SinkError> {
    let partition = partition::lookup(cfg, origin, partition::Lookup::ForReading)?;
    // A plain producer: a transactional one would fence the origin's follower.
    let producer: FutureProducer = cfg
        .producer_config(None)
        .create()
        .map_err(|e| classify("creating the producer", &e))?;
    let seq_text = seq.to_string();
    let headers = OwnedHeaders::new_with_capacity(4)
        .insert(Header {
            key: "seq",
            value: Some(seq_text.as_str()),
        })
        .insert(Header {
            key: "hash",
            value: Some(hash),
        })
        .insert(Header {
            key: "origin",
            value: Some(origin),
        })
        .insert(Header {
            key: "redacted",
            value: Some("true"),
        });
    let record = FutureRecord::to(&cfg.topic)
        .partition(partition)
        .key(origin.as_bytes())
        .payload(tombstone)
        .headers(headers);
    let delivered = producer
        .send(record, Timeout::After(Duration::from_secs(30)))
        .await
        .map_err(|(e, _)| classify("appending the tombstone", &e))?;
    Ok(Placed::Kafka {
        partition: delivered.partition,
        offset: delivered.offset,
    })
}
