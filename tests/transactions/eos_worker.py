"""A consume-transform-produce loop, exactly once, as the clients' docs write it.

Run as a process (`python -m tests.transactions.eos_worker ...`) so a test can SIGKILL
it anywhere — between records, inside a transaction, in the middle of a commit — and
start it again. Each transaction reads up to `--batch` records, writes each as
"<value>|out" to the same partition of the output topic, and commits the consumer's
positions with `send_offsets_to_transaction`. A short random pause inside every
transaction widens the windows a kill can land in.

The consumer is a static member (`group.instance.id`): a restarted worker takes its
place at once instead of waiting out the dead one's session. Any error ends the
process with status 3; the test starts it again, as a supervisor would.
`--client kafka-python` runs the same loop with kafka-python's KafkaProducer and
KafkaConsumer.
"""

from __future__ import annotations

import argparse
import random
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition


def run(args: argparse.Namespace) -> int:
    producer = Producer({
        "bootstrap.servers": args.bootstrap,
        "transactional.id": args.transactional_id,
        "transaction.timeout.ms": 60000,
        "linger.ms": 2,
    })
    producer.init_transactions(30)  # fences the killed predecessor, aborts its transaction
    consumer = Consumer({
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "group.instance.id": "eos-worker",
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 6000,
        "fetch.wait.max.ms": 50,
    })
    consumer.subscribe([args.input])
    rng = random.Random()
    print("worker ready", flush=True)
    transactions = 0
    while True:
        msgs = consumer.consume(args.batch, 0.5)
        msgs = [m for m in msgs if m.error() is None or
                m.error().code() != KafkaError._PARTITION_EOF]
        if not msgs:
            continue
        for m in msgs:
            if m.error() is not None:
                raise KafkaException(m.error())
        producer.begin_transaction()
        for m in msgs:
            producer.produce(args.output, key=m.key(), value=m.value() + b"|out",
                             partition=m.partition())
        time.sleep(rng.uniform(0, args.pause))
        positions: dict[tuple[str, int], int] = {}
        for m in msgs:
            positions[(m.topic(), m.partition())] = m.offset() + 1
        producer.send_offsets_to_transaction(
            [TopicPartition(t, p, o) for (t, p), o in positions.items()],
            consumer.consumer_group_metadata(), 30)
        transactions += 1
        if args.abort_every and transactions % args.abort_every == 0:
            # give the batch up: its records and offsets vanish; read it again
            assert producer.flush(30) == 0  # so the aborted records do reach the log
            producer.abort_transaction(30)
            first: dict[tuple[str, int], int] = {}
            for m in msgs:
                first.setdefault((m.topic(), m.partition()), m.offset())
            for (t, p), o in first.items():
                consumer.seek(TopicPartition(t, p, o))
            print(f"aborted transaction {transactions}", flush=True)
            continue
        producer.commit_transaction(30)


def run_kafka_python(args: argparse.Namespace) -> int:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTopicPartition
    from kafka.structs import OffsetAndMetadata

    producer = KafkaProducer(bootstrap_servers=args.bootstrap,
                             transactional_id=args.transactional_id,
                             transaction_timeout_ms=60000, linger_ms=2)
    producer.init_transactions()
    consumer = KafkaConsumer(args.input, bootstrap_servers=args.bootstrap, group_id=args.group,
                             group_instance_id="eos-worker", isolation_level="read_committed",
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             session_timeout_ms=6000, fetch_max_wait_ms=50)
    rng = random.Random()
    print("worker ready", flush=True)
    while True:
        polled = consumer.poll(timeout_ms=500, max_records=args.batch)
        records = [r for rs in polled.values() for r in rs]
        if not records:
            continue
        producer.begin_transaction()
        for r in records:
            producer.send(args.output, key=r.key, value=r.value + b"|out", partition=r.partition)
        time.sleep(rng.uniform(0, args.pause))
        offsets = {KTopicPartition(r.topic, r.partition): OffsetAndMetadata(r.offset + 1, "", -1)
                   for r in records}
        producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
        producer.commit_transaction()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--transactional-id", required=True)
    parser.add_argument("--batch", type=int, default=20)
    parser.add_argument("--pause", type=float, default=0.02)
    parser.add_argument("--abort-every", type=int, default=0,
                        help="abort every Nth transaction and read its batch again")
    parser.add_argument("--client", choices=("confluent-kafka", "kafka-python"),
                        default="confluent-kafka")
    args = parser.parse_args()
    try:
        return run(args) if args.client == "confluent-kafka" else run_kafka_python(args)
    except Exception as e:
        print(f"worker failed: {e!r}", file=sys.stderr, flush=True)
        return 3


if __name__ == "__main__":
    sys.exit(main())
