"""What the group handlers share: the coordinator, and how a client is named."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from odradek.coordinator.group import GroupCoordinator
    from odradek.server.handlers.base import RequestContext


def coordinator(ctx: RequestContext) -> GroupCoordinator:
    return ctx.groups


def client_host(ctx: RequestContext) -> str:
    """As Kafka shows it (InetAddress.toString): `/127.0.0.1`."""
    return f"/{ctx.client_host}"


def client_id(ctx: RequestContext) -> str:
    return ctx.header.client_id or ""


def unknown_partitions(ctx: RequestContext, tps: Iterable[tuple[str, int]]
                       ) -> set[tuple[str, int]]:
    """The partitions that do not exist: Kafka answers UNKNOWN_TOPIC_OR_PARTITION for
    them in an offset commit (its metadata check) and commits the rest."""
    topics = ctx.metadata.image.topics
    out = set()
    for topic, index in tps:
        info = topics.get(topic)
        if info is None or not 0 <= index < len(info.partitions):
            out.add((topic, index))
    return out
