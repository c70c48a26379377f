"""The pipeline's pure-Python tests need no Spark: they run where the pipeline extra's
pyspark is not installed (the Spark tests live in tests/pipeline/spark/)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def test_the_pure_pipeline_tests_import_without_pyspark() -> None:
    modules = sorted(f"tests.pipeline.{p.stem}" for p in HERE.glob("*.py")
                     if p.stem != "__init__")
    assert "tests.pipeline.test_options" in modules
    # None in sys.modules makes every `import pyspark…` raise ImportError
    # (a module that skips itself for want of pyarrow is fine: that is no Spark)
    code = ("import importlib, sys, pytest\n"
            "sys.modules['pyspark'] = None\n"
            f"for m in {modules!r}:\n"
            "    try:\n"
            "        importlib.import_module(m)\n"
            "    except pytest.skip.Exception:\n"
            "        pass\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
