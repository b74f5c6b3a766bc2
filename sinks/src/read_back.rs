//! Reading an exported copy back from any sink's URL, record by record, in
//! the order the copy holds them: what `chainship verify-export` checks.
//!
//! - `file:PATH`: the JSON Lines file, streamed.
//! - `s3://BUCKET/PREFIX`: every object of the origin, in seq-range order,
//!   one object in memory at a time, decompressed (gzip or zstd, by its
//!   name's suffix) line by line.
//! - `kafka://HOST:PORT/TOPIC`: the origin's partition from the beginning
//!   until nothing more arrives, by assignment (no consumer group joined,
//!   nothing committed); messages keyed with another origin are skipped.

use std::io::{BufRead, BufReader};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

use crate::error::SinkError;
use crate::kafka::partition_for;
use crate::s3::{batch_object_lines, fetch_object, list_origin, origin_prefix, refuse_legacy_layout, stray_message};
use crate::url::{SinkOptions, SinkUrl};

/// Called with each record line and a function naming its place in the copy
/// (file and line, object, or partition and offset) for messages.
pub type OnRecord<'a> = dyn FnMut(&[u8], &dyn Fn() -> String) + 'a;

/// Calls `each(line, place)` for every record line of `origin` in the copy.
pub async fn read_records(
    url: &SinkUrl,
    origin: &str,
    options: &SinkOptions,
    each: &mut OnRecord<'_>,
) -> Result<(), SinkError> {
    match url {
        SinkUrl::File(path) => {
            let file =
                std::fs::File::open(path).map_err(|e| SinkError::permanent(format!("{}: {e}", path.display())))?;
            read_lines(
                BufReader::with_capacity(1 << 20, file),
                &path.display().to_string(),
                each,
            )
        }
        SinkUrl::Stdout => Err(SinkError::permanent(
            "stdout: cannot be read back; verify the file or topic it was piped to",
        )),
        SinkUrl::S3 { bucket, prefix } => read_s3(bucket, prefix, origin, options, each).await,
        SinkUrl::Kafka { brokers, topic } => read_kafka(brokers, topic, origin, options, each),
    }
}

pub fn read_lines(mut reader: impl BufRead, name: &str, each: &mut OnRecord<'_>) -> Result<(), SinkError> {
    let mut line = Vec::new();
    let mut number = 0u64;
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| SinkError::permanent(format!("{name}: {e}")))?;
        if n == 0 {
            return Ok(());
        }
        number += 1;
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        if text.is_empty() {
            continue;
        }
        each(text, &|| format!("{name} line {number}"));
    }
}

async fn read_s3(
    bucket: &str,
    prefix: &str,
    origin: &str,
    options: &SinkOptions,
    each: &mut OnRecord<'_>,
) -> Result<(), SinkError> {
    let client = options.s3.client().await;
    let fail = |f: crate::s3_client::S3Failure| SinkError::permanent(format!("s3://{bucket}/{prefix}: {}", f.message));
    let listing = list_origin(&client, bucket, &origin_prefix(prefix, origin))
        .await
        .map_err(fail)?;
    // What is wrong with an object (not one, undecodable, not the range its name
    // says) is a finding about the copy: handed on as a line that is no record,
    // at a place that says what is wrong.
    let mut finding = |message: String| each(NOT_A_RECORD, &|| message.clone());
    for key in &listing.strays {
        finding(stray_message(bucket, key));
    }
    let mut objects = listing.objects;
    if objects.is_empty() && listing.strays.is_empty() {
        refuse_legacy_layout(&client, bucket, prefix, origin).await?;
    }
    // By seq range, not by key: date partitions follow `at`, which is for people, not ordering.
    objects.sort_by_key(|(range, _)| (range.first, range.last));
    for (range, key) in objects {
        let name = format!("s3://{bucket}/{key}");
        let body = fetch_object(&client, bucket, &key).await.map_err(fail)?;
        if let Some(m) = batch_object_lines(&body, &range, &name, each) {
            each(NOT_A_RECORD, &|| m.clone());
        }
    }
    Ok(())
}

/// Handed to the record callback for an object that is wrong as a whole.
const NOT_A_RECORD: &[u8] = b"-";

fn read_kafka(
    brokers: &str,
    topic: &str,
    origin: &str,
    options: &SinkOptions,
    each: &mut OnRecord<'_>,
) -> Result<(), SinkError> {
    let fail = |what: &str, e: rdkafka::error::KafkaError| {
        SinkError::permanent(format!("kafka://{brokers}/{topic}: {what}: {e}"))
    };
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", brokers);
    for (k, v) in &options.kafka_options {
        config.set(k, v);
    }
    config
        .set("group.id", "chainship-verify-export")
        .set("enable.auto.commit", "false");
    let consumer: BaseConsumer = config.create().map_err(|e| fail("creating a consumer", e))?;
    let partition = match options.kafka_partition {
        Some(p) => p,
        None => {
            let metadata = consumer
                .fetch_metadata(Some(topic), Duration::from_secs(10))
                .map_err(|e| fail("metadata", e))?;
            let count = metadata
                .topics()
                .iter()
                .find(|t| t.name() == topic)
                .map_or(0, |t| t.partitions().len());
            if count == 0 {
                return Err(SinkError::permanent(format!(
                    "kafka://{brokers}/{topic}: no such topic"
                )));
            }
            partition_for(origin, count)
        }
    };
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, partition, Offset::Beginning)
        .map_err(|e| fail("assign", e))?;
    consumer.assign(&tpl).map_err(|e| fail("assign", e))?;
    // Read on until the partition stays quiet: brokers differ in what their
    // high watermark counts, so it is not taken as the end.
    let mut last = Instant::now();
    while last.elapsed() < Duration::from_secs(3) {
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(msg)) => {
                last = Instant::now();
                let payload = msg.payload().unwrap_or_default();
                let parsed = chainship_chain::record::Record::parse(payload);
                if !crate::kafka::belongs_to(origin, msg.key(), &parsed) {
                    continue;
                }
                let offset = msg.offset();
                each(payload, &|| {
                    format!("kafka://{brokers}/{topic} partition {partition} offset {offset}")
                });
            }
            Some(Err(e)) => return Err(fail("reading", e)),
            None => {}
        }
    }
    Ok(())
}
