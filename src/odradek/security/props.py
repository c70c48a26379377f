"""Kafka's per-listener property overrides: `listener.name.<listener>.<prop>` (and, for
SASL, `listener.name.<listener>.<mechanism>.<prop>`) win over `<prop>`."""

from __future__ import annotations

from collections.abc import Mapping


def listener_view(props: Mapping[str, str], listener: str | None,
                  mechanism: str | None = None) -> dict[str, str]:
    """The effective properties of one listener (and mechanism), prefixes stripped."""
    view = {k: v for k, v in props.items() if not k.startswith("listener.name.")}
    if listener:
        prefix = f"listener.name.{listener.lower()}."
        for k, v in props.items():
            if k.startswith(prefix):
                rest = k[len(prefix):]
                if mechanism is None or not rest.startswith(f"{mechanism.lower()}."):
                    view[rest] = v
        if mechanism:
            mprefix = f"{prefix}{mechanism.lower()}."
            for k, v in props.items():
                if k.startswith(mprefix):
                    view[k[len(mprefix):]] = v
    return view


def parse_list(value: str | None) -> list[str]:
    """A Kafka LIST value: comma-separated, blanks trimmed, empties dropped."""
    return [v.strip() for v in (value or "").split(",") if v.strip()]
