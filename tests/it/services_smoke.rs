//! Proof that the harness's real services work with the client libraries
//! the sinks use: a record produced to and consumed from the Kafka-protocol
//! broker with rdkafka, an object put to and got from the S3 server with
//! aws-sdk-s3. These fail loudly when the services are not running.

use crate::common;

use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::Message;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};

#[tokio::test]
async fn kafka_broker_round_trips_a_record() {
    let _services = common::services().await;
    let brokers = common::kafka_addr();
    // The admin API answers: the topic is made.
    let topic = common::kafka_topic("smoke", 1).await;

    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &brokers)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .create()
        .unwrap();
    let delivery = producer
        .send(
            FutureRecord::to(&topic).key("origin").payload("hello chain"),
            Duration::from_secs(10),
        )
        .await
        .expect("delivery acknowledged");
    assert_eq!(delivery.partition, 0);
    let offset = delivery.offset;

    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &brokers)
        .set("group.id", common::unique_bucket("smoke-group"))
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(&topic, 0, Offset::Offset(offset)).unwrap();
    consumer.assign(&tpl).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        assert!(
            Instant::now() < deadline,
            "no record came back from {brokers} within 20 s"
        );
        if let Some(msg) = consumer.poll(Duration::from_millis(200)) {
            let msg = msg.expect("consuming");
            assert_eq!(msg.payload(), Some(&b"hello chain"[..]));
            assert_eq!(msg.key(), Some(&b"origin"[..]));
            break;
        }
    }
}

#[tokio::test]
async fn s3_server_round_trips_an_object() {
    let _services = common::services().await;
    let s3 = common::s3_client();
    let bucket = common::bucket("smoke").await;
    s3.put_object()
        .bucket(&bucket)
        .key("a/b.txt")
        .body(b"hello chain".to_vec().into())
        .send()
        .await
        .unwrap();
    let got = s3.get_object().bucket(&bucket).key("a/b.txt").send().await.unwrap();
    let body = got.body.collect().await.unwrap().into_bytes();
    assert_eq!(&body[..], b"hello chain");
    // A second write of the same key with If-None-Match: * is refused by the server.
    let again = s3
        .put_object()
        .bucket(&bucket)
        .key("a/b.txt")
        .if_none_match("*")
        .body(b"other".to_vec().into())
        .send()
        .await;
    assert!(again.is_err(), "the server must refuse to overwrite");
}
