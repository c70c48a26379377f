"""A classic group's members and the answers they get to JoinGroup and SyncGroup."""

from __future__ import annotations

import asyncio
import enum
import uuid
from dataclasses import dataclass, field
from typing import Any

from odradek.coordinator.group.model import Timer
from odradek.protocol.errors import ErrorCode


class State(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass
class JoinResult:
    error: ErrorCode
    member_id: str
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    skip_assignment: bool = False


@dataclass
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(eq=False)
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_waiter: asyncio.Future[JoinResult] | None = None
    sync_waiter: asyncio.Future[SyncResult] | None = None
    heartbeat: Timer = field(default_factory=Timer)
    synced: bool = False

    def metadata(self, protocol: str | None) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        return b""

    def awaiting(self) -> bool:
        return any(w is not None and not w.done() for w in (self.join_waiter, self.sync_waiter))


def resolve(waiter: asyncio.Future[Any] | None, result: Any) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(result)


def new_member_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4()}"
