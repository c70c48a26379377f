"""Schema inference and merging: Spark's variant schemas in, the lake's policy out. No Spark."""

from __future__ import annotations

import pytest

# the pipeline extra's Arrow, without Spark
pa = pytest.importorskip("pyarrow")

from odradek.pipeline.jsontypes import (  # noqa: E402
    DATE,
    DOUBLE,
    LONG,
    STRING,
    STRUCT,
    JType,
    decimal,
    from_arrow,
    json_error,
    map_of,
    parse_variant_schema,
    prune,
    scalar,
    struct,
    to_arrow,
)
from odradek.pipeline.schema_merge import (  # noqa: E402
    covers,
    expected_plan,
    load_expressions,
    plan_merge,
    struct_loads,
    variant_path,
)


def test_parses_sparks_variant_schema_strings() -> None:
    t = parse_variant_schema(
        "OBJECT<a: DECIMAL(21,1), b: VOID, e: ARRAY<VOID>, n: OBJECT<x: VARIANT, "
        "y: ARRAY<OBJECT<q: BIGINT>>>, o: OBJECT<>, `we ird:``x`: BIGINT, s: STRING>")
    assert t is not None and t.kind == STRUCT
    assert t.names() == ["a", "n", "o", "we ird:`x", "s"]  # VOID fields carry no type yet
    assert t.field("a") == scalar(DOUBLE)
    n = t.field("n")
    assert n is not None and n.field("x") is not None and n.field("x").kind == "mixed"  # type: ignore[union-attr]
    pruned = prune(t)
    assert pruned is not None and "o" not in pruned.names()
    assert parse_variant_schema(None) is None


def test_arrow_round_trip_of_types() -> None:
    t = struct(("a", scalar(LONG)), ("b", struct(("c", scalar(STRING)))),
               ("l", JType("list", element=scalar(DOUBLE))))
    arrow = to_arrow(t)
    assert from_arrow(arrow) == t
    assert from_arrow(pa.int32()).kind == "int"
    declared = struct(("m", map_of(struct(("q", scalar(LONG))))), ("d", scalar(DATE)),
                      ("p", decimal(10, 2)), ("lm", JType("list", element=map_of(
                          scalar(STRING)))))
    assert from_arrow(to_arrow(declared)) == declared
    assert declared.render() == ("struct<m: map<string, struct<q: long>>, d: date, "
                                 "p: decimal(10,2), lm: list<map<string, string>>>")


def test_inferred_json_never_makes_maps_dates_or_decimals() -> None:
    t = parse_variant_schema("OBJECT<p: DECIMAL(10,2), d: DATE, m: OBJECT<k: BIGINT>>")
    assert t == struct(("p", scalar(DOUBLE)), ("d", scalar(STRING)),
                       ("m", struct(("k", scalar(LONG)))))


def test_a_decimal_widens_its_precision_only_at_the_same_scale() -> None:
    table = struct(("price", decimal(10, 2)))
    wider = plan_merge(table, struct(("price", decimal(12, 2))))
    assert wider.evolved and wider.table.field("price") == decimal(12, 2)
    assert not wider.conflicts and wider.loads[0].mode == "cast"
    assert "variant_get(v, '$[\"price\"]', 'decimal(12,2)')" in load_expressions(wider)[0]
    narrower = plan_merge(table, struct(("price", decimal(8, 2))))
    assert not narrower.evolved and narrower.table.field("price") == decimal(10, 2)
    rescaled = plan_merge(table, struct(("price", decimal(12, 3))))
    assert rescaled.table.field("price") == decimal(10, 2)  # never changed under old data
    assert rescaled.table.field("price__string") == scalar(STRING)
    [conflict] = rescaled.conflicts
    assert (conflict.table_type, conflict.seen_type) == ("decimal(10,2)", "decimal(12,3)")
    # a double column (decimals before the lake had them) still takes decimals
    assert not plan_merge(struct(("price", scalar(DOUBLE))),
                          struct(("price", decimal(10, 2)))).conflicts
    with pytest.raises(ValueError, match="no Iceberg form"):
        decimal(39, 2)


def test_map_values_widen_and_a_conflicting_map_keeps_its_text() -> None:
    table = struct(("counts", map_of(JType("int"))), ("day", scalar(DATE)))
    plan = plan_merge(table, struct(("counts", map_of(scalar(LONG))), ("day", scalar(DATE))))
    assert plan.evolved and plan.table.field("counts") == map_of(scalar(LONG))
    assert "'map<string,bigint>'" in load_expressions(plan)[0]
    assert "'date'" in load_expressions(plan)[1]
    clash = plan_merge(table, struct(("counts", map_of(scalar(STRING)))))
    modes = {load.name: load.mode for load in clash.loads}
    assert modes["counts"] == "sibling" and clash.table.field("counts") == table.field("counts")


TABLE = struct(("device_id", scalar(STRING)), ("temperature", scalar(LONG)),
               ("meta", struct(("fw", scalar(STRING)))))


def test_new_fields_are_added_and_missing_ones_are_null() -> None:
    batch = struct(("device_id", scalar(STRING)), ("signal_dbm", scalar(LONG)))
    plan = plan_merge(TABLE, batch)
    assert plan.evolved and plan.table.names() == [
        "device_id", "temperature", "meta", "signal_dbm"]
    modes = {load.name: load.mode for load in plan.loads}
    assert modes == {"device_id": "cast", "temperature": "null", "meta": "null",
                     "signal_dbm": "cast"}
    assert not plan.conflicts


