"""A share group worker in a child process, for the tests that kill one.

    python -m tests.share.worker BOOTSTRAP GROUP TOPIC MODE

prints one JSON line per record it is given ({"offset", "count", "value"}). MODE
`accept` acknowledges each record (explicit mode) and prints the commit's outcome
({"accepted": [offsets]} or {"failed": [offsets]}); `hold` never acknowledges and
stops polling once it holds records (the victim of a SIGKILL); `partial:N:TOTAL`
accepts the offsets below N, releases N, holds the others, commits, and prints
{"holding": [offsets]} once it has seen TOTAL records, then stops polling (the broker
is killed under it). SIGTERM ends it cleanly; SIGINT is ignored as a background
job's would be.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from typing import Any

from confluent_kafka import AcknowledgeType, ShareConsumer


def emit(line: dict[str, Any]) -> None:
    """One write per line: print() writes the text and its newline separately, and
    librdkafka's log (stderr, into the same file) can land between the two."""
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


def main() -> None:
    bootstrap, group, topic, mode = sys.argv[1:5]
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    seen: list[int] = []
    emit({"started": True})
    try:
        while not stopping.is_set():
            messages = [m for m in consumer.poll(0.5) if m.error() is None]
            for m in messages:
                emit({"offset": m.offset(), "count": m.delivery_count(),
                      "value": (m.value() or b"").decode()})
            if not messages:
                continue
            if mode == "hold":
                stopping.wait()  # holds its records until killed
                break
            if mode.startswith("partial:"):
                if partial(consumer, mode, messages, seen):
                    stopping.wait()
                    break
                continue
            for m in messages:
                consumer.acknowledge(m, AcknowledgeType.ACCEPT)
            results = consumer.commit_sync(30)
            offsets = [m.offset() for m in messages]
            ok = bool(results) and all(e is None for e in results.values())
            emit({"accepted" if ok else "failed": offsets})
    finally:
        consumer.close()


def partial(consumer: ShareConsumer, mode: str, messages: list[Any], seen: list[int]
            ) -> bool:
    """Accept below N, release N, hold the rest; True once TOTAL records were seen."""
    _, first_kept, total = mode.split(":")
    keep = int(first_kept)
    for m in messages:
        seen.append(m.offset())
        if m.offset() < keep:
            consumer.acknowledge(m, AcknowledgeType.ACCEPT)
        elif m.offset() == keep:
            consumer.acknowledge(m, AcknowledgeType.RELEASE)
    results = consumer.commit_sync(30)
    ok = all(e is None for e in (results or {}).values())
    emit({"committed": ok})
    if len(seen) < int(total):
        return False
    emit({"holding": sorted(o for o in seen if o > keep)})
    return True


if __name__ == "__main__":
    main()
