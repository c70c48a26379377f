"""ruff and mypy are part of the test run: a lint failure fails the suite."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_is_clean() -> None:
    paths = [p for p in ("src", "tests", "bench") if (ROOT / p).exists()]
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", *paths],
        cwd=ROOT, capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_is_clean() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_is_clean_without_the_pipeline_extra(tmp_path: Path) -> None:
    """As if pyspark were not installed (its imports are then Any): the same settings
    with pyspark's modules skipped."""
    config = tmp_path / "mypy.toml"
    config.write_text((ROOT / "pyproject.toml").read_text() + (
        '\n[[tool.mypy.overrides]]\nmodule = ["pyspark", "pyspark.*", "py4j", "py4j.*"]\n'
        'follow_imports = "skip"\n'))
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(config), "src/odradek/pipeline"],
        cwd=ROOT, capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
