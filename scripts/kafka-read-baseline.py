#!/usr/bin/env python3
"""The baseline of scripts/bench-kafka-read: a plain confluent_kafka consumer
reading every partition of a topic, by assignment, with read_committed, from
its start to the high watermark asked as it starts (as verify-export reads),
touching each record's value. Prints how many records it read.
Usage: kafka-read-baseline.py BROKERS TOPIC"""
import os
import sys

from confluent_kafka import Consumer, TopicPartition

brokers, topic = sys.argv[1:3]
probe = Consumer({"bootstrap.servers": brokers, "group.id": "baseline-probe",
                  "isolation.level": "read_uncommitted"})
partitions = probe.list_topics(topic, timeout=10).topics[topic].partitions
ends = {}
for p in partitions:
    low, high = probe.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
    if high > low:
        ends[p] = (low, high)
consumer = Consumer({"bootstrap.servers": brokers, "group.id": "baseline-read",
                     "isolation.level": "read_committed", "enable.auto.commit": False,
                     "enable.partition.eof": True, "fetch.wait.max.ms": 10})
consumer.assign([TopicPartition(topic, p, low) for p, (low, _) in ends.items()])
left, records, size = set(ends), 0, 0
while left:
    for msg in consumer.consume(10000, timeout=0.02):
        if msg.error() is None:
            records += 1
            size += len(msg.value())
    for tp in consumer.position([TopicPartition(topic, p) for p in list(left)]):
        if tp.offset >= ends[tp.partition][1]:
            left.discard(tp.partition)
print(records, flush=True)
# No close(): with a group.id it asks the group coordinator (tansu answers late),
# and verify-export joins no group either.
os._exit(0)
