"""`odradek lake` commands' bad input: one line and a non-zero exit, nothing started."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from odradek.cli.lake import app as lake_app

runner = CliRunner()


def test_ingest_refuses_a_spark_setting_without_a_value(tmp_path: Path) -> None:
    result = runner.invoke(lake_app, ["ingest", "--table", "iot.x", "--topic", "t",
                                      "--data-dir", str(tmp_path), "--conf", "spark.cores.max"])
    assert result.exit_code != 0
    assert "--conf spark.cores.max: give KEY=VALUE" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "lake").exists()  # refused before anything was made
