"""The share groups page (KIP-932): every share group with its state, members, and each
share-partition's start offset and lag — the requests `odradek share-groups` sends (no
binding has them), reused as they are."""

from __future__ import annotations

from dataclasses import dataclass

from odradek.client import ClientError
from odradek.client import share_groups as share
from odradek.console.admin import ConsoleError
from odradek.console.settings import ConsoleSettings

SECURED = ("the share group APIs have no binding in confluent-kafka and are sent on plain "
           "connections: this page needs the cluster's PLAINTEXT listener")


@dataclass(frozen=True)
class SharePartitionRow:
    topic: str
    partition: int
    start_offset: int | None  # None: no state yet
    lag: int | None


@dataclass(frozen=True)
class ShareGroupRow:
    group: str
    state: str
    members: int
    partitions: list[SharePartitionRow]

    @property
    def total_lag(self) -> int:
        return sum(p.lag or 0 for p in self.partitions)


def share_groups(settings: ConsoleSettings) -> list[ShareGroupRow]:
    if settings.secured:
        raise ConsoleError(SECURED)
    try:
        out = []
        for group, state in share.share_groups(settings.bootstrap):
            _, described = share.describe_group(settings.bootstrap, group)
            rows = share.with_lag(settings.kafka_config(),
                                  share.offset_rows(settings.bootstrap, group))
            out.append(ShareGroupRow(group, state, len(described.members), [
                SharePartitionRow(topic, partition, start, lag)
                for _, topic, partition, _, start, lag in rows]))
        return out
    except (ClientError, OSError) as e:
        raise ConsoleError(f"share groups: {e}") from None
