"""The broker channel's frame reader: frames come out whole and in order however the
socket cuts the stream, large ones filled in place, and a broken stream fails the
reader instead of handing out a torn frame."""

from __future__ import annotations

import asyncio
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.replication.frame_stream import SCRATCH_BYTES, FrameStream


class _Transport:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


def _feed(stream: FrameStream, data: bytes, cuts: list[int]) -> None:
    """What the transport does: ask for a buffer, receive at most its size into it."""
    pos = 0
    cut_iter = iter(cuts)
    while pos < len(data):
        buf = stream.get_buffer(-1)
        assert len(buf) > 0
        n = min(len(buf), len(data) - pos, max(1, next(cut_iter, len(data))))
        buf[:n] = data[pos:pos + n]
        stream.buffer_updated(n)
        pos += n


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


async def _drain(stream: FrameStream, count: int) -> list[bytes]:
    return [bytes(await stream.read_frame()) for _ in range(count)]


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.sampled_from([0, 1, 7, 1000, SCRATCH_BYTES - 4, SCRATCH_BYTES,
                                       SCRATCH_BYTES * 3 + 5]), min_size=1, max_size=6),
       cuts=st.lists(st.integers(1, SCRATCH_BYTES * 2), max_size=40))
def test_frames_come_out_whole_and_in_order_however_the_stream_is_cut(
        sizes: list[int], cuts: list[int]) -> None:
    bodies = [bytes([i % 251]) * n for i, n in enumerate(sizes)]
    stream = FrameStream()
    stream.connection_made(_Transport())  # type: ignore[arg-type]
    _feed(stream, b"".join(_frame(b) for b in bodies), cuts)
    assert asyncio.run(_drain(stream, len(bodies))) == bodies


def test_a_reader_waiting_for_a_frame_gets_it_when_the_last_byte_arrives() -> None:
    async def go() -> bytes:
        stream = FrameStream()
        stream.connection_made(_Transport())  # type: ignore[arg-type]
        body = b"x" * (SCRATCH_BYTES * 2)
        reader = asyncio.ensure_future(stream.read_frame())
        data = _frame(body)
        _feed(stream, data[:-1], [65536] * 100)
        await asyncio.sleep(0)
        assert not reader.done()
        _feed(stream, data[-1:], [])
        return bytes(await reader)

    assert asyncio.run(go()) == b"x" * (SCRATCH_BYTES * 2)


def test_a_closed_connection_fails_the_reader_not_with_a_torn_frame() -> None:
    async def go() -> None:
        stream = FrameStream()
        stream.connection_made(_Transport())  # type: ignore[arg-type]
        _feed(stream, _frame(b"whole") + _frame(b"y" * 100)[:50], [])
        assert bytes(await stream.read_frame()) == b"whole"
        stream.eof_received()
        with pytest.raises(ConnectionError, match="closed"):
            await stream.read_frame()

    asyncio.run(go())


def test_a_negative_size_closes_the_connection_and_fails_the_reader() -> None:
    async def go() -> None:
        stream = FrameStream()
        transport = _Transport()
        stream.connection_made(transport)  # type: ignore[arg-type]
        _feed(stream, struct.pack(">i", -5) + b"junk", [])
        assert transport.closed
        with pytest.raises(ConnectionError, match="negative"):
            await stream.read_frame()

    asyncio.run(go())


def test_a_frame_past_the_eager_size_grows_with_what_arrives(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The size prefix is the peer's word: announcing a gigabyte and sending a little
    costs what was sent (doubled at most), and a large frame still comes out whole."""
    from odradek.replication import frame_stream

    monkeypatch.setattr(frame_stream, "EAGER_BYTES", SCRATCH_BYTES * 2)

    async def go() -> None:
        stream = FrameStream()
        stream.connection_made(_Transport())  # type: ignore[arg-type]
        _feed(stream, struct.pack(">i", 1 << 30) + b"z" * (SCRATCH_BYTES * 3), [65536] * 100)
        held = stream._frame
        assert held is not None and len(held) <= SCRATCH_BYTES * 6

        other = FrameStream()
        other.connection_made(_Transport())  # type: ignore[arg-type]
        body = bytes(range(256)) * (SCRATCH_BYTES * 9 // 256) + b"end"
        _feed(other, _frame(body) + _frame(b"next"), [100_000, 7, 300_000] * 50)
        assert [bytes(f) for f in await _drain(other, 2)] == [body, b"next"]

    asyncio.run(go())
