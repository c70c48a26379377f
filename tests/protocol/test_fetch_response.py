"""The hand-written FetchResponse encoder reads back through kio identically, v4-v17."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol.fetch_response import FetchedPartition, encode_fetch_response
from odradek.protocol.messages import decode_response

partitions = st.lists(
    st.builds(
        FetchedPartition,
        index=st.integers(0, 10_000),
        error_code=st.sampled_from([0, 1, 3, 6]),
        high_watermark=st.integers(-1, 2**40),
        last_stable_offset=st.integers(-1, 2**40),
        log_start_offset=st.integers(-1, 2**40),
        records=st.binary(max_size=400),
        aborted_transactions=st.one_of(
            st.none(), st.lists(st.tuples(st.integers(0, 2**40), st.integers(0, 2**40)),
                                max_size=3)),
        preferred_read_replica=st.integers(-1, 5),
    ),
    max_size=4,
)


@settings(max_examples=80, deadline=None)
@given(version=st.integers(4, 17), parts=st.lists(partitions, max_size=3),
       session=st.integers(0, 1000), error=st.sampled_from([0, 70]))
def test_kio_reads_what_we_write(version: int, parts: list[list[FetchedPartition]],
                                 session: int, error: int) -> None:
    keys: list[str | uuid.UUID] = (
        [uuid.uuid4() for _ in parts] if version >= 13
        else [f"topic-{i}" for i in range(len(parts))])
    frame = encode_fetch_response(version, 99, list(zip(keys, parts, strict=True)),
                                  error_code=error, session_id=session)
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    assert int.from_bytes(frame[4:8], "big") == 99
    body_at = 8 + (1 if version >= 12 else 0)
    resp = decode_response(1, version, bytes(frame), body_at)
    if version >= 7:
        assert resp.session_id == session and int(resp.error_code) == error
    assert len(resp.responses) == len(parts)
    for key, ours, theirs in zip(keys, parts, resp.responses, strict=True):
        assert (theirs.topic_id if version >= 13 else theirs.topic) == key
        for p, q in zip(ours, theirs.partitions, strict=True):
            assert q.partition_index == p.index and int(q.error_code) == p.error_code
            assert q.high_watermark == p.high_watermark
            assert q.last_stable_offset == p.last_stable_offset
            if version >= 5:
                assert q.log_start_offset == p.log_start_offset
            if version >= 11:
                assert q.preferred_read_replica == p.preferred_read_replica
            assert bytes(q.records or b"") == p.records
            got = (None if q.aborted_transactions is None else
                   [(a.producer_id, a.first_offset) for a in q.aborted_transactions])
            want = None if p.aborted_transactions is None else list(p.aborted_transactions)
            assert got == want
