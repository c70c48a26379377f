"""Confluent's compatibility levels over any format's reader/writer check.

BACKWARD: the new schema reads data written with the previous one; FORWARD: the previous
schema reads data written with the new one; FULL: both. The transitive levels check every
live version, newest first; the others only the latest.
"""

from __future__ import annotations

from odradek.registry.formats.base import ParsedSchema

LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE",
          "FULL", "FULL_TRANSITIVE")


def check_compatibility(level: str, new: ParsedSchema,
                        previous: list[ParsedSchema]) -> list[str]:
    """The reasons `new` may not follow `previous` (oldest first) at `level`."""
    if level == "NONE" or not previous:
        return []
    against = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    base = level.removesuffix("_TRANSITIVE")
    problems: list[str] = []
    for old in reversed(against):
        if old.schema_type != new.schema_type:
            problems.append(f"{{errorType:'SCHEMA_TYPE_CHANGED', description:'from "
                            f"{old.schema_type} to {new.schema_type}'}}")
            continue
        if base in ("BACKWARD", "FULL"):
            problems += new.reader_errors(old)
        if base in ("FORWARD", "FULL"):
            problems += old.reader_errors(new)
    return problems
