"""The hand-written ProduceRequest decoder agrees with kio's on every version we serve."""

from __future__ import annotations

import contextlib
import datetime
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol.errors import InvalidRequest
from odradek.protocol.headers import read_request_header
from odradek.protocol.messages import encode_request, request_class
from odradek.protocol.produce_request import decode_produce_request

topics = st.lists(
    st.tuples(
        st.text(alphabet="abcdefgh.-_", min_size=1, max_size=20),
        st.lists(st.tuples(st.integers(0, 1000), st.one_of(st.none(), st.binary(max_size=300))),
                 max_size=4),
    ),
    max_size=3,
)


def _frame(version: int, txn: str | None, acks: int, data: list) -> bytearray:
    cls = request_class(0, version)
    m = sys.modules[cls.__module__]
    body = cls(
        transactional_id=txn, acks=acks, timeout=datetime.timedelta(milliseconds=1500),
        topic_data=tuple(
            m.TopicProduceData(name=name, partition_data=tuple(
                m.PartitionProduceData(index=i, records=r) for i, r in parts))
            for name, parts in data),
    )
    return bytearray(encode_request(0, version, 7, "client", body)[4:])


@settings(max_examples=60, deadline=None)
@given(version=st.integers(3, 12), txn=st.one_of(st.none(), st.text(max_size=10)),
       acks=st.sampled_from([-1, 0, 1]), data=topics)
def test_matches_the_request_that_was_encoded(version: int, txn: str | None, acks: int,
                                              data: list) -> None:
    frame = _frame(version, txn, acks, data)
    _, offset = read_request_header(memoryview(frame).toreadonly(), version >= 9)
    req = decode_produce_request(frame, offset, version)
    assert req.transactional_id == txn
    assert req.acks == acks and req.timeout_ms == 1500
    got = [(t.name, [(p.index, None if p.records is None else bytes(p.records))
                     for p in t.partition_data]) for t in req.topic_data]
    assert got == [(n, list(parts)) for n, parts in data]


def test_records_are_writable_views_of_the_frame() -> None:
    frame = _frame(9, None, 1, [("t", [(0, b"abcdef")])])
    _, offset = read_request_header(memoryview(frame).toreadonly(), True)
    records = decode_produce_request(frame, offset, 9).topic_data[0].partition_data[0].records
    assert records is not None and not records.readonly
    records[0:1] = b"Z"
    assert b"Zbcdef" in frame, "patching the records patches the frame: no copy was made"


@settings(max_examples=200, deadline=None)
@given(cut=st.integers(0, 200), flip=st.integers(0, 255), at=st.integers(0, 200))
def test_truncated_or_damaged_requests_raise_invalid_request(cut: int, flip: int,
                                                             at: int) -> None:
    frame = _frame(9, "tx", 1, [("topic", [(0, b"x" * 40), (1, None)])])
    _, offset = read_request_header(memoryview(frame).toreadonly(), True)
    damaged = bytearray(frame[: max(offset, len(frame) - cut)])
    if at < len(damaged) - offset:
        damaged[offset + at] ^= flip
    with contextlib.suppress(InvalidRequest):
        decode_produce_request(damaged, offset, 9)


def test_unknown_version_is_refused() -> None:
    with pytest.raises(InvalidRequest):
        decode_produce_request(bytearray(10), 0, 13)
