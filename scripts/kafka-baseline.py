#!/usr/bin/env python3
"""The Kafka baseline of scripts/bench: a plain idempotent confluent_kafka
producer, at its default settings, sending every line of a JSON Lines file
to a topic, then waiting until the broker acknowledged all of them.
Usage: kafka-baseline.py BROKERS TOPIC FILE"""
import sys

from confluent_kafka import Producer

brokers, topic, path = sys.argv[1:4]
producer = Producer({"bootstrap.servers": brokers, "enable.idempotence": True})
failed = []


def acked(err, _msg):
    if err is not None:
        failed.append(err)


with open(path, "rb") as lines:
    for line in lines:
        while True:
            try:
                producer.produce(topic, line.rstrip(b"\n"), on_delivery=acked)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
left = producer.flush(120)
if left or failed:
    sys.exit(f"kafka-baseline: {left} unacknowledged, {len(failed)} failed ({failed[:1]})")
