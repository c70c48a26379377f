"""The Kafka tools by script name, and how one is run."""

from __future__ import annotations

import importlib
import sys

from odradek.cli.kafka.jopt import ToolExit

# script name (without .sh) → the module whose main(argv) is that tool
TOOLS = {
    "kafka-topics": "topics",
    "kafka-configs": "configs",
    "kafka-acls": "acls",
    "kafka-consumer-groups": "groups",
    "kafka-console-producer": "console",
    "kafka-console-consumer": "console",
    "kafka-dump-log": "adapters",
    "kafka-reassign-partitions": "adapters",
    "kafka-leader-election": "adapters",
    "kafka-delete-records": "adapters",
    "kafka-producer-perf-test": "perf",
    "kafka-consumer-perf-test": "perf",
    "kafka-features": "features",
}


def run(tool: str, argv: list[str]) -> int:
    """Run one tool to its exit status; the tool prints its own errors, Kafka's way."""
    import typer

    from odradek.cli.signals import stop_on_signals

    module = importlib.import_module(f"odradek.cli.kafka.{TOOLS[tool]}")
    try:
        # the console consumer and the perf tests run until stopped, also when started
        # with '&' from a script (SIGINT then arrives ignored)
        with stop_on_signals():
            module.main(tool, argv) if TOOLS[tool] in _BY_NAME else module.main(argv)
    except ToolExit as e:
        return e.code
    except typer.Exit as e:
        return int(e.exit_code)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    return 0


_BY_NAME = {"console", "adapters", "perf"}


def main() -> None:
    """`python -m odradek.cli.kafka <tool> ...`: what the bin/*.sh scripts call."""
    if len(sys.argv) < 2 or sys.argv[1] not in TOOLS:
        print(f"usage: python -m odradek.cli.kafka {{{','.join(TOOLS)}}} [args]", file=sys.stderr)
        sys.exit(2)
    sys.exit(run(sys.argv[1], sys.argv[2:]))
