//! Following a topic as it grows (`chainship monitor`): every partition
//! (or a shard's) by assignment, from the offsets a previous run saved or
//! from the beginning, committed transactions only, no group joined. The
//! offsets read are the caller's to save.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};

use super::config::{KafkaConfig, QuietContext, classify, drop_in_background};
use crate::error::SinkError;

pub struct KafkaTail {
    consumer: Option<BaseConsumer<QuietContext>>,
    url: String,
    topic: String,
    /// Partition → the next offset to read.
    next: BTreeMap<i32, i64>,
    /// The partitions followed, and those read to their end at least once.
    partitions: Vec<i32>,
    reached_end: std::collections::BTreeSet<i32>,
}

impl KafkaTail {
    /// Follows `partitions` of the topic from `saved` (partition → next
    /// offset), each partition not in it from its beginning.
    pub fn open(cfg: &KafkaConfig, partitions: &[i32], saved: &BTreeMap<i32, i64>) -> Result<Self, SinkError> {
        let consumer: BaseConsumer<QuietContext> = cfg
            .reader_config("chainship-monitor")
            .create_with_context(QuietContext)
            .map_err(|e| classify("creating a consumer", &e))?;
        let mut list = TopicPartitionList::new();
        let mut next = BTreeMap::new();
        for &p in partitions {
            let offset = saved.get(&p).copied();
            list.add_partition_offset(&cfg.topic, p, offset.map_or(Offset::Beginning, Offset::Offset))
                .map_err(|e| classify("assigning a partition", &e))?;
            if let Some(o) = offset {
                next.insert(p, o);
            }
        }
        consumer
            .assign(&list)
            .map_err(|e| classify("assigning the partitions", &e))?;
        Ok(KafkaTail {
            consumer: Some(consumer),
            url: cfg.url(),
            topic: cfg.topic.clone(),
            next,
            partitions: partitions.to_vec(),
            reached_end: Default::default(),
        })
    }

    /// Hands on what arrived: waits up to `wait` for the first message,
    /// then takes what is at hand, at most `limit` messages.
    pub fn poll(
        &mut self,
        wait: Duration,
        limit: usize,
        each: &mut crate::OnSharedRecord<'_>,
    ) -> Result<usize, SinkError> {
        let consumer = self.consumer.as_ref().expect("open until dropped");
        let mut taken = 0;
        let mut timeout = wait;
        while taken < limit {
            let Some(message) = consumer.poll(timeout) else { break };
            timeout = Duration::ZERO;
            match message {
                Ok(m) => {
                    let (partition, offset) = (m.partition(), m.offset());
                    let url = &self.url;
                    each(m.payload().unwrap_or_default(), Some(partition), &|| {
                        format!("{url} partition {partition} offset {offset}")
                    });
                    self.next.insert(partition, offset + 1);
                    taken += 1;
                }
                Err(KafkaError::PartitionEOF(p)) => {
                    self.reached_end.insert(p);
                }
                // Records the broker dropped (retention) before they were read.
                Err(KafkaError::MessageConsumption(RDKafkaErrorCode::OffsetOutOfRange)) => {
                    return Err(SinkError::permanent(format!(
                        "{}: the offsets to go on from are no longer in the topic (its retention dropped them): records were never checked",
                        self.url
                    )));
                }
                Err(e) => return Err(classify("reading the topic", &e)),
            }
        }
        Ok(taken)
    }

    /// Whether the brokers answer (a paused broker makes `poll` merely
    /// find nothing).
    pub fn reachable(&self) -> Result<(), SinkError> {
        let consumer = self.consumer.as_ref().expect("open until dropped");
        consumer
            .fetch_metadata(Some(&self.topic), Duration::from_secs(5))
            .map(|_| ())
            .map_err(|e| classify("asking the brokers for the topic", &e))
    }

    /// Whether every partition followed was read to its end at least once.
    pub fn caught_up(&self) -> bool {
        self.partitions.iter().all(|p| self.reached_end.contains(p))
    }

    /// Partition → the next offset to read.
    pub fn positions(&self) -> &BTreeMap<i32, i64> {
        &self.next
    }
}

impl Drop for KafkaTail {
    fn drop(&mut self) {
        if let Some(c) = self.consumer.take() {
            drop_in_background(c);
        }
    }
}
