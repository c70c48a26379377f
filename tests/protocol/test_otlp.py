"""protocol/otlp.py reads OTLP MetricsData as the protobuf wire format writes it: built
here field by field, gauges, sums, histograms and attributes of every value type."""

from __future__ import annotations

import struct

import pytest

from odradek.protocol.otlp import Point, decode_metrics


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _len(field: int, payload: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def _fixed64(field: int, raw: bytes) -> bytes:
    return _varint(field << 3 | 1) + raw


def _kv(key: str, **value: object) -> bytes:
    (kind, v), = value.items()
    any_value = {
        "s": lambda: _len(1, str(v).encode()),
        "b": lambda: _varint(2 << 3) + _varint(int(bool(v))),
        "i": lambda: _varint(3 << 3) + _varint(int(str(v)) & (1 << 64) - 1),
        "d": lambda: _fixed64(4, struct.pack("<d", float(str(v)))),
    }[kind]()
    return _len(1, key.encode()) + _len(2, any_value)


def _metrics_data() -> bytes:
    double_point = _len(7, _kv("node_id", s="1")) + _fixed64(4, struct.pack("<d", 2.5))
    int_point = _fixed64(6, struct.pack("<q", -7)) + _varint(99 << 3) + _varint(5)  # unknown
    histogram_point = (_len(9, _kv("topic", s="t")) + _fixed64(4, struct.pack("<Q", 3))
                       + _fixed64(5, struct.pack("<d", 12.0)))
    gauge = _len(1, b"org.apache.kafka.producer.latency.avg") + _len(5, _len(1, double_point))
    total = _len(1, b"org.apache.kafka.producer.records") + _len(7, _len(1, int_point))
    histogram = _len(1, b"org.apache.kafka.producer.size") + _len(9, _len(1, histogram_point))
    scope = _len(2, gauge) + _len(2, total) + _len(2, histogram)
    resource = _len(1, _kv("client_rack", s="r1")) + _len(1, _kv("up", b=True)) + _len(
        1, _kv("n", i=-2)) + _len(1, _kv("x", d=0.5))
    return _len(1, _len(1, resource) + _len(2, scope))


def test_every_point_with_its_resource_and_own_attributes() -> None:
    resource = (("client_rack", "r1"), ("up", "true"), ("n", "-2"), ("x", "0.5"))
    assert decode_metrics(_metrics_data()) == [
        Point("org.apache.kafka.producer.latency.avg", (*resource, ("node_id", "1")), 2.5,
              "gauge"),
        Point("org.apache.kafka.producer.records", resource, -7.0, "sum"),
        Point("org.apache.kafka.producer.size", (*resource, ("topic", "t")), 3.0,
              "histogram_count"),
        Point("org.apache.kafka.producer.size", (*resource, ("topic", "t")), 12.0,
              "histogram_sum"),
    ]


@pytest.mark.parametrize("cut", [1, 5, 20, 60])
def test_truncated_or_garbled_payloads_are_refused(cut: int) -> None:
    data = _metrics_data()
    with pytest.raises(ValueError):
        decode_metrics(data[:-cut])
    with pytest.raises(ValueError):
        decode_metrics(b"\x0f" + data)  # wire type 7 does not exist


def test_an_empty_payload_has_no_points() -> None:
    assert decode_metrics(b"") == []
