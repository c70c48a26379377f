"""`odradek advise check`: a user's settings against a goal's rules and against each other.

Pure: the settings arrive as `Settings` (read from files or a broker in sources.py);
out come `Finding`s. A setting that is not given is judged by its default, and the
finding says so — an unset `linger.ms` is as slow as a set one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from odradek.advice.rules import (
    CONFLICTS,
    DEFAULTS,
    Conflict,
    Goal,
    Lookup,
    Scope,
    rules_for,
)


@dataclass(frozen=True)
class Settings:
    """One scope's settings from one place: a file, a topic, a broker."""

    scope: Scope
    label: str  # where they came from: "producer.properties", "topic orders", "broker 1"
    values: Mapping[str, str]  # set explicitly (for a live resource: what it reports)
    defaults: Mapping[str, tuple[str, str]] = field(default_factory=dict)  # name → (value, whose)

    @classmethod
    def of(cls, scope: Scope, label: str, values: Mapping[str, str],
           defaults: Mapping[str, tuple[str, str]] | None = None) -> Settings:
        """With Kafka's defaults for whatever `defaults` does not name."""
        merged = {n: (v, "Kafka's default") for n, v in DEFAULTS[scope].items()}
        merged.update(defaults or {})
        return cls(scope, label, dict(values), merged)

    def value(self, name: str) -> tuple[str | None, str | None]:
        """(effective value, None if set or whose default it is)."""
        if name in self.values:
            return self.values[name], None
        if name in self.defaults:
            return self.defaults[name]
        return None, None

    def lookup(self) -> Lookup:
        effective: dict[str, str | None] = {n: v for n, (v, _) in self.defaults.items()}
        effective.update(self.values)
        return Lookup(effective, explicit=self.values.keys())


@dataclass(frozen=True)
class Finding:
    where: str
    name: str
    value: str
    wanted: str
    why: str
    goal: Goal | None  # None: settings that contradict each other

    def as_dict(self) -> dict[str, Any]:
        return {"where": self.where, "setting": self.name, "value": self.value,
                "wanted": self.wanted, "why": self.why,
                "kind": self.goal.value if self.goal else "conflict"}


def _shown(value: str, whose: str | None) -> str:
    return value if whose is None else f"{value} (not set: {whose})"


def against_goal(goal: Goal, settings: Iterable[Settings]) -> list[Finding]:
    """Each checked rule of `goal` whose scope's value fails the rule's test."""
    out = []
    for s in settings:
        lookup = s.lookup()
        for rule in rules_for(goal, s.scope):
            test = rule.want.test
            if test is None:
                continue
            value, whose = s.value(rule.name)
            if value is None or test(value, lookup):
                continue
            out.append(Finding(s.label, rule.name, _shown(value, whose), rule.want.text,
                               rule.why, goal))
    return out


def _values(s: Settings, names: Iterable[str]) -> str:
    shown = []
    for name in dict.fromkeys(names):
        value, whose = s.value(name)
        shown.append(f"{name}={_shown(value or '-', whose)}")
    return ", ".join(shown)


def conflicts(settings: Iterable[Settings]) -> list[Finding]:
    """Settings that cannot all hold, within one scope and between a producer and the
    topic or brokers it writes to."""
    settings = list(settings)
    by_scope: dict[Scope, list[Settings]] = {}
    for s in settings:
        by_scope.setdefault(s.scope, []).append(s)
    out = []
    for c in CONFLICTS:
        if c.other is None:
            assert c.clash is not None
            out += [_finding(c, s.label, _values(s, c.names))
                    for s in by_scope.get(c.scope, []) if c.clash(s.lookup())]
            continue
        if c.other == Scope.BROKER and by_scope.get(Scope.TOPIC):
            continue  # a topic's own value overrides the brokers' default: judged there
        assert c.clash2 is not None
        for a in by_scope.get(c.scope, []):
            for b in by_scope.get(c.other, []):
                if c.clash2(a.lookup(), b.lookup()):
                    shown = f"{_values(a, c.names[:1])}; {_values(b, c.names[1:])}"
                    out.append(_finding(c, f"{a.label} + {b.label}", shown))
    return out


def _finding(c: Conflict, where: str, shown: str) -> Finding:
    return Finding(where, " + ".join(dict.fromkeys(c.names)), shown, c.wanted, c.why, None)


def check(goal: Goal, settings: Iterable[Settings]) -> list[Finding]:
    settings = list(settings)
    return against_goal(goal, settings) + conflicts(settings)
