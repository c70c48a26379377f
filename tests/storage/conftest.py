from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from storage_helpers import Clock

from odradek.storage.log import Log
from odradek.storage.log_config import LogConfig


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def open_log(tmp_path: Path, clock: Clock) -> Iterator[Callable[..., Log]]:
    """Opens logs under tmp_path with the test clock; closes what is left open."""
    opened: list[Log] = []

    def _open(config: LogConfig | None = None, name: str = "topic-0", **kwargs: Any) -> Log:
        log = Log.open(tmp_path / name, config or LogConfig(), clock_ms=clock, **kwargs)
        opened.append(log)
        return log

    yield _open
    for log in opened:
        if not log.closed:
            log.close_without_flush()
