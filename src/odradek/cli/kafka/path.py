"""`odradek kafka-path`: a folder whose bin/ holds Kafka's script names, calling odradek.

Kafka's scripts live in `$KAFKA_HOME/bin/`. This writes `kafka-topics.sh` and the others
into `kafka/bin/` of the data home (`$ODRADEK_HOME`, default `~/.local/share/odradek`;
each calls this interpreter's odradek, so a virtual environment needs no activation)
and prints the folder, so that `KAFKA_PATH=$(odradek kafka-path)` or
`PATH=$(odradek kafka-path)/bin:$PATH` makes existing scripts run unchanged.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from odradek.cli.kafka.tools import TOOLS


def kafka_home() -> Path:
    from odradek.home import Home

    return Home.at().root / "kafka"


def script(tool: str) -> str:
    python = shlex.quote(sys.executable)
    return ("#!/bin/sh\n"
            f"# Kafka's {tool}.sh, served by odradek (written by `odradek kafka-path`).\n"
            f'exec {python} -m odradek.cli.kafka {tool} "$@"\n')


def write_scripts(home: Path) -> Path:
    """Write (or refresh) home/bin/<tool>.sh for every tool; return home."""
    bin_dir = home / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for tool in TOOLS:
        path = bin_dir / f"{tool}.sh"
        text = script(tool)
        if not path.exists() or path.read_text() != text:
            tmp = path.with_suffix(".tmp")
            tmp.write_text(text)
            tmp.chmod(0o755)
            tmp.replace(path)  # atomic: a script running now keeps its file
    return home


def kafka_path() -> None:
    """Print a folder holding bin/kafka-topics.sh etc. (Kafka's scripts, run by odradek)."""
    print(write_scripts(kafka_home()))
