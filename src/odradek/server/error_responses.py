"""Any API's error response, as Kafka's `AbstractRequest.getErrorResponse` builds it.

When a handler fails, the client gets the API's own response carrying the error —
on every partition, topic, group or resource the request named, at the request's
version — and keeps its connection. Kafka closes a connection only when it cannot
build such a response; so do we (None here).

Most APIs carry a top-level error code and need nothing else. The others mirror the
request's lists: `_MIRRORS` says, per API, which response list answers which request
list and which key fields are copied across (the rest get Kafka's "unknown" values).
Fault injection in tests uses the same builder, so an injected error is encoded
exactly as a real failure would be.
"""

from __future__ import annotations

import datetime
import typing
import uuid
from dataclasses import MISSING, fields
from functools import cache
from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import Message, response_class

# request list -> (response list, {response field: request field or "." for the item},
#                  nested mirrors)
Mirror = tuple[str, str, dict[str, str], tuple[Any, ...]]


def _m(resp: str, req: str, keys: dict[str, str], *nested: Mirror) -> Mirror:
    return resp, req, keys, nested


_PARTITIONS_BY_INDEX = _m("partitions", "partitions", {"partition_index": "partition_index"})
_SHARE_STATE_PARTITIONS = _m("partitions", "partitions", {"partition": "partition"})

_MIRRORS: dict[int, tuple[Mirror, ...]] = {
    0: (_m("responses", "topic_data", {"name": "name", "topic_id": "topic_id"},
           _m("partition_responses", "partition_data", {"index": "index"})),),
    1: (_m("responses", "topics", {"topic": "topic", "topic_id": "topic_id"},
           _m("partitions", "partitions", {"partition_index": "partition"})),),
    2: (_m("topics", "topics", {"name": "name"}, _PARTITIONS_BY_INDEX),),
    3: (_m("topics", "topics", {"name": "name", "topic_id": "topic_id"}),),
    8: (_m("topics", "topics", {"name": "name", "topic_id": "topic_id"},
           _PARTITIONS_BY_INDEX),),
    9: (_m("topics", "topics", {"name": "name"},
           _m("partitions", "partition_indexes", {"partition_index": "."})),
        _m("groups", "groups", {"group_id": "group_id"})),
    10: (_m("coordinators", "coordinator_keys", {"key": "."}),),
    15: (_m("groups", "groups", {"group_id": "."}),),
    19: (_m("topics", "topics", {"name": "name"}),),
    20: (_m("responses", "topic_names", {"name": "."}),
         _m("responses", "topics", {"name": "name", "topic_id": "topic_id"})),
    21: (_m("topics", "topics", {"name": "name"}, _PARTITIONS_BY_INDEX),),
    23: (_m("topics", "topics", {"topic": "topic"},
            _m("partitions", "partitions", {"partition": "partition"})),),
    24: (_m("results_by_topic_v3_and_below", "v3_and_below_topics", {"name": "name"},
            _m("results_by_partition", "partitions", {"partition_index": "."})),),
    27: (_m("markers", "markers", {"producer_id": "producer_id"},
            _m("topics", "topics", {"name": "name"},
               _m("partitions", "partition_indexes", {"partition_index": "."}))),),
    28: (_m("topics", "topics", {"name": "name"}, _PARTITIONS_BY_INDEX),),
    30: (_m("results", "creations", {}),),
    31: (_m("filter_results", "filters", {}),),
    32: (_m("results", "resources", {"resource_type": "resource_type",
                                     "resource_name": "resource_name"}),),
    33: (_m("responses", "resources", {"resource_type": "resource_type",
                                       "resource_name": "resource_name"}),),
    37: (_m("results", "topics", {"name": "name"}),),
    42: (_m("results", "groups_names", {"group_id": "."}),),
    43: (_m("replica_election_results", "topic_partitions", {"topic": "topic"},
            _m("partition_result", "partitions", {"partition_id": "."})),),
    44: (_m("responses", "resources", {"resource_type": "resource_type",
                                       "resource_name": "resource_name"}),),
    49: (_m("entries", "entries", {},
            _m("entity", "entity", {"entity_type": "entity_type",
                                    "entity_name": "entity_name"})),),
    51: (_m("results", "upsertions", {"user": "name"}),),
    61: (_m("topics", "topics", {"name": "name"},
            _m("partitions", "partition_indexes", {"partition_index": "."})),),
    65: (_m("transaction_states", "transactional_ids", {"transactional_id": "."}),),
    69: (_m("groups", "group_ids", {"group_id": "."}),),
    77: (_m("groups", "group_ids", {"group_id": "."}),),
    75: (_m("topics", "topics", {"name": "name"}),),
    90: (_m("groups", "groups", {"group_id": "group_id"}),),
    **{api: (_m("results", "topics", {"topic_id": "topic_id"}, _SHARE_STATE_PARTITIONS),)
       for api in (83, 84, 85, 86, 87)},  # the share coordinator's state APIs
}

