"""Merge a micro-batch's inferred schema into the table's, and say how to load each column.

The policy (documented in docs/pipeline.md, recorded in the catalog when it applies):
- a field seen for the first time becomes a new optional column;
- Iceberg's safe widenings evolve the column (int → long, float → double, decimal(P, S)
  → decimal(P', S) with P' > P: the scale never changes); values that convert without
  loss are cast (long values into a double column, anything into string);
- a field whose values in one batch mix incompatible types becomes a string column;
- a value whose type conflicts with the column's is never dropped and never coerced:
  it lands, as JSON text, in a sibling string column `<name>__string`, and the conflict
  is recorded;
- a column the batch lacks is null for the batch's rows.
Pure: renders Spark SQL expressions as strings, runs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from odradek.pipeline.jsontypes import (
    BOOLEAN,
    DECIMAL,
    DOUBLE,
    FLOAT,
    INT,
    LIST,
    LONG,
    MAP,
    MIXED,
    STRING,
    STRUCT,
    JType,
    spark_ddl,
)

SIBLING_SUFFIX = "__string"

# schema_of_variant() names of the row types each scalar column takes without loss.
_ACCEPTS = {
    LONG: ("BIGINT", "INT", "SMALLINT", "TINYINT"),
    INT: ("INT", "SMALLINT", "TINYINT"),
    DOUBLE: ("BIGINT", "INT", "SMALLINT", "TINYINT", "DOUBLE", "FLOAT", "DECIMAL"),
    FLOAT: ("FLOAT",),
    BOOLEAN: ("BOOLEAN",),
}


@dataclass(frozen=True)
class Conflict:
    column: str
    table_type: str
    seen_type: str
    resolution: str

    def as_dict(self) -> dict[str, str]:
        return {"column": self.column, "table_type": self.table_type,
                "seen_type": self.seen_type, "resolution": self.resolution}


@dataclass(frozen=True)
class ColumnLoad:
    """How one table column is filled from the batch's parsed variant `v`."""

    name: str
    type: JType
    mode: str  # "cast" | "null" | "route" | "sibling"
    sibling_of: str | None = None  # for the sibling string column: the column it serves


@dataclass
class MergePlan:
    table: JType  # every data column after this batch, in order
    loads: list[ColumnLoad] = field(default_factory=list)
    conflicts: list[Conflict] = field(default_factory=list)
    evolved: bool = False


def _merge_into(table_t: JType, batch_t: JType) -> JType | None:
    """The column type that holds both; None when a value of batch_t would not fit.

    A string column holds anything (numbers and objects as their JSON text).
    """
    tk, bk = table_t.kind, batch_t.kind
    if tk == STRING:
        return table_t
    if tk == DECIMAL and bk == DECIMAL:
        if table_t.scale != batch_t.scale:
            return None  # Iceberg never changes a decimal's scale
        return table_t if table_t.precision >= batch_t.precision else batch_t
    if tk == bk and tk not in (STRUCT, LIST, MAP):
        return table_t
    if tk == LONG and bk == INT:
        return table_t
    if tk == INT and bk == LONG:
        return JType(LONG)  # Iceberg int → long
    if tk == DOUBLE and bk in (LONG, INT, FLOAT, DECIMAL):
        return table_t  # decimals went to double columns before the lake had decimals
    if tk == FLOAT and bk in (DOUBLE, LONG, INT):
        return JType(DOUBLE)  # Iceberg float → double
    if tk == STRUCT and bk == STRUCT:
        merged = list(table_t.fields)
        for name, sub in batch_t.fields:
            current = table_t.field(name)
            if current is None:
                merged.append((name, _resolve_mixed(sub)))
                continue
            joined = _merge_into(current, sub)
            if joined is None:
                return None
            merged = [(n, joined if n == name else t) for n, t in merged]
        return JType(STRUCT, tuple(merged))
    if tk == LIST and bk == LIST:
        assert table_t.element is not None and batch_t.element is not None
        element = _merge_into(table_t.element, batch_t.element)
        return None if element is None else JType(LIST, element=element)
    if tk == MAP and bk == MAP:
        assert table_t.element is not None and batch_t.element is not None
        values = _merge_into(table_t.element, batch_t.element)
        return None if values is None else JType(MAP, element=values)
    return None


