"""Offsets and offset ranges: what a micro-batch or a batch query reads, planned on the driver.

Pure functions over plain values. The offset JSON is Spark's Kafka-source format
(`{"topic": {"0": 42}}`), so an offset copied from a checkpoint or `lake history` can be
handed back as `startingOffsets`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

TopicPartitionKey = tuple[str, int]
Offsets = dict[TopicPartitionKey, int]


def offsets_to_json(offsets: Mapping[TopicPartitionKey, int]) -> dict[str, dict[str, int]]:
    result: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        result.setdefault(topic, {})[str(partition)] = int(offset)
    return result


def offsets_from_json(data: Mapping[str, Mapping[str, int]]) -> Offsets:
    return {(topic, int(p)): int(o) for topic, parts in data.items() for p, o in parts.items()}


@dataclass(frozen=True)
class OffsetRange:
    """Records [start, end) of one partition, read by one Spark task."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)

    def describe(self) -> str:
        return f"{self.topic}-{self.partition} [{self.start}, {self.end})"


@dataclass(frozen=True)
class DataLoss:
    """Records a query needed that the broker no longer has (retention or deletion)."""

    topic: str
    partition: int
    lost_from: int
    lost_to: int  # exclusive: the first offset still available
    reason: str

    def message(self) -> str:
        return (f"offsets [{self.lost_from}, {self.lost_to}) of {self.topic}-{self.partition} "
                f"are no longer available ({self.reason}); the query's checkpoint is older than "
                "the broker's retention. Set failOnDataLoss=false to skip them and go on.")


class DataLossError(RuntimeError):
    def __init__(self, losses: Iterable[DataLoss]) -> None:
        self.losses = list(losses)
        super().__init__("; ".join(loss.message() for loss in self.losses))


def find_data_loss(start: Mapping[TopicPartitionKey, int],
                   earliest: Mapping[TopicPartitionKey, int],
                   latest: Mapping[TopicPartitionKey, int]) -> list[DataLoss]:
    """Partitions whose wanted start lies before what the broker still keeps.

    A start beyond the log end means the log was truncated or the topic recreated:
    the records between are gone too, as far as this query can tell.
    """
    losses = []
    for tp, wanted in sorted(start.items()):
        if tp not in earliest:
            continue
        if wanted < earliest[tp]:
            losses.append(DataLoss(tp[0], tp[1], wanted, earliest[tp], "deleted by retention"))
        elif tp in latest and wanted > latest[tp]:
            losses.append(DataLoss(tp[0], tp[1], latest[tp], wanted,
                                   "the partition now ends before them (recreated or "
                                   "truncated)"))
    return losses


def clamp_to_available(start: Mapping[TopicPartitionKey, int],
                       earliest: Mapping[TopicPartitionKey, int],
                       latest: Mapping[TopicPartitionKey, int]) -> Offsets:
    """Where reading goes on after skipping lost records (failOnDataLoss=false)."""
    result = dict(start)
    for tp, wanted in start.items():
        if tp in earliest and wanted < earliest[tp]:
            result[tp] = earliest[tp]
        elif tp in latest and wanted > latest[tp]:
            result[tp] = earliest.get(tp, latest[tp])
    return result


def rate_limit(start: Mapping[TopicPartitionKey, int], latest: Mapping[TopicPartitionKey, int],
               max_records: int) -> Offsets:
    """End offsets that admit at most `max_records`, shared in proportion to each lag.

    Every partition with a lag gets its share rounded down; what rounding left over goes to
    the partitions with the largest lag, so the batch admits exactly `max_records` and a
    single record of lag is never starved behind a big partition forever.
    """
    lags = {tp: max(0, latest[tp] - start.get(tp, latest[tp])) for tp in latest}
    total = sum(lags.values())
    if total <= max_records:
        return dict(latest)
    shares = {tp: (lag * max_records) // total for tp, lag in lags.items()}
    left = max_records - sum(shares.values())
    for tp in sorted(lags, key=lambda k: (-(lags[k] - shares[k]), k)):
        if left <= 0:
            break
        if shares[tp] < lags[tp]:
            shares[tp] += 1
            left -= 1
    return {tp: start.get(tp, latest[tp]) + shares[tp] for tp in latest}


def cap(end: Mapping[TopicPartitionKey, int],
        ceiling: Mapping[TopicPartitionKey, int]) -> Offsets:
    """End offsets no further than `ceiling` (Trigger.AvailableNow's target)."""
    return {tp: min(offset, ceiling[tp]) if tp in ceiling else offset
            for tp, offset in end.items()}


def plan_ranges(start: Mapping[TopicPartitionKey, int], end: Mapping[TopicPartitionKey, int],
                min_partitions: int | None = None) -> list[OffsetRange]:
    """One range per partition with records, split so at least `min_partitions` tasks run.

    As in Spark, a big partition is cut into several offset ranges in proportion to its
    size, so one hot partition is read by several tasks in parallel.
    """
    ranges = [OffsetRange(t, p, start.get((t, p), e), e) for (t, p), e in sorted(end.items())]
    ranges = [r for r in ranges if r.size > 0]
    if not min_partitions or min_partitions <= len(ranges):
        return ranges
    total = sum(r.size for r in ranges)
    result: list[OffsetRange] = []
    for r in ranges:
        parts = max(1, min(r.size, math.floor(r.size * min_partitions / total + 0.5)))
        step, extra = divmod(r.size, parts)
        offset = r.start
        for i in range(parts):
            length = step + (1 if i < extra else 0)
            result.append(OffsetRange(r.topic, r.partition, offset, offset + length))
            offset += length
    return result
