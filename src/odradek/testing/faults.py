"""Injected faults: which requests fail, wait or lose their connection (sans-IO).

`Faults` holds the rules a test sets (`fail`, `delay`, `disconnect`) and, for each
request the broker decodes, decides what happens to it: nothing (`None`), a `Fail`
(the request fails with that error: the request pipeline answers with the API's error
response at the request's version, as for any real failure — server/error_responses.py),
a `Delay` (then handled as usual) or a `Disconnect`. The pipeline's fault step applies
the decision (testing/fault_step.py); this module never touches a socket or a loop, so a
test thread can set rules while the broker's loop reads them.

    broker.faults.fail("Produce", "NOT_LEADER_OR_FOLLOWER", count=2)
    broker.faults.delay("Fetch", 500)
    broker.faults.disconnect("JoinGroup")
    broker.faults.clear()
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map

from odradek.protocol.messages import Message

log = logging.getLogger(__name__)

__all__ = ["Delay", "Disconnect", "Fail", "Fault", "FaultError", "Faults"]


class FaultError(ValueError):
    """A fault named an API or an error Kafka does not have, or a bad count or delay."""


@dataclass(frozen=True)
class Fail:
    """Fail the request with this error instead of handling it."""

    error: ErrorCode


@dataclass(frozen=True)
class Delay:
    """Handle the request after this many milliseconds (later requests on the
    connection wait behind it, as they do behind a slow request on a real broker)."""

    ms: int


@dataclass(frozen=True)
class Disconnect:
    """Close the connection instead of answering."""


Action = Fail | Delay | Disconnect


@dataclass
class Fault:
    """One rule; `remaining` None applies it until `clear()`."""

    kind: str  # fail | delay | disconnect
    api_key: int
    remaining: int | None
    error: ErrorCode | None = None
    delay_ms: int = 0
    topic: str | None = None
    fired: int = field(default=0)

    def describe(self) -> str:
        what = {"fail": f"fail with {self.error.name.upper() if self.error else ''}",
                "delay": f"delay {self.delay_ms} ms", "disconnect": "disconnect"}[self.kind]
        topic = f" on topic {self.topic}" if self.topic else ""
        return f"{api_display_name(self.api_key)}{topic}: {what}"


def _squash(name: str) -> str:
    return name.replace("_", "").replace("-", "").replace(" ", "").lower()


_API_BY_SQUASHED = {_squash(name): key for key, name in api_key_map.items()}


def api_display_name(api_key: int) -> str:
    """Kafka's name of an API: "Produce", "ListOffsets", "JoinGroup"."""
    return "".join(part.capitalize() for part in api_key_map[api_key].split("_"))


def parse_api(api: str | int) -> int:
    """An API key from Kafka's name of the API ("Produce", "JoinGroup") or its key."""
    if isinstance(api, int) and not isinstance(api, bool):
        if api in api_key_map:
            return api
        raise FaultError(f"unknown Kafka API key {api}")
    key = _API_BY_SQUASHED.get(_squash(str(api)))
    if key is None:
        names = [api_display_name(k) for k in api_key_map]
        near = difflib.get_close_matches(str(api), names, n=3)
        hint = f" (did you mean {', '.join(near)}?)" if near else ""
        raise FaultError(f"unknown Kafka API {api!r}{hint}")
    return key


def parse_error(error: str | int | ErrorCode) -> ErrorCode:
    """A Kafka error from its name ("NOT_LEADER_OR_FOLLOWER") or code."""
    if isinstance(error, ErrorCode):
        return error
    if isinstance(error, int) and not isinstance(error, bool):
        try:
            return ErrorCode(error)
        except ValueError:
            raise FaultError(f"unknown Kafka error code {error}") from None
    name = str(error).strip().lower()
    try:
        code = ErrorCode[name]
    except KeyError:
        names = [e.name.upper() for e in ErrorCode]
        near = difflib.get_close_matches(str(error).upper(), names, n=3)
        hint = f" (did you mean {', '.join(near)}?)" if near else ""
        raise FaultError(f"unknown Kafka error {error!r}{hint}") from None
    if code is ErrorCode.none:
        raise FaultError("NONE is not an error: use clear() to stop failing requests")
    return code


def _count(count: int | None, what: str) -> int | None:
    if count is not None and (isinstance(count, bool) or int(count) < 1):
        raise FaultError(f"{what}: count must be a positive number or None, got {count!r}")
    return None if count is None else int(count)