def _resolve_mixed(t: JType) -> JType:
    """A new column's type: mixed values anywhere inside become strings."""
    if t.kind == MIXED:
        return JType(STRING)
    if t.kind == STRUCT:
        return JType(STRUCT, tuple((n, _resolve_mixed(f)) for n, f in t.fields))
    if t.kind in (LIST, MAP):
        assert t.element is not None
        return JType(t.kind, element=_resolve_mixed(t.element))
    return t


def _has_mixed(t: JType) -> bool:
    if t.kind == MIXED:
        return True
    if t.kind in (LIST, MAP):
        return t.element is not None and _has_mixed(t.element)
    return any(_has_mixed(f) for _, f in t.fields)


def plan_merge(table: JType, batch: JType | None) -> MergePlan:
    """How this batch's columns map onto the table's, and how the table must evolve."""
    batch = batch or JType(STRUCT, ())
    merged: list[tuple[str, JType]] = list(table.fields)
    plan = MergePlan(table)
    loads: dict[str, ColumnLoad] = {}

    def set_type(name: str, t: JType) -> None:
        nonlocal merged
        if any(n == name for n, _ in merged):
            merged = [(n, t if n == name else old) for n, old in merged]
        else:
            merged.append((name, t))
            plan.evolved = True

    for name, seen in batch.fields:
        current = table.field(name)
        if current is None:
            t = _resolve_mixed(seen)
            set_type(name, t)
            loads[name] = ColumnLoad(name, t, "cast")
            if _has_mixed(seen):
                plan.conflicts.append(Conflict(name, "(new)", seen.render(),
                                               "mixed types in one batch: stored as string"))
            continue
        joined = _merge_into(current, seen)
        if joined is not None:
            if joined != current:
                plan.evolved = True
                set_type(name, joined)
            loads[name] = ColumnLoad(name, joined, "cast")
            if seen.kind != current.kind and current.kind == STRING:
                plan.conflicts.append(Conflict(name, current.render(), seen.render(),
                                               "stored as text in the string column"))
            continue
        sibling = name + SIBLING_SUFFIX
        sibling_t = table.field(sibling)
        if sibling_t is not None and sibling_t.kind != STRING:
            raise ValueError(f"column {sibling} exists with type {sibling_t.render()}; "
                             "it is reserved for values that conflict with " + name)
        set_type(sibling, JType(STRING))
        mode = "route" if current.kind in _ACCEPTS else "sibling"
        loads[name] = ColumnLoad(name, current, mode)
        loads[sibling] = ColumnLoad(sibling, JType(STRING), mode, sibling_of=name)
        plan.conflicts.append(Conflict(
            name, current.render(), seen.render(),
            f"values that do not fit {current.render()} kept as JSON text in {sibling}"))
    plan.table = JType(STRUCT, tuple(merged))
    plan.loads = [loads.get(n) or ColumnLoad(n, t, "null") for n, t in merged]
    return plan


def variant_path(name: str) -> str:
    """A variant path literal for a top-level key, whatever characters it has."""
    if '"' not in name:
        return "$[\"" + name.replace("\\", "\\\\") + "\"]"
    return "$['" + name.replace("\\", "\\\\").replace("'", "\\'") + "']"


def sql_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def quote_ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _fits_expr(owner: JType, kind_expr: str) -> str:
    return "(" + " OR ".join(f"startswith({kind_expr}, '{k}')" for k in _ACCEPTS[owner.kind]) + ")"


def expected_plan(table: JType, last: MergePlan | None = None) -> MergePlan:
    """The plan a batch that brings nothing new gets, to load it before its schema is known.

    Every column is cast from its key (a key the batch lacks reads as null, as the "null"
    load would make it); a column the last batch routed keeps its routing, as a producer
    that sent a conflicting type once tends to send it again.
    """
    routed = {load.name: load for load in (last.loads if last is not None else [])
              if load.mode in ("route", "sibling")}
    if last is None or last.table != table:
        routed = {}
    plan = MergePlan(table)
    plan.loads = [routed.get(n) or ColumnLoad(n, t, "cast") for n, t in table.fields]
    return plan


