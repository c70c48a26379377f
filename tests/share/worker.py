"""A share group worker in a child process, for the tests that kill one.

    python -m tests.share.worker BOOTSTRAP GROUP TOPIC MODE

prints one JSON line per record it is given ({"offset", "count", "value"}). MODE
`accept` acknowledges each record (explicit mode) and prints the commit's outcome
({"accepted": [offsets]} or {"failed": [offsets]}); `hold` never acknowledges and
stops polling once it holds records (the victim of a SIGKILL). SIGTERM ends it
cleanly; SIGINT is ignored as a background job's would be.
"""

from __future__ import annotations

import json
import signal
import sys
import threading

from confluent_kafka import AcknowledgeType, ShareConsumer


def main() -> None:
    bootstrap, group, topic, mode = sys.argv[1:5]
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    print(json.dumps({"started": True}), flush=True)
    try:
        while not stopping.is_set():
            messages = [m for m in consumer.poll(0.5) if m.error() is None]
            for m in messages:
                print(json.dumps({"offset": m.offset(), "count": m.delivery_count(),
                                  "value": (m.value() or b"").decode()}), flush=True)
            if not messages:
                continue
            if mode == "hold":
                stopping.wait()  # holds its records until killed
                break
            for m in messages:
                consumer.acknowledge(m, AcknowledgeType.ACCEPT)
            results = consumer.commit_sync(30)
            offsets = [m.offset() for m in messages]
            ok = bool(results) and all(e is None for e in results.values())
            print(json.dumps({"accepted" if ok else "failed": offsets}), flush=True)
    finally:
        consumer.close()


if __name__ == "__main__":
    main()
