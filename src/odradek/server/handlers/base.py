"""What every handler shares: the request context and the way responses are built.

A handler module defines `HANDLER = ApiHandler(api_key, min_version, max_version, handle)`.
`handle(ctx, request)` returns the response message, or an awaitable of it when the
request has to wait (a long-poll fetch, a join), or None when no response is sent
(produce with acks=0).
"""

from __future__ import annotations

import datetime
import importlib
import time
import types
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, fields
from functools import cache
from typing import TYPE_CHECKING, Any

from kio.index import load_entity_module
from kio.schema.index import api_key_map
from kio.static.constants import EntityType

from odradek.protocol.fetch_response import ResponseParts
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import Message
from odradek.server.replies import CLOSE_CONNECTION as CLOSE_CONNECTION

if TYPE_CHECKING:
    from odradek.cluster.controller import MetadataController
    from odradek.coordinator.group import GroupCoordinator
    from odradek.security.mutation_quota import MutationQuota
    from odradek.server.listener_security import ConnectionSecurity
    from odradek.server.metrics import BrokerMetrics
    from odradek.server.ports import ConfigView, Ports, Replicas
    from odradek.server.txn_storage import BrokerTransactions

HandlerResult = Message | Awaitable[Message | None] | None




@dataclass(frozen=True, slots=True)
class AwaitingReplicas:
    """What a Produce handler returns when it has appended and only waits for the
    in-sync replicas (acks=all): the connection may take its next request meanwhile,
    since what this one changes is already in the log; responses still leave in order.
    Without this, each acks=all request holds its connection for a replication round
    trip, and a producer's throughput is one request per round trip."""

    wait: Awaitable[Any]


@dataclass(frozen=True, slots=True)
class Encoded:
    """A response a handler encoded itself, whole frame included (hot paths)."""

    frame: bytes | bytearray | ResponseParts  # parts: a Fetch's records left in files


@dataclass(frozen=True)
class ApiHandler:
    api_key: int
    min_version: int
    max_version: int
    handle: Callable[[RequestContext, Any], HandlerResult]
    # A hand-written decoder (frame, body offset, version) for hot paths; kio otherwise.
    # It gets the writable frame, so it can hand out slices that are patched in place.
    decode: Callable[[bytearray, int, int], Any] | None = None


@dataclass(slots=True)
class RequestContext:
    """One request as the pipeline hands it to a handler: who sent it, on which
    listener, and the broker's ports the handler may use."""

    ports: Ports
    header: RequestHeader
    client_host: str
    client_port: int
    listener: str
    security: ConnectionSecurity | None = None
    # set by the authorization step for the handlers that check topics themselves
    topic_denied: Callable[[str], bool] | None = None
    topic_creatable: Callable[[str], bool] | None = None
    group_denied: Callable[[str], bool] | None = None  # ListGroups filters with it
    request_size: int = 0  # the frame's bytes, for the produce quota
    # set by the throttle step for CreateTopics, CreatePartitions and DeleteTopics of a
    # client under a controller_mutation_rate quota
    mutation_quota: MutationQuota | None = None

    def record_mutation(self, partitions: int) -> None:
        """Charge `partitions` created, added or deleted to the client's mutation quota
        (ThrottlingQuotaExceeded when a strict quota is spent)."""
        if self.mutation_quota is not None:
            self.mutation_quota.record(partitions, int(time.monotonic() * 1000))

    @property
    def principal(self) -> str:
        """`User:alice`: who sent this, as the listener's TLS or SASL established it."""
        return "User:ANONYMOUS" if self.security is None else str(self.security.principal)

    @property
    def version(self) -> int:
        return self.header.api_version

    @property
    def node_id(self) -> int:
        return self.ports.node_id

    @property
    def config(self) -> ConfigView:
        return self.ports.config

    @property
    def metadata(self) -> MetadataController:
        return self.ports.metadata

    @property
    def replicas(self) -> Replicas:
        return self.ports.replicas

    @property
    def groups(self) -> GroupCoordinator:
        return self.ports.groups

    @property
    def transactions(self) -> BrokerTransactions:
        return self.ports.transactions

    @property
    def metrics(self) -> BrokerMetrics:
        return self.ports.metrics

    @property
    def schema(self) -> Any:
        """The kio classes of this request's response at this version."""
        return response_module(self.header.api_key, self.header.api_version)


def _absent(**_values: Any) -> None:
    return None


class ResponseSchema:
    """A version's response classes. A class this version lacks builds None: the field
    that would hold it is absent from this version too, so `build` drops it."""

    def __init__(self, module: types.ModuleType) -> None:
        self._module = module

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name, _absent)


@cache
def response_module(api_key: int, version: int) -> Any:
    module = load_entity_module(api_key_map[api_key], version,  # type: ignore[arg-type]
                                EntityType.response)
    return ResponseSchema(module)


@cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in fields(cls))


@cache
def _names_in_any_version(cls: type) -> frozenset[str]:
    """The fields of this entity in every version of its API (kio has one module per
    version: kio.schema.<api>.v<N>.<request|response>)."""
    parts = cls.__module__.split(".")
    base, kind = ".".join(parts[:-2]), parts[-1]
    names: set[str] = set(_field_names(cls))
    for version in range(_MAX_KIO_VERSION + 1):
        try:
            module = importlib.import_module(f"{base}.v{version}.{kind}")
        except ModuleNotFoundError:
            continue
        sibling = getattr(module, cls.__name__, None)
        if sibling is not None:
            names |= _field_names(sibling)
    return frozenset(names)


_MAX_KIO_VERSION = 20


def build(cls: type, **values: Any) -> Any:
    """Construct a kio message, dropping the fields this version does not have.

    Handlers describe a response once, with every field any version knows; each
    version's class keeps the ones it has. A name no version knows is a bug in the
    handler and raises at once (else a typo would silently drop a field).
    """
    if cls is _absent:
        return None
    names = _field_names(cls)
    unknown = values.keys() - names
    if unknown and (unknown := unknown - _names_in_any_version(cls)):
        raise TypeError(f"{cls.__name__} has no field {', '.join(sorted(unknown))} "
                        "in any version")
    kwargs = {k: v for k, v in values.items() if k in names}
    if "throttle_time" in names and "throttle_time" not in kwargs:
        kwargs["throttle_time"] = ZERO_MS  # the throttle step sets it when a quota says so
    return cls(**kwargs)


ZERO_MS = datetime.timedelta(0)


def ms(value: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=value)


def timestamp_or_none(ms_since_epoch: int) -> datetime.datetime | None:
    """kio writes datetimes for int64 timestamps and -1 for None."""
    if ms_since_epoch < 0:
        return None
    return datetime.datetime.fromtimestamp(ms_since_epoch / 1000, tz=datetime.UTC)


def to_ms(value: datetime.timedelta) -> int:
    return round(value.total_seconds() * 1000)
