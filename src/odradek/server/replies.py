"""Sentinels of the request path that low modules (metrics) must name too."""

from __future__ import annotations

from typing import Any


class _Close:
    """Returned by a handler to drop the connection instead of answering."""


CLOSE_CONNECTION: Any = _Close()
