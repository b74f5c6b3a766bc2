//! Which partition an origin's records go to: a stable hash of the origin,
//! or the pinned one, checked against the topic's metadata.

use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use sha2::{Digest, Sha256};

use chainship_chain::Setting;

use super::config::{KafkaConfig, QuietContext, classify, drop_in_background};
use crate::error::SinkError;

/// The partition an origin's events go to: a stable hash of the origin.
pub fn partition_for(origin: &str, partitions: usize) -> i32 {
    let digest = Sha256::digest(origin.as_bytes());
    (u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]) % partitions.max(1) as u32) as i32
}

/// Whether looking the partition up may create the topic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Lookup {
    /// As a producer's metadata request would: a broker with auto-create on
    /// makes the topic, one without answers "unknown topic".
    ForWriting,
    /// A reader (`verify-export`) never creates what it was asked to check.
    ForReading,
}

/// Looks the partition up in the topic's metadata, by a plain client: never
/// a transactional producer, whose creation would fence a running follower
/// of this origin.
pub(super) fn lookup(cfg: &KafkaConfig, origin: &str, purpose: Lookup) -> Result<i32, SinkError> {
    lookup_with_count(cfg, origin, purpose).map(|(partition, _)| partition)
}

/// [`lookup`], with how many partitions the topic has.
pub(super) fn lookup_with_count(cfg: &KafkaConfig, origin: &str, purpose: Lookup) -> Result<(i32, usize), SinkError> {
    let create = purpose == Lookup::ForWriting;
    let client: BaseConsumer<QuietContext> = cfg
        .consumer_config()
        .set("group.id", "chainship-metadata")
        .set("allow.auto.create.topics", if create { "true" } else { "false" })
        .create_with_context(QuietContext)
        .map_err(|e| classify("creating a metadata client", &e))?;
    let found = lookup_with(&client, cfg, origin, create);
    drop_in_background(client);
    found
}

fn lookup_with(
    client: &BaseConsumer<QuietContext>,
    cfg: &KafkaConfig,
    origin: &str,
    create: bool,
) -> Result<(i32, usize), SinkError> {
    let topic = &cfg.topic;
    let fetch = || {
        client
            .fetch_metadata(Some(topic), Duration::from_secs(10))
            .map_err(|e| match e.rdkafka_error_code() {
                Some(
                    RDKafkaErrorCode::BrokerTransportFailure
                    | RDKafkaErrorCode::AllBrokersDown
                    | RDKafkaErrorCode::OperationTimedOut,
                ) => SinkError::transient(format!(
                    "Kafka sink: broker unreachable: no answer from {} within 10 s ({e})",
                    cfg.brokers
                )),
                _ => classify(&format!("reading metadata of topic {topic}"), &e),
            })
    };
    let has_partitions = |m: &rdkafka::metadata::Metadata| {
        m.topics()
            .iter()
            .any(|t| t.name() == topic && t.error().is_none() && !t.partitions().is_empty())
    };
    let mut metadata = fetch()?;
    // Apache Kafka creates an auto-created topic after the metadata request
    // that asked for it, answering that one UNKNOWN_TOPIC_OR_PARTITION (or
    // LEADER_NOT_AVAILABLE): a writer asks again for a few seconds before
    // calling the topic missing. (tansu answers with the topic at once.)
    for _ in 0..20 {
        if !create || has_partitions(&metadata) {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
        metadata = fetch()?;
    }
    let unknown = |code: Option<RDKafkaErrorCode>| {
        let code = code.unwrap_or(RDKafkaErrorCode::UnknownTopic);
        let missing = matches!(
            code,
            RDKafkaErrorCode::UnknownTopic | RDKafkaErrorCode::UnknownTopicOrPartition
        );
        if missing && !create {
            // A reader checks what is there: the topic in its URL is wrong, or gone.
            return SinkError::permanent(format!("Kafka: topic {topic} does not exist on {}", cfg.brokers));
        }
        classify(&format!("topic {topic}"), &KafkaError::MetadataFetch(code))
    };
    let count = match metadata.topics().iter().find(|t| t.name() == topic) {
        Some(t) if t.error().is_none() && !t.partitions().is_empty() => t.partitions().len(),
        Some(t) => return Err(unknown(t.error().map(RDKafkaErrorCode::from))),
        None => return Err(unknown(None)),
    };
    match cfg.partition {
        // Retrying cannot make a partition exist: say so once.
        Some(p) if p < 0 || p as usize >= count => Err(SinkError::permanent(format!(
            "Kafka sink: topic {topic} has {count} partition(s); partition {p} does not exist"
        ))
        .with_setting(Setting::KafkaPartition)),
        Some(p) => Ok((p, count)),
        None => Ok((partition_for(origin, count), count)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_spread_stably() {
        assert_eq!(partition_for("x", 1), 0);
        assert_eq!(partition_for("prod/agentrt", 12), partition_for("prod/agentrt", 12));
        assert!((0..12).contains(&partition_for("prod/agentrt", 12)));
    }
}