def covers(expected: MergePlan, actual: MergePlan) -> bool:
    """Would loading with `expected` write exactly the rows `actual` would?

    A cast of a key the batch lacks (or holds only nulls in) gives the null that a "null"
    load gives; anything else must match column by column.
    """
    if actual.evolved or len(expected.loads) != len(actual.loads):
        return False
    for e, a in zip(expected.loads, actual.loads, strict=True):
        if (e.name, e.type, e.sibling_of) != (a.name, a.type, a.sibling_of):
            return False
        if e.mode != a.mode and not (e.mode == "cast" and a.mode == "null"):
            return False
    return True


def load_expression(load: ColumnLoad, owner: ColumnLoad | None = None,
                    variant_col: str = "v", lenient: bool = False) -> str:
    """The Spark SQL expression that fills one column from the parsed variant.

    `owner` is the conflicting column a sibling serves (for siblings only). `lenient`
    casts with try_variant_get: a value that does not fit reads as null instead of
    failing the job (for a load planned before the batch's schema is known, which is
    thrown away when the batch turns out to hold such a value).
    """
    target = spark_ddl(load.type)
    alias = quote_ident(load.name)
    if load.mode == "null":
        return f"CAST(NULL AS {target}) AS {alias}"
    source = load.sibling_of or load.name
    path = sql_string(variant_path(source))
    value = f"variant_get({variant_col}, {path}, {sql_string(target)})"
    if load.mode == "cast":
        if lenient:
            return f"try_{value} AS {alias}"
        return f"{value} AS {alias}"
    kind_expr = f"schema_of_variant(variant_get({variant_col}, {path}))"
    present = f"{kind_expr} NOT IN ('VOID', 'NULL')"
    if load.mode == "sibling":
        # A struct or list column met something else: the batch's values go whole, as text.
        if load.sibling_of is None:
            return f"CAST(NULL AS {target}) AS {alias}"
        return f"CASE WHEN {present} THEN {value} END AS {alias}"
    # "route": row by row, what fits the column goes there and the rest to the sibling.
    if load.sibling_of is None:
        return f"CASE WHEN {_fits_expr(load.type, kind_expr)} THEN {value} END AS {alias}"
    assert owner is not None
    return (f"CASE WHEN NOT {_fits_expr(owner.type, kind_expr)} AND {present} "
            f"THEN {value} END AS {alias}")


def load_expressions(plan: MergePlan, variant_col: str = "v",
                     lenient: bool = False) -> list[str]:
    by_name = {load.name: load for load in plan.loads}
    return [load_expression(load, by_name.get(load.sibling_of or ""), variant_col, lenient)
            for load in plan.loads]


CAST_COLUMN = "_cast"


def struct_loads(plan: MergePlan, variant_col: str = "v") -> tuple[str | None, list[str]]:
    """Lenient loads that read the object once: an expression (named CAST_COLUMN) that
    casts it to a struct of every "cast" column, and each column's expression over it
    and the variant. Casting the whole object costs half what a variant_get a column
    does; a value that does not fit makes the whole struct null, which is fine where the
    load is thrown away when the batch holds such a value (see `covers`)."""
    casts = [load for load in plan.loads if load.mode == "cast"]
    if not casts:
        return None, load_expressions(plan, variant_col, lenient=True)
    ddl = spark_ddl(JType(STRUCT, tuple((load.name, load.type) for load in casts)))
    pre = f"try_variant_get({variant_col}, '$', {sql_string(ddl)}) AS {CAST_COLUMN}"
    by_name = {load.name: load for load in plan.loads}
    return pre, [f"{CAST_COLUMN}.{quote_ident(load.name)} AS {quote_ident(load.name)}"
                 if load.mode == "cast"
                 else load_expression(load, by_name.get(load.sibling_of or ""), variant_col)
                 for load in plan.loads]