class Faults:
    """The fault rules of one broker. Thread-safe: set from tests, read by the broker."""

    def __init__(self, node_id: int | None = None) -> None:
        self.node_id = node_id
        self._lock = threading.Lock()
        self._rules: list[Fault] = []
        self.injected: list[str] = []  # one line per fault injected, in order
        # Set while rules exist, so the broker's check is one attribute read otherwise.
        self.active = False

    # ---- what tests call --------------------------------------------------------

    def fail(self, api: str | int, error: str | int | ErrorCode, count: int | None = 1,
             topic: str | None = None) -> Fault:
        """Answer the next `count` requests of `api` (that name `topic`, if given) with
        `error`, encoded as a real broker encodes it at each request's version."""
        rule = Fault("fail", parse_api(api), _count(count, "fail"), error=parse_error(error),
                     topic=topic)
        return self._add(rule)

    def delay(self, api: str | int, ms: int, count: int | None = None,
              topic: str | None = None) -> Fault:
        """Hold the next `count` requests of `api` (all, by default) for `ms` ms."""
        if isinstance(ms, bool) or int(ms) < 0:
            raise FaultError(f"delay: ms must be 0 or more, got {ms!r}")
        rule = Fault("delay", parse_api(api), _count(count, "delay"), delay_ms=int(ms),
                     topic=topic)
        return self._add(rule)

    def disconnect(self, api: str | int, count: int | None = 1,
                   topic: str | None = None) -> Fault:
        """Close the connection of the next `count` requests of `api` instead of answering."""
        rule = Fault("disconnect", parse_api(api), _count(count, "disconnect"), topic=topic)
        return self._add(rule)

    def clear(self) -> None:
        """Remove every rule; requests are handled as usual again."""
        with self._lock:
            self._rules.clear()
            self.active = False

    @property
    def pending(self) -> list[Fault]:
        with self._lock:
            return list(self._rules)

    def _add(self, rule: Fault) -> Fault:
        with self._lock:
            self._rules.append(rule)
            self.active = True
        return rule

    # ---- what the broker calls ----------------------------------------------------

    def decide(self, api_key: int, version: int, request: Message,
               topic_of_id: Callable[[uuid.UUID], str | None] = lambda _: None,
               ) -> Action | None:
        """What to do with this request; None handles it as usual."""
        with self._lock:
            rule = self._match(api_key, request, topic_of_id)
            if rule is None:
                return None
            rule.fired += 1
            if rule.remaining is not None:
                rule.remaining -= 1
                if rule.remaining == 0:
                    self._rules.remove(rule)
                    self.active = bool(self._rules)
            line = f"{rule.describe()} (v{version}, #{rule.fired})"
            if self.node_id is not None:
                line = f"broker {self.node_id}: {line}"
            self.injected.append(line)
        log.warning("injected fault: %s", line)
        if rule.kind == "delay":
            return Delay(rule.delay_ms)
        if rule.kind == "disconnect":
            return Disconnect()
        assert rule.error is not None
        return Fail(rule.error)

    def _match(self, api_key: int, request: Message,
               topic_of_id: Callable[[uuid.UUID], str | None]) -> Fault | None:
        topics: set[str] | None = None
        for rule in self._rules:
            if rule.api_key != api_key:
                continue
            if rule.topic is not None:
                if topics is None:
                    topics = request_topics(request, topic_of_id)
                if rule.topic not in topics:
                    continue
            return rule
        return None


def request_topics(request: Any, topic_of_id: Callable[[uuid.UUID], str | None]) -> set[str]:
    """The topics a request names, by name or (Fetch v13+) by id."""
    out: set[str] = set()
    for name in _attrs(request):
        value = getattr(request, name)
        if not _is_list(value):
            continue
        for item in value:
            if isinstance(item, str) and name in ("topics", "topic_names"):
                out.add(item)
                continue
            for attr in ("name", "topic"):
                topic = getattr(item, attr, None)
                if isinstance(topic, str) and topic:
                    out.add(topic)
            topic_id = getattr(item, "topic_id", None)
            if isinstance(topic_id, uuid.UUID):
                resolved = topic_of_id(topic_id)
                if resolved:
                    out.add(resolved)
    return out


def _is_list(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and not hasattr(value, "_fields")


def _attrs(obj: Any) -> tuple[str, ...]:
    """Field names of a request: kio's dataclasses or the hand-written decoders' named
    tuples and slotted classes (protocol/produce_request.py)."""
    if dataclasses.is_dataclass(obj):
        return tuple(f.name for f in dataclasses.fields(obj))
    if hasattr(obj, "_fields"):
        return tuple(obj._fields)
    return tuple(getattr(obj, "__slots__", ()))