# Versions without an error field, where Kafka answers an error with an empty response
# (DescribeLogDirs before v3).
_EMPTY_ON_ERROR = frozenset({35})

# Fields whose "unknown" is -1 in Kafka's error responses (offsets, epochs, ids).
_MINUS_ONE = frozenset({
    "base_offset", "log_start_offset", "offset", "timestamp", "leader_epoch",
    "low_watermark", "producer_id", "producer_epoch", "high_watermark",
    "last_stable_offset", "committed_offset", "committed_leader_epoch", "end_offset",
    "node_id", "leader_id", "preferred_read_replica", "generation_id", "member_epoch",
    "partition_leader_epoch", "port",
})


def error_response(api_key: int, version: int, request: Message | None,
                   code: ErrorCode, message: str | None) -> Message | None:
    """The response of `api_key` v`version` that reports `code` for everything
    `request` named; None when this API has no way to carry an error."""
    try:
        cls: type = response_class(api_key, version)
    except Exception:
        return None
    mirrors = _MIRRORS.get(api_key, ())
    names = _field_names(cls)
    if ("error_code" not in names and not any(m[0] in names for m in mirrors)
            and api_key not in _EMPTY_ON_ERROR):
        return None
    return _build(cls, request, code, message, mirrors)


def _build(cls: type, source: Any, code: ErrorCode, message: str | None,
           mirrors: tuple[Mirror, ...], copied: dict[str, Any] | None = None) -> Any:
    hints = _hints(cls)
    kwargs: dict[str, Any] = {}
    for f in fields(cls):
        if f.name.endswith("error_code"):  # also partition_error_code (AddPartitionsToTxn)
            kwargs[f.name] = code
        elif f.name.endswith("error_message"):
            kwargs[f.name] = message
        elif copied is not None and f.name in copied:
            kwargs[f.name] = copied[f.name]
        else:
            mirror = next((m for m in mirrors if m[0] == f.name and source is not None
                           and getattr(source, m[1], None) is not None), None)
            if mirror is not None:
                kwargs[f.name] = _mirror(hints[f.name], getattr(source, mirror[1]), code,
                                         message, mirror)
            elif f.default is MISSING and f.default_factory is MISSING:
                kwargs[f.name] = _unknown(f.name, hints[f.name])
    return cls(**kwargs)


def _mirror(tp: Any, items: Any, code: ErrorCode, message: str | None, mirror: Mirror) -> Any:
    _, _, keys, nested = mirror
    child = typing.get_args(tp)[0]
    out = []
    for item in items:
        copied = {resp: item if req == "." else getattr(item, req, None)
                  for resp, req in keys.items()}
        copied = {k: v for k, v in copied.items() if v is not None}
        out.append(_build(child, item, code, message, nested, copied))
    return tuple(out)


def _unknown(name: str, tp: Any) -> Any:
    """Kafka's value for a field the error leaves unknown."""
    origin = typing.get_origin(tp)
    if origin is tuple:
        return ()
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return None
    if isinstance(tp, type):
        if issubclass(tp, bool):
            return False
        if issubclass(tp, int):
            return -1 if name in _MINUS_ONE else 0
        if issubclass(tp, float):
            return 0.0
        if issubclass(tp, str):
            return ""
        if issubclass(tp, bytes):
            return b""
        if issubclass(tp, datetime.timedelta):
            return datetime.timedelta(0)
        if issubclass(tp, datetime.datetime):
            # a required timestamp (DescribeTransactions' start time) is the epoch
            return datetime.datetime.fromtimestamp(0, tz=datetime.UTC)
        if issubclass(tp, uuid.UUID):
            return uuid.UUID(int=0)
        if hasattr(tp, "__dataclass_fields__"):
            return _build(tp, None, ErrorCode.none, None, ())
    return None


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


@cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in fields(cls))
