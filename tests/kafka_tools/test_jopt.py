"""joptsimple's parsing rules, as every Kafka tool applies them."""

from __future__ import annotations

import pytest

from odradek.cli.kafka.jopt import OptionError, Parser


def _parser() -> Parser:
    p = Parser()
    p.option("topic")
    p.option("config")
    p.option("partitions", type="Integer")
    p.flag("create")
    return p


def test_equals_and_space_forms_and_repeats_are_read_alike() -> None:
    p = _parser()
    o = p.parse(["--topic=t", "--config", "a=1", "--config=b=2", "--create", "--partitions", "3"])
    assert o.value(p.specs["topic"]) == "t"
    assert o.all(p.specs["config"]) == ["a=1", "b=2"]
    assert o.int_value(p.specs["partitions"]) == 3 and o.has(p.specs["create"])


def test_an_option_argument_may_look_like_an_option() -> None:
    p = _parser()
    assert p.parse(["--topic", "--create"]).value(p.specs["topic"]) == "--create"


@pytest.mark.parametrize(("argv", "message"), [
    (["--topics", "t"], "topics is not a recognized option"),
    (["--top", "t"], "top is not a recognized option"),  # no abbreviations in Kafka's tools
    (["--topic"], "Option topic requires an argument"),
    (["--partitions", "three"], "Cannot parse argument 'three' of option partitions"),
    (["-x"], "x is not a recognized option"),
])
def test_bad_flags_get_joptsimples_messages(argv: list[str], message: str) -> None:
    with pytest.raises(OptionError, match=f"^{message}$"):
        _parser().parse(argv)


def test_double_dash_ends_the_options() -> None:
    p = _parser()
    o = p.parse(["--create", "--", "--topic", "x"])
    assert o.has(p.specs["create"]) and not o.has(p.specs["topic"])
    assert o.args == ["--topic", "x"]
