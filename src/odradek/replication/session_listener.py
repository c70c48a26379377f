"""What a partition tells the replica fetch sessions that hold it.

A protocol of its own so that `partition` (which notifies) and `fetch_session` (which
listens and holds partitions) do not import each other.
"""
from __future__ import annotations

from typing import Any, Protocol

SessionKey = tuple[Any, int]  # (topic name or id as the request names it, partition)


class SessionListener(Protocol):
    def on_data(self, key: SessionKey, nbytes: int) -> None:
        """New records at `key`: a waiting fetch may complete."""

    def on_change(self, key: SessionKey, wake: bool = False) -> None:
        """Watermarks or the log start moved: the follower is told on its next fetch."""
