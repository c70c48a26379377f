"""What share groups did, as plain counters (KIP-932's and KIP-1103's broker metrics).

The share-partitions and the manager bump them on the event loop (an int add, never a
lock); the metrics endpoint (server/share_metrics.py) reads them at a scrape from its
own thread, one dict copy each, as it reads the memory pool. No prometheus here: the
coordinator layer knows nothing of how it is exported.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Kafka's AcknowledgeType names, the `ackType` tag of RecordAcknowledgementsPerSec
ACK_NAMES = {1: "Accept", 2: "Release", 3: "Reject", 4: "Renew"}

PartitionKey = tuple[str, str, int]  # (group, topic, partition)


@dataclass
class ShareStats:
    records_acquired: int = 0
    # acquired again after an earlier delivery (a release, a lock timeout, a restart)
    records_redelivered: int = 0
    # records acknowledged, by Kafka's ackType name
    acknowledgements: dict[str, int] = field(default_factory=dict)
    # records whose acquisition lock timed out, by share-partition
    lock_timeouts: dict[PartitionKey, int] = field(default_factory=dict)
    # share-partition requests by topic (Kafka marks each topic-partition of a request)
    fetch_requests: dict[str, int] = field(default_factory=dict)
    fetch_failed: dict[str, int] = field(default_factory=dict)
    ack_requests: dict[str, int] = field(default_factory=dict)
    ack_failed: dict[str, int] = field(default_factory=dict)

    def acknowledged(self, ack_type: int, records: int = 1) -> None:
        name = ACK_NAMES.get(ack_type)
        if name is None:
            return  # GAP: an offset the log does not hold, no record (Kafka counts none)
        self.acknowledgements[name] = self.acknowledgements.get(name, 0) + records

    def timed_out(self, key: PartitionKey, records: int) -> None:
        self.lock_timeouts[key] = self.lock_timeouts.get(key, 0) + records

    def request(self, kind: str, topic: str, failed: bool) -> None:
        """`kind` "fetch" or "ack": one topic-partition of a request."""
        total, bad = ((self.fetch_requests, self.fetch_failed) if kind == "fetch"
                      else (self.ack_requests, self.ack_failed))
        total[topic] = total.get(topic, 0) + 1
        if failed:
            bad[topic] = bad.get(topic, 0) + 1
