"""Transactions per second with transaction version 1's protocol and version 2's
(KIP-890 part 2), one broker on loopback, one producer on one connection:
`python bench/txn_versions_bench.py [--counts 1,1000,10000]`.

Version 1 (librdkafka's): AddPartitionsToTxn v3, Produce v11, EndTxn v4 — three round
trips a transaction. Version 2 (a Kafka 4 Java producer's): Produce v12 (the broker
adds the partition), EndTxn v5 (the epoch bumps) — two. Each transaction writes one
10-record batch to one partition with acks=all. Prints transactions/s and the mean
per transaction for each count, and the ratio.
"""

from __future__ import annotations

import argparse
import datetime
import os
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `odradek` importable from src/
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.brokers import odradek_broker, stop_all
from odradek.protocol.client_framing import ClientFraming, FrameSplitter, decode_response
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import request_class
from odradek.protocol.records import NewRecord, encode_batch


class Wire:
    """One connection, one request at a time."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.sock = socket.create_connection(address, timeout=30)
        self.framing = ClientFraming("txn-bench")
        self.splitter = FrameSplitter()

    def call(self, api_key: int, version: int, **fields: Any) -> Any:
        cid, data = self.framing.request(api_key, version,
                                         request_class(api_key, version)(**fields))
        self.sock.sendall(data)
        while (frame := self.splitter.next_frame()) is None:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise OSError("closed by the broker")
            self.splitter.feed(chunk)
        return decode_response(api_key, version, frame, cid)

    def schema(self, api_key: int, version: int) -> Any:
        return sys.modules[request_class(api_key, version).__module__]


def _retry(call: Any) -> Any:
    for _ in range(400):
        r = call()
        if r.error_code not in (ErrorCode.coordinator_load_in_progress,
                                ErrorCode.not_coordinator,
                                ErrorCode.concurrent_transactions):
            return r
        time.sleep(0.05)
    raise RuntimeError("the coordinator did not answer")


def _produce(w: Wire, version: int, topic: str, tid: str, pid: int, epoch: int,
             seq: int) -> None:
    s = w.schema(0, version)
    batch = encode_batch([NewRecord(value=b"v" * 100) for _ in range(10)], producer_id=pid,
                         producer_epoch=epoch, base_sequence=seq, transactional=True)
    r = w.call(0, version, transactional_id=tid, acks=-1,
               timeout=datetime.timedelta(seconds=10),
               topic_data=(s.TopicProduceData(name=topic, partition_data=(
                   s.PartitionProduceData(index=0, records=batch),)),))
    code = r.responses[0].partition_responses[0].error_code
    assert code == ErrorCode.none, ErrorCode(code)


def run(w: Wire, topic: str, transaction_version: int, count: int) -> float:
    """Seconds for `count` transactions of one new transactional id."""
    tid = f"bench-{transaction_version}-{count}-{time.monotonic_ns()}"
    _retry(lambda: w.call(10, 3, key=tid, key_type=1))
    r = _retry(lambda: w.call(22, 5, transactional_id=tid,
                              transaction_timeout=datetime.timedelta(seconds=60),
                              producer_id=-1, producer_epoch=-1))
    pid, epoch, seq = r.producer_id, r.producer_epoch, 0
    s3 = w.schema(24, 3)
    start = time.perf_counter()
    for _ in range(count):
        if transaction_version == 1:
            r = w.call(24, 3, v3_and_below_transactional_id=tid,
                       v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
                       v3_and_below_topics=(s3.AddPartitionsToTxnTopic(name=topic,
                                                                       partitions=(0,)),))
            _produce(w, 11, topic, tid, pid, epoch, seq)
            seq += 10
            r = w.call(26, 4, transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                       committed=True)
            assert r.error_code == ErrorCode.none, ErrorCode(r.error_code)
        else:
            _produce(w, 12, topic, tid, pid, epoch, 0)
            r = w.call(26, 5, transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                       committed=True)
            assert r.error_code == ErrorCode.none, ErrorCode(r.error_code)
            pid, epoch = r.producer_id, r.producer_epoch
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", default="1,1000,10000")
    args = parser.parse_args()
    counts = [int(c) for c in args.counts.split(",")]
    broker = odradek_broker(Path(tempfile.mkdtemp(prefix="txn-bench-")))
    broker.start()
    try:
        w = Wire(("127.0.0.1", broker.port))
        topic = "txn-bench"
        s = w.schema(19, 4)
        w.call(19, 4, topics=(s.CreatableTopic(name=topic, num_partitions=1,
                                               replication_factor=1, assignments=(),
                                               configs=()),),
               timeout=datetime.timedelta(seconds=30), validate_only=False)
        run(w, topic, 1, 5)  # warm up: the coordinator's partition is loaded
        run(w, topic, 2, 5)
        print(f"load average {os.getloadavg()[0]:.1f}")
        print(f"{'transactions':>12} {'TV1 txn/s':>10} {'TV2 txn/s':>10} "
              f"{'TV1 ms':>7} {'TV2 ms':>7} {'TV2/TV1':>8}")
        for count in counts:
            # alternate, so a change of the machine's load hits both alike
            tv1 = run(w, topic, 1, count)
            tv2 = run(w, topic, 2, count)
            print(f"{count:>12} {count / tv1:>10.0f} {count / tv2:>10.0f} "
                  f"{tv1 / count * 1000:>7.2f} {tv2 / count * 1000:>7.2f} "
                  f"{tv1 / tv2:>8.2f}")
    finally:
        stop_all()


if __name__ == "__main__":
    main()
