"""ListGroups (16): the groups this broker coordinates, filtered by state and type.

At 10,000 groups, building and encoding every group's entry per request cost a fifth
of a second; each group's entry is kept encoded (server/encoded_entries.py) under its
live (protocol type, state, type), read on every request, so a group that joins,
changes state or goes shows in the very next answer. The loop below runs per group
per request: it stays flat (no generator, no closure per group).
"""

from __future__ import annotations

import weakref
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
    listed: list[tuple[str, Stamp]] = []
    for g in owner.list_groups():
        if isinstance(g, ClassicGroup):
            listed.append((g.group_id, (g.protocol_type or "", g.state_name, "classic")))
        else:
            listed.append((g.group_id, ("consumer", g.state_name, g.kind)))
    shares = ctx.ports.shares
    for sg in shares.coordinator.list_groups() if shares is not None else ():
        listed.append((sg.group_id, ("share", sg.state_name, "share")))
    if len(cache) > 2 * len(listed) + 100:
        cache.forget_missing({group_id for group_id, _ in listed})

    listed_group = schema.ListedGroup

    def entry(group_id: str, stamp: Stamp) -> Any:
        return build(listed_group, group_id=group_id, protocol_type=stamp[0],
                     group_state=stamp[1], group_type=stamp[2])

    get = cache.get
    if states or types or denied is not None:
        entries = [get(group_id, stamp, version, entry) for group_id, stamp in listed
                   if (not states or stamp[1].lower() in states)
                   and (not types or stamp[2] in types)
                   and (denied is None or not denied(group_id))]
    else:
        entries = [get(group_id, stamp, version, entry) for group_id, stamp in listed]
    empty = build(schema.ListGroupsResponse, error_code=ErrorCode.none, groups=())
    return splice(API_KEY, version, ctx.header.correlation_id, empty, "groups", entries)


HANDLER = ApiHandler(API_KEY, 0, 5, handle)
