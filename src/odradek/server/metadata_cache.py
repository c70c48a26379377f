"""Metadata responses at size: each topic's entry encoded once per version, and the
response spliced around the encoded entries (server/encoded_entries.py).

A full Metadata of 20,000 partitions built and encoded 20,000 partition entities per
request (a quarter of a second). A topic's entry depends only on its `TopicInfo` —
while no log dir is offline and every hosted partition opened (the handler's slow path
otherwise) — so it is kept, encoded, until the topic's entry in the image changes:
the embedded controller keeps the same `TopicInfo` for an unchanged topic, and a new
one for any change of its leaders, ISRs, partitions or configs.
"""

from __future__ import annotations

import operator
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from odradek.cluster.metadata import TopicInfo
from odradek.server.encoded_entries import EncodedEntries, SplicedFrame, encode_entity
from odradek.server.encoded_entries import splice as splice_entries

__all__ = ["TopicEntries", "encode_entity", "entries_for", "splice"]

METADATA = 3


class TopicEntries:
    """One broker's encoded topic entries: name → (TopicInfo, {version: bytes}); an
    entry is kept while the image holds the very same `TopicInfo`."""

    def __init__(self) -> None:
        self._entries: EncodedEntries[TopicInfo] = EncodedEntries(operator.is_)

    def get(self, topic: TopicInfo, version: int, build: Callable[[], Any]) -> bytes:
        return self._entries.get(topic.name, topic, version, lambda _name, _topic: build())

    def forget_missing(self, topics: dict[str, TopicInfo]) -> None:
        if len(self._entries) > 2 * len(topics) + 100:  # only once it has outgrown them
            self._entries.forget_missing(topics.keys())


_by_source: weakref.WeakKeyDictionary[Any, TopicEntries] = weakref.WeakKeyDictionary()


def entries_for(metadata_source: Any) -> TopicEntries:
    """The cache of the broker whose metadata source (its controller) this is."""
    entries = _by_source.get(metadata_source)
    if entries is None:
        entries = _by_source[metadata_source] = TopicEntries()
    return entries


def splice(version: int, correlation_id: int, empty: Any, topics: Iterable[bytes]
           ) -> SplicedFrame:
    """The frame of `empty` (the response with no topics) with the encoded `topics`
    as its topics array."""
    return splice_entries(METADATA, version, correlation_id, empty, "topics", topics)
