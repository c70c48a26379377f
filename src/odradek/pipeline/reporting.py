"""How a long-running pipeline command talks: rich on a terminal, plain or JSON lines
elsewhere (a file, a pipe, a service manager's journal, CI)."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console

LOG_FORMATS = ("auto", "table", "text", "json")


class Reporter:
    """Where `odradek up` says things: rich on a terminal, plain or JSON lines elsewhere.

    Plain lines go to the console's file unwrapped: a log collector or `grep` gets one
    line per report however narrow rich thinks the "terminal" is.
    """

    def __init__(self, console: Console, log_format: str = "auto") -> None:
        if log_format not in LOG_FORMATS:
            raise ValueError(f"log format {log_format!r}: choose table, text or json")
        self.console = console
        self.format = ("table" if console.is_terminal else "text") if log_format == "auto" \
            else log_format

    def line(self, text: str) -> None:
        self.console.file.write(text + "\n")
        self.console.file.flush()

    def say(self, message: str, event: str = "info", **fields: Any) -> None:
        if self.format == "json":
            self.line(json.dumps({"event": event, "message": message, **fields}))
        elif self.format == "table":
            self.console.print(message, soft_wrap=True, highlight=False)
        else:
            self.line(message)

    def progress(self, figures: dict[str, Any], text: str) -> None:
        if self.format == "json":
            self.line(json.dumps({"event": "progress", **figures}))
        else:
            self.line(text)
