"""A goal's rules and a check's findings as a table, a .properties text, or JSON."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.text import Text

from odradek.advice.check import Finding
from odradek.advice.rules import NOTES, Goal, Rule, Scope

SOURCE = 'Confluent\'s "Optimizing Your Apache Kafka Deployment" (seed 004)'

# How a scope's settings reach the system, for the header of each properties block.
_WHERE = {
    Scope.PRODUCER: "producer.properties (the producer's config)",
    Scope.CONSUMER: "consumer.properties (the consumer's config)",
    Scope.BROKER: "server.properties (odradek broker --config; some also via "
                  "odradek configs alter --broker '')",
    Scope.TOPIC: "topic configs (odradek topics create --config k=v, or "
                 "odradek configs alter --topic T --add-config k=v)",
}


def rules_view(goal: Goal, rules: Sequence[Rule]) -> RenderableType:
    """Per side, each setting on one line — `name: recommended  (default d)` — and why
    under it: readable at any terminal width, and every name stays whole for grep."""
    parts: list[RenderableType] = [Text(f"Settings for {goal.value} — {SOURCE}", style="bold")]
    for scope in Scope:
        chosen = [r for r in rules if r.scope == scope]
        if not chosen:
            continue
        parts.append(Text(f"\n{scope.value}", style="bold underline"))
        for r in chosen:
            line = Text.assemble("  ", (r.name, "bold"), ": ", (r.want.text, "green"),
                                 f"  (default {r.default})")
            if not r.checked:
                line.append("  advice", style="dim")
            parts += [line, Padding(Text(r.why), (0, 0, 0, 6))]
    return Group(*parts)


def notes(goal: Goal) -> list[str]:
    return list(NOTES[goal])


def properties(goal: Goal, rules: Sequence[Rule]) -> str:
    """Ready to paste: one block per scope; ranges as the value we picked within them;
    advice without a single right value, and non-configs, as comments."""
    lines = [f"# odradek advise --goal {goal.value}: {SOURCE}"]
    for scope in Scope:
        chosen = [r for r in rules if r.scope == scope]
        if not chosen:
            continue
        lines += ["", f"# ---- {scope.value}: {_WHERE[scope]}"]
        for r in chosen:
            lines.append(f"# {r.name}: {r.want.text} (default {r.default}). {r.why}")
            if r.pick is None:
                continue
            if r.settable:
                lines.append(f"{r.name}={r.pick}")
            else:
                lines.append(f"# {r.name}={r.pick}  (odradek topics create "
                             f"--{r.name.replace('.', '-')} {r.pick})")
    lines += ["", *(f"# note: {n}" for n in notes(goal))]
    return "\n".join(lines) + "\n"


def as_json(goal: Goal, rules: Sequence[Rule]) -> dict[str, Any]:
    return {
        "goal": goal.value,
        "source": SOURCE,
        "settings": [
            {"for": r.scope.value, "name": r.name, "recommended": r.want.text,
             "value": r.pick, "default": r.default, "why": r.why, "checked": r.checked,
             "config": r.settable}
            for r in rules
        ],
        "notes": notes(goal),
    }


def finding_lines(findings: Sequence[Finding]) -> list[str]:
    """One line per finding (grep-able; a table wraps badly in a terminal):
    `[durability] producer (p.properties): acks=1; wanted all — why`."""
    out = []
    for f in findings:
        tag = f.goal.value if f.goal is not None else "conflict"
        shown = f"{f.name}={f.value}" if f.goal is not None else f.value
        out.append(f"[{tag}] {f.where}: {shown}; wanted {f.wanted} — {f.why}")
    return out
