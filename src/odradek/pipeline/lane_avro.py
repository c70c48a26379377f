"""The Arrow lane for registry-framed Avro: each Spark task decodes its values by schema id
straight into Arrow columns (avro_arrow) and writes the Parquet itself.

The Spark path (lake_writer) decodes each value to JSON with registry_values'
FramedDecoder, parses that into a variant and casts it into the columns of
plan_merge(table, declared types of the batch's ids). The lane lands the same: a task
decodes a chunk's values into the columns of plan_merge(table, declared types of the ids
its values decoded with so far), which avro_arrow reproduces exactly (or refuses); it
answers the ids it decoded, and the driver makes the batch's plan from all tasks' ids —
the plan the Spark path makes — and casts a file whose columns are narrower (another task
saw a newer version) into it (arrow_lane.conform: only exact casts, else the Spark path).

Bad records get FramedDecoder's reasons: a value not in Confluent's framing, of an id the
registry lacks, or whose body does not decode. A null value is a row of nulls, as the
Spark path's 'empty' rows. A schema that is not Avro, has no column form, or holds what
avro_arrow does not reproduce sends the batch to the Spark path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from odradek.pipeline.arrow_lane import META, Fallback, _Task
from odradek.pipeline.avro_arrow import AvroUnsupported, FramedAvro, distinct, schema_ids
from odradek.pipeline.jsontypes import STRUCT, JType, to_arrow
from odradek.pipeline.registry_values import FramedDecoder
from odradek.pipeline.schema_merge import MergePlan, plan_merge


def registry_plan(decoder: FramedDecoder, table: JType, ids: set[int]) -> MergePlan:
    """The plan the Spark path makes for a batch whose good values have these ids."""
    return plan_merge(table, decoder.declared_type(sorted(ids)) if ids else None)


@dataclass
class RegistryTask(_Task):
    """A lane task of registry-framed values (LaneSpec.avro is the FramedDecoder)."""

    good_ids: set[int] = field(default_factory=set)  # ids of values decoded and written
    _framed: dict[JType, FramedAvro] = field(default_factory=dict)

    @property
    def decoder(self) -> FramedDecoder:
        assert isinstance(self.spec.avro, FramedDecoder)
        return self.spec.avro

    def chunk(self, batch: pa.Table) -> None:
        self._note_ends(batch)
        values = batch.column("value").combine_chunks()
        ids = schema_ids(values)
        seen = set(distinct(ids[ids >= 0]))
        target = self._target(seen | self.good_ids)
        data, errors = self._decode(values, ids, target)
        keep = np.ones(len(values), bool)
        keep[list(errors)] = False
        good = set(distinct(ids[keep & (ids >= 0)])) | self.good_ids
        if good != seen | self.good_ids:
            # an id whose every value here was bad: the batch's plan leaves it out (the
            # Spark path declares the ids of good values), so this file must too; its
            # values keep their reasons, the others are decoded again
            narrower = self._target(good)
            if narrower != target:
                again = ~np.isin(ids, list(seen - good))
                data, found = self._decode(values.filter(pa.array(again)), ids[again],
                                           narrower)
                where = np.flatnonzero(again)
                errors = {**{i: why for i, why in errors.items() if not again[i]},
                          **{int(where[j]): why for j, why in found.items()}}
                keep = np.ones(len(values), bool)
                keep[list(errors)] = False
        self.good_ids = good
        for i, why in errors.items():
            self._quarantine(batch, i, values[i].as_py())
            self.bad[-1]["error"] = why
        rows = batch if keep.all() else pc.filter(batch, pa.array(keep))
        if rows.num_rows:
            self._write(rows, data)

    def _target(self, ids: set[int]) -> JType:
        """The columns the values of these ids land in: the plan's table."""
        for schema_id in ids:
            self._usable(schema_id)
        plan = registry_plan(self.decoder, self.spec.table, ids)
        if plan.conflicts:
            raise Fallback(f"a conflict on {plan.conflicts[0].column}")
        return plan.table

    def _usable(self, schema_id: int) -> None:
        """Fallback for an id the registry has whose schema has no column form (the Spark
        path infers those values' types); an id it lacks is the values' reason."""
        try:
            self.decoder._reader(schema_id)
        except Exception:  # FramedAvro gives the values FramedDecoder's reason
            return
        declared = self.decoder._types.get(schema_id)
        if declared is None or declared.kind != STRUCT:
            raise Fallback(f"schema id {schema_id} has no declared columns")

    def _decode(self, values: pa.Array, ids: np.ndarray, target: JType
                ) -> tuple[pa.Table, dict[int, str]]:
        framed = self._framed.get(target)
        if framed is None:
            framed = self._framed[target] = FramedAvro(self.decoder, target)
        try:
            return framed.decode(values, ids)
        except AvroUnsupported as e:
            raise Fallback(f"Avro: {e}") from None

    def answers(self) -> list[dict[str, object]]:
        return [{"kind": "id", "offset": i} for i in sorted(self.good_ids)]


def lane_ids(answers: Sequence[Any]) -> set[int]:
    """The schema ids the tasks decoded good values with (their answer rows)."""
    return {int(a["offset"]) for a in answers if a["kind"] == "id"}


def exact_cast(source: pa.DataType, target: pa.DataType) -> bool:
    """Whether arrow_lane.conform's cast of a column from `source` into `target` gives
    what the Spark path lands for the same values (its variant cast into the target):
    the same type, an integer or float widened (a safe cast refuses an integer a float
    does not hold exactly), a decimal's precision widened, structs by name (a field the
    file lacks is null), lists and maps by element. Anything else (a long into a string
    column: Spark's text of a number) is not reproduced."""
    if source == target:
        return True
    numbers = (pa.int32(), pa.int64(), pa.float32(), pa.float64())
    if source in numbers and target in numbers:
        return numbers.index(source) < numbers.index(target)
    if pa.types.is_decimal(source) and pa.types.is_decimal(target):
        return bool(source.scale == target.scale and source.precision <= target.precision)
    if pa.types.is_struct(source) and pa.types.is_struct(target):
        mine = {f.name: f.type for f in source}
        names = {f.name for f in target}
        return set(mine) <= names and all(
            exact_cast(mine[f.name], f.type) for f in target if f.name in mine)
    if pa.types.is_map(source) and pa.types.is_map(target):
        return source.key_type == target.key_type and exact_cast(source.item_type,
                                                                 target.item_type)
    if pa.types.is_list(source) and pa.types.is_list(target):
        return exact_cast(source.value_type, target.value_type)
    return False


def narrower(schemas: list[pa.Schema], plan: MergePlan) -> list[str]:
    """Why a registry lane file's columns cannot be cast into the plan's exactly
    (they are narrower where another task decoded a newer schema version)."""
    for schema in schemas:
        for f in schema:
            if f.name in META:
                continue
            t = plan.table.field(f.name)
            if t is None or not exact_cast(f.type, to_arrow(t)):
                return [f"{f.name}: a {f.type} column is not cast into the plan's"]
    return []