def test_long_values_fit_a_double_column_and_int_widens_to_long() -> None:
    plan = plan_merge(struct(("x", scalar(DOUBLE))), struct(("x", scalar(LONG))))
    assert not plan.conflicts and not plan.evolved
    widened = plan_merge(struct(("x", JType("int"))), struct(("x", scalar(LONG))))
    assert widened.evolved and widened.table.field("x") == scalar(LONG)


def test_nested_new_fields_merge_into_the_struct() -> None:
    plan = plan_merge(TABLE, struct(("meta", struct(("fw", scalar(STRING)),
                                                   ("hw", scalar(LONG))))))
    meta = plan.table.field("meta")
    assert plan.evolved and meta is not None and meta.names() == ["fw", "hw"]


def test_a_conflicting_type_goes_to_a_string_sibling_and_is_recorded() -> None:
    plan = plan_merge(TABLE, struct(("temperature", scalar(DOUBLE))))
    assert plan.table.field("temperature") == scalar(LONG)  # never changed under old data
    assert plan.table.field("temperature__string") == scalar(STRING)
    [conflict] = plan.conflicts
    assert (conflict.column, conflict.table_type, conflict.seen_type) == (
        "temperature", "long", "double")
    exprs = " ".join(load_expressions(plan))
    # row by row: what is an integer stays in the column, the rest is kept as text
    assert "startswith(schema_of_variant" in exprs and "`temperature__string`" in exprs


def test_mixed_types_in_one_batch_make_a_string_column() -> None:
    batch = parse_variant_schema("OBJECT<status: VARIANT>")
    plan = plan_merge(JType(STRUCT), batch)
    assert plan.table.field("status") == scalar(STRING)
    assert plan.conflicts[0].resolution.startswith("mixed types")


def test_anything_fits_a_string_column_and_is_noted() -> None:
    plan = plan_merge(struct(("v", scalar(STRING))), struct(("v", scalar(LONG))))
    assert plan.table.field("v") == scalar(STRING) and plan.loads[0].mode == "cast"
    assert plan.conflicts[0].resolution == "stored as text in the string column"


def test_struct_conflicts_keep_the_whole_value_as_text() -> None:
    plan = plan_merge(TABLE, struct(("meta", scalar(STRING))))
    modes = {load.name: load.mode for load in plan.loads}
    assert modes["meta"] == "sibling" and modes["meta__string"] == "sibling"


def test_a_batch_that_brings_nothing_new_loads_as_expected_before_its_schema_is_known() -> None:
    expected = expected_plan(TABLE)
    # fewer fields than the table (the rest null), or a long into a double column: the same
    # rows as the batch's own plan, so the one-pass load stands
    assert covers(expected, plan_merge(TABLE, struct(("device_id", scalar(STRING)))))
    assert covers(expected, plan_merge(TABLE, TABLE))
    assert covers(expected_plan(struct(("x", scalar(DOUBLE)))),
                  plan_merge(struct(("x", scalar(DOUBLE))), struct(("x", scalar(LONG)))))
    # anything new: a field, a nested field, a wider type, a conflicting value
    for batch in (struct(("signal_dbm", scalar(LONG))),
                  struct(("meta", struct(("hw", scalar(LONG))))),
                  struct(("temperature", scalar(DOUBLE)))):
        assert not covers(expected, plan_merge(TABLE, batch))
    assert not covers(expected_plan(struct(("x", JType("int")))),
                      plan_merge(struct(("x", JType("int"))), struct(("x", scalar(LONG)))))
    # lenient: a value the expected load cannot take reads as null, it does not fail the job
    assert all("try_variant_get" in e for e in load_expressions(expected, lenient=True))


def test_a_column_that_conflicted_last_batch_is_expected_to_conflict_again() -> None:
    conflicting = plan_merge(TABLE, struct(("temperature", scalar(DOUBLE))))
    table = conflicting.table
    again = plan_merge(table, struct(("temperature", scalar(DOUBLE))))
    assert covers(expected_plan(table, conflicting), again)
    assert not covers(expected_plan(table), again)
    # and a batch without the conflict after one with it is loaded again, as cast
    calm = plan_merge(table, struct(("temperature", scalar(LONG))))
    assert not covers(expected_plan(table, conflicting), calm)
    assert covers(expected_plan(table), calm)


def test_the_expected_load_casts_the_object_once_and_routes_per_column() -> None:
    conflicting = plan_merge(TABLE, struct(("temperature", scalar(DOUBLE))))
    cast, exprs = struct_loads(expected_plan(conflicting.table, conflicting))
    assert cast is not None and cast.startswith("try_variant_get(v, '$', 'struct<")
    assert "`device_id`:string" in cast and "temperature" not in cast
    by_column = dict(zip(conflicting.table.names(), exprs, strict=True))
    assert by_column["device_id"] == "_cast.`device_id` AS `device_id`"
    assert "schema_of_variant" in by_column["temperature"]  # routed row by row, as before
    assert "schema_of_variant" in by_column["temperature__string"]


def test_reserved_sibling_of_another_type_is_an_error() -> None:
    table = struct(("x", scalar(LONG)), ("x__string", scalar(LONG)))
    with pytest.raises(ValueError, match="reserved"):
        plan_merge(table, struct(("x", scalar(STRING))))


def test_variant_paths_quote_any_key() -> None:
    assert variant_path("a.b") == '$["a.b"]'
    assert variant_path('say "hi"') == "$['say \"hi\"']"


def test_quarantine_errors_say_what_is_wrong() -> None:
    assert json_error(b'{"a": 1') .startswith("malformed JSON: Expecting")
    assert json_error(b"\xff\xfe{") .startswith("not UTF-8 text")
    assert json_error(b"[1, 2]") == "not a JSON object but a list"
