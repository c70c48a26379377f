"""The `odradek` Python Data Source: Kafka topics as a Spark batch or streaming DataFrame.

Planning (which offsets a batch covers) happens on the driver through `ClusterView`;
reading happens in Spark tasks through `RangeReader`. Spark's checkpoint holds the
offsets; the consumer group only mirrors them for lag tools.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from odradek.pipeline.cluster_view import ClusterView
from odradek.pipeline.offsets import (
    DataLossError,
    OffsetRange,
    Offsets,
    TopicPartitionKey,
    cap,
    clamp_to_available,
    find_data_loss,
    offsets_from_json,
    offsets_to_json,
    plan_ranges,
    rate_limit,
)
from odradek.pipeline.options import (
    EARLIEST,
    LATEST,
    OffsetSpec,
    OptionError,
    SourceOptions,
    parse_options,
)
from odradek.pipeline.range_reader import (
    RANGES_SCHEMA,
    SPARK_SCHEMA,
    SPARK_SCHEMA_WITH_HEADERS,
    RangeReader,
)

log = logging.getLogger(__name__)


def _read(options: SourceOptions, rng: OffsetRange) -> Iterator[Any]:
    if options.ranges_only:
        return iter([(rng.topic, rng.partition, rng.start, rng.end)])
    return RangeReader(options, rng).batches()


class RangePartition(InputPartition):
    """One Spark task's share: an offset range of one Kafka partition."""

    def __init__(self, rng: OffsetRange) -> None:
        super().__init__(rng)
        self.range = rng


def resolve(view: ClusterView, spec: OffsetSpec, tps: Sequence[TopicPartitionKey],
            options: SourceOptions, ending: bool) -> Offsets:
    """Turn an offset spec into concrete offsets for these partitions."""
    if not tps:
        return {}
    if spec.kind == "earliest":
        return view.earliest(tps)
    if spec.kind == "latest":
        return view.latest(tps)
    if spec.kind == "offsets":
        wanted = {(t, p): o for t, parts in spec.per_partition.items() for p, o in parts.items()}
        unknown = sorted(set(wanted) - set(tps))
        if unknown:
            raise OptionError("offsets given for partitions outside the subscription: "
                              + ", ".join(f"{t}-{p}" for t, p in unknown))
        # Partitions the JSON leaves out start at the beginning (and end at the end).
        missing = [tp for tp in tps if tp not in wanted]
        defaults = view.latest(missing) if ending else view.earliest(missing)
        need_earliest = [tp for tp, o in wanted.items() if o == EARLIEST]
        need_latest = [tp for tp, o in wanted.items() if o == LATEST]
        resolved = {**defaults, **wanted}
        resolved.update(view.earliest(need_earliest))
        resolved.update(view.latest(need_latest))
        return resolved
    if spec.kind == "timestamp":
        assert spec.timestamp_ms is not None
        times = {tp: spec.timestamp_ms for tp in tps}
    else:
        times = {(t, p): ts for t, parts in spec.per_partition.items() for p, ts in parts.items()}
        missing = [tp for tp in tps if tp not in times]
        if missing:
            raise OptionError("offsets by timestamp must name every partition; missing "
                              + ", ".join(f"{t}-{p}" for t, p in missing))
    found = view.for_times(times)
    unmatched = [tp for tp, o in found.items() if o < 0]
    if unmatched and not ending and options.by_timestamp_strategy == "error":
        raise OptionError(
            "no record at or after the starting timestamp in "
            + ", ".join(f"{t}-{p}" for t, p in sorted(unmatched))
            + " (set startingOffsetsByTimestampStrategy=latest to start at the end)")
    found.update(view.latest(unmatched))
    return found


class OdradekBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        view = ClusterView(self.options)
        try:
            tps = view.partitions()
            start = resolve(view, self.options.starting, tps, self.options, ending=False)
            end = resolve(view, self.options.ending, tps, self.options, ending=True)
            if self.options.starting.kind == "offsets":
                losses = find_data_loss(start, view.earliest(tps), end)
                if losses and self.options.fail_on_data_loss:
                    raise DataLossError(losses)
                for loss in losses:
                    log.warning("skipping lost records: %s", loss.message())
                start = clamp_to_available(start, view.earliest(tps), end)
        finally:
            view.close()
        return [RangePartition(r) for r in plan_ranges(start, end, self.options.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, RangePartition)
        return _read(self.options, partition.range)


class OdradekStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._view: ClusterView | None = None
        self._target: Offsets | None = None  # Trigger.AvailableNow's end
        self._latest: Offsets = {}

    def __getstate__(self) -> dict[str, Any]:
        # Tasks get a copy of the reader; the driver's broker clients stay on the driver.
        state = dict(self.__dict__)
        state["_view"] = None
        return state

    @property
    def view(self) -> ClusterView:
        if self._view is None:
            self._view = ClusterView(self.options)
        return self._view

    def initialOffset(self) -> dict[str, Any]:
        tps = self.view.partitions()
        return offsets_to_json(resolve(self.view, self.options.starting, tps, self.options,
                                       ending=False))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self.view.latest(self.view.partitions())

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin = offsets_from_json(start)
        # Everything before `start` has been processed when Spark plans the next batch, so
        # this is the earliest moment the group can show it (commit() comes a batch later).
        self.view.commit_to_group(begin)
        tps = self.view.partitions()
        new = [tp for tp in tps if tp not in begin]
        if new:
            log.info("new partitions %s start at earliest", new)
        from_offsets = {**begin, **self.view.earliest(new)}
        latest = self.view.latest(tps)
        self._latest = dict(latest)
        if self._target is not None:
            latest = cap(latest, {tp: self._target.get(tp, from_offsets.get(tp, 0))
                                  for tp in latest})
        losses = find_data_loss(begin, self.view.earliest(list(begin)), latest)
        if losses:
            if self.options.fail_on_data_loss:
                raise DataLossError(losses)
            for loss in losses:
                log.warning("skipping lost records: %s", loss.message())
            from_offsets = clamp_to_available(from_offsets, self.view.earliest(list(begin)),
                                              latest)
        end = {tp: max(latest.get(tp, o), o) for tp, o in from_offsets.items()}
        end.update({tp: o for tp, o in latest.items() if tp not in end})
        if isinstance(limit, ReadMaxRows):
            end = rate_limit(from_offsets, end, limit.max_rows)
        elif isinstance(limit, ReadMinRows) and sum(
                end[tp] - from_offsets.get(tp, end[tp]) for tp in end) < limit.min_rows:
            return start
        # Partitions that vanished keep their last offset so the checkpoint stays whole.
        for tp, offset in begin.items():
            end.setdefault(tp, offset)
        return offsets_to_json(end)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return offsets_to_json(self._latest) if self._latest else None

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin = offsets_from_json(start)
        finish = offsets_from_json(end)
        new = [tp for tp in finish if tp not in begin]
        if new:
            begin.update(self.view.earliest(new))
        if not self.options.fail_on_data_loss:
            begin = clamp_to_available(begin, self.view.earliest(list(finish)), finish)
        return [RangePartition(r)
                for r in plan_ranges(begin, finish, self.options.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, RangePartition)
        return _read(self.options, partition.range)

    def commit(self, end: dict[str, Any]) -> None:
        self.view.commit_to_group(offsets_from_json(end))

    def stop(self) -> None:
        if self._view is not None:
            self._view.close()
            self._view = None


class OdradekDataSource(DataSource):
    """`spark.read.format("odradek")` / `readStream` / `write` / `writeStream`."""

    @classmethod
    def name(cls) -> str:
        return "odradek"

    def schema(self) -> str:
        lowered = {k.lower(): str(v).lower() for k, v in self.options.items()}
        if lowered.get("rangesonly") == "true":
            return RANGES_SCHEMA
        include = lowered.get("includeheaders") == "true"
        return SPARK_SCHEMA_WITH_HEADERS if include else SPARK_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return OdradekBatchReader(parse_options(dict(self.options), streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return OdradekStreamReader(parse_options(dict(self.options), streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from odradek.pipeline.sink import OdradekBatchWriter, SinkOptions

        return OdradekBatchWriter(SinkOptions.parse(dict(self.options), schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from odradek.pipeline.sink import OdradekStreamWriter, SinkOptions

        return OdradekStreamWriter(SinkOptions.parse(dict(self.options), schema))


def options_for(raw: Mapping[str, str], streaming: bool) -> SourceOptions:
    """The parsed options, for callers (the lake job) that plan around the source."""
    return parse_options(raw, streaming)
