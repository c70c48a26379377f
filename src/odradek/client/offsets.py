"""Where a group's offsets go when they are reset, as kafka-consumer-groups.sh computes
it: earliest, latest, an offset, a date, a duration back, a shift. Shared by `odradek
groups reset-offsets`, `odradek kafka-consumer-groups` and the console."""

from __future__ import annotations

import datetime
import re
from typing import Any

TIMEOUT_S = 30


_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$")


def parse_duration(text: str) -> datetime.timedelta:
    """ISO-8601 durations as kafka-consumer-groups takes them: PnDTnHnMnS."""
    m = _DURATION.match(text.strip().upper())
    if not m or text.strip().upper() in ("P", "PT"):
        raise ValueError(f"invalid duration {text!r}: expected e.g. PT10M or P1DT2H")
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in m.groups())
    return datetime.timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)


def parse_datetime(text: str) -> int:
    """'2024-01-31T10:00:00.000' (UTC unless an offset is given) → epoch milliseconds."""
    value = datetime.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.UTC)
    return int(value.timestamp() * 1000)


def _offsets_for_time(consumer: Any, tps: list[tuple[str, int]], ms: int) -> dict[Any, int]:
    from confluent_kafka import TopicPartition

    found = consumer.offsets_for_times([TopicPartition(t, p, ms) for t, p in tps],
                                       timeout=TIMEOUT_S)
    out = {}
    for tp in found:
        if tp.offset < 0:  # no record at or after that time: the log end
            _, tp.offset = consumer.get_watermark_offsets(tp, timeout=TIMEOUT_S)
        out[(tp.topic, tp.partition)] = tp.offset
    return out


def targets(consumer: Any, tps: list[tuple[str, int]], current: dict[tuple[str, int], Any],
             to_earliest: bool, to_latest: bool, to_offset: int | None,
             to_datetime: str | None, shift_by: int | None, by_duration: str | None
             ) -> dict[tuple[str, int], int]:
    from confluent_kafka import TopicPartition

    if to_datetime is not None:
        return _offsets_for_time(consumer, tps, parse_datetime(to_datetime))
    if by_duration is not None:
        now = datetime.datetime.now(datetime.UTC)
        ms = int((now - parse_duration(by_duration)).timestamp() * 1000)
        return _offsets_for_time(consumer, tps, ms)
    out = {}
    for t, p in tps:
        low, high = consumer.get_watermark_offsets(TopicPartition(t, p), timeout=TIMEOUT_S)
        if to_earliest:
            out[(t, p)] = low
        elif to_latest:
            out[(t, p)] = high
        elif to_offset is not None:
            out[(t, p)] = to_offset
        else:
            assert shift_by is not None
            base = current.get((t, p))
            out[(t, p)] = (low if base is None else base) + shift_by
    return out
