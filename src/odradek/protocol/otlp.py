"""The part of OTLP's MetricsData (opentelemetry-proto, metrics/v1) a broker exports:
what KIP-714 clients push in PushTelemetry. Sans-IO: bytes in, data points out.

A small reader of the protobuf wire format for the few messages involved (the
generated opentelemetry-proto classes are not a dependency): MetricsData →
ResourceMetrics (resource attributes) → ScopeMetrics → Metric (name; gauge, sum, or
histogram, whose count and sum are kept) → NumberDataPoint (attributes, value).
Unknown fields are skipped, as protobuf readers do; malformed bytes raise ValueError.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

_DOUBLE = struct.Struct("<d")
_INT64 = struct.Struct("<q")


@dataclass(frozen=True, slots=True)
class Point:
    metric: str
    labels: tuple[tuple[str, str], ...]  # resource attributes, then the point's
    value: float
    kind: str  # gauge, sum, histogram_count, histogram_sum


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _fields(buf: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value): ints for varint/fixed, bytes for len."""
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
            yield number, wire, value
        elif wire == 1:
            if pos + 8 > end:
                raise ValueError("truncated fixed64")
            yield number, wire, int.from_bytes(buf[pos:pos + 8], "little")
            pos += 8
        elif wire == 2:
            size, pos = _varint(buf, pos)
            if pos + size > end:
                raise ValueError("truncated length-delimited field")
            yield number, wire, buf[pos:pos + size]
            pos += size
        elif wire == 5:
            if pos + 4 > end:
                raise ValueError("truncated fixed32")
            yield number, wire, int.from_bytes(buf[pos:pos + 4], "little")
            pos += 4
        else:
            raise ValueError(f"unsupported wire type {wire}")


def _any_value(buf: bytes) -> str:
    for number, wire, value in _fields(buf):
        if number == 1 and isinstance(value, bytes):
            return value.decode("utf-8", "replace")
        if number == 2 and wire == 0:
            return "true" if value else "false"
        if number == 3 and isinstance(value, int):
            return str(_INT64.unpack(value.to_bytes(8, "little"))[0])
        if number == 4 and isinstance(value, int):
            return repr(_DOUBLE.unpack(value.to_bytes(8, "little"))[0])
    return ""


def _key_value(buf: bytes) -> tuple[str, str]:
    key, text = "", ""
    for number, _, value in _fields(buf):
        if number == 1 and isinstance(value, bytes):
            key = value.decode("utf-8", "replace")
        elif number == 2 and isinstance(value, bytes):
            text = _any_value(value)
    return key, text


def _number_point(buf: bytes) -> tuple[tuple[tuple[str, str], ...], float | None]:
    labels: list[tuple[str, str]] = []
    value: float | None = None
    for number, _, raw in _fields(buf):
        if number == 7 and isinstance(raw, bytes):
            labels.append(_key_value(raw))
        elif number == 4 and isinstance(raw, int):
            value = _DOUBLE.unpack(raw.to_bytes(8, "little"))[0]
        elif number == 6 and isinstance(raw, int):
            value = float(_INT64.unpack(raw.to_bytes(8, "little"))[0])
    return tuple(labels), value


def _histogram_point(buf: bytes) -> tuple[tuple[tuple[str, str], ...], float, float]:
    labels: list[tuple[str, str]] = []
    count = total = 0.0
    for number, _, raw in _fields(buf):
        if number == 9 and isinstance(raw, bytes):
            labels.append(_key_value(raw))
        elif number == 4 and isinstance(raw, int):
            count = float(raw)
        elif number == 5 and isinstance(raw, int):
            total = _DOUBLE.unpack(raw.to_bytes(8, "little"))[0]
    return tuple(labels), count, total


def _metric(buf: bytes, resource: tuple[tuple[str, str], ...]) -> Iterator[Point]:
    name = ""
    bodies: list[tuple[int, bytes]] = []
    for number, _, value in _fields(buf):
        if number == 1 and isinstance(value, bytes):
            name = value.decode("utf-8", "replace")
        elif number in (5, 7, 9) and isinstance(value, bytes):
            bodies.append((number, value))
    for number, body in bodies:
        for field, _, point in _fields(body):
            if field != 1 or not isinstance(point, bytes):
                continue
            if number == 9:
                labels, count, total = _histogram_point(point)
                yield Point(name, resource + labels, count, "histogram_count")
                yield Point(name, resource + labels, total, "histogram_sum")
                continue
            labels, number_value = _number_point(point)
            if number_value is not None:
                yield Point(name, resource + labels, number_value,
                            "gauge" if number == 5 else "sum")


def decode_metrics(payload: bytes) -> list[Point]:
    """Every data point of a MetricsData message. ValueError if it does not parse."""
    points: list[Point] = []
    for number, _, rm in _fields(payload):
        if number != 1 or not isinstance(rm, bytes):
            continue
        resource: tuple[tuple[str, str], ...] = ()
        scopes: list[bytes] = []
        for field, _, value in _fields(rm):
            if field == 1 and isinstance(value, bytes):
                resource = tuple(_key_value(kv) for n, _, kv in _fields(value)
                                 if n == 1 and isinstance(kv, bytes))
            elif field == 2 and isinstance(value, bytes):
                scopes.append(value)
        for scope in scopes:
            for field, _, metric in _fields(scope):
                if field == 2 and isinstance(metric, bytes):
                    points.extend(_metric(metric, resource))
    return points
