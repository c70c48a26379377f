"""ListGroups (16): the groups this broker coordinates, filtered by state and type.

At 10,000 groups, building and encoding every group's entry per request cost most of
a second; each group's entry is kept encoded (server/encoded_entries.py) under its
live (protocol type, state, type), read on every request, so a group that joins,
changes state or goes shows in the very next answer.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from functools import partial
from typing import Any

from odradek.coordinator.group.classic import ClassicGroup
from odradek.protocol.errors import ErrorCode
from odradek.server.encoded_entries import EncodedEntries, splice
from odradek.server.handlers.base import ApiHandler, RequestContext, build
from odradek.server.handlers.group_common import coordinator

API_KEY = 16

# (protocol type, state, group type): all a group's listed entry holds besides its id
Stamp = tuple[str, str, str]

_by_coordinator: weakref.WeakKeyDictionary[Any, EncodedEntries[Stamp]] = \
    weakref.WeakKeyDictionary()


def _stamps(ctx: RequestContext) -> Iterator[tuple[str, Stamp]]:
    """(group id, stamp) of every group this broker coordinates, share groups last."""
    for g in coordinator(ctx).list_groups():
        protocol_type = (g.protocol_type or "") if isinstance(g, ClassicGroup) else "consumer"
        yield g.group_id, (protocol_type, g.state_name, g.kind)
    shares = ctx.ports.shares
    for sg in shares.coordinator.list_groups() if shares is not None else ():
        yield sg.group_id, ("share", sg.state_name, "share")


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    version = ctx.version
    states = {s.lower() for s in getattr(request, "states_filter", None) or ()}
    types = {t.lower() for t in getattr(request, "types_filter", None) or ()}
    denied = ctx.group_denied
    owner = coordinator(ctx)
    cache = _by_coordinator.get(owner)
    if cache is None:
        cache = _by_coordinator[owner] = EncodedEntries()
    listed = list(_stamps(ctx))
    if len(cache) > 2 * len(listed) + 100:
        cache.forget_missing({group_id for group_id, _ in listed})
    entries = []
    for group_id, stamp in listed:
        _, state, kind = stamp
        if states and state.lower() not in states:
            continue
        if types and kind not in types:
            continue
        if denied is not None and denied(group_id):
            continue
        entries.append(cache.get(group_id, stamp, version, partial(
            build, schema.ListedGroup, group_id=group_id, protocol_type=stamp[0],
            group_state=state, group_type=kind)))
    empty = build(schema.ListGroupsResponse, error_code=ErrorCode.none, groups=())
    return splice(API_KEY, version, ctx.header.correlation_id, empty, "groups", entries)


HANDLER = ApiHandler(API_KEY, 0, 5, handle)
