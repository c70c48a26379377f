"""docs/testing.md's examples, run as the tests they are: every ```python block whose
first line names a test file (`# test_x.py`) becomes that file in a throw-away project."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

DOC = Path(__file__).resolve().parents[2] / "docs" / "testing.md"
BLOCK = re.compile(r"```python\n# (test_\w+\.py)\n(.*?)```", re.S)


def examples() -> dict[str, str]:
    return {name: body for name, body in BLOCK.findall(DOC.read_text())}


def test_the_documentation_has_its_examples() -> None:
    assert {"test_first.py", "test_fresh.py", "test_async.py", "test_faststream.py",
            "test_retriable.py", "test_fatal.py", "test_rebalance.py", "test_slow.py",
            "test_cluster.py"} <= set(examples())


def test_the_documented_examples_pass(pytester: pytest.Pytester,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("faststream")
    for name, body in examples().items():
        pytester.makepyfile(**{name.removesuffix(".py"): body})
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    monkeypatch.setenv("ODRADEK_TEST_TMPDIR", str(pytester.mkdir("tmp")))
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", timeout=300)
    result.assert_outcomes(passed=sum(body.count("\ndef test_") + body.count("\nasync def test_")
                                      for body in examples().values()))
    assert list((pytester.path / "tmp").iterdir()) == []
