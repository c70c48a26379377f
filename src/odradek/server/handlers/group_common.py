"""What the group handlers share: the coordinator, and how a client is named."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from odradek.coordinator.group import GroupCoordinator
    from odradek.server.handlers.base import RequestContext


def coordinator(ctx: RequestContext) -> GroupCoordinator:
    return ctx.broker.groups


def client_host(ctx: RequestContext) -> str:
    """As Kafka shows it (InetAddress.toString): `/127.0.0.1`."""
    return f"/{ctx.client_host}"


def client_id(ctx: RequestContext) -> str:
    return ctx.header.client_id or ""
