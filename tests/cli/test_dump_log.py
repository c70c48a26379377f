"""`odradek dump-log` as a command: files, flags, stdout and stderr, exit status."""

from __future__ import annotations

import struct
from pathlib import Path

import typer
from typer.testing import CliRunner

from odradek.cli.dump_log import dump_log
from odradek.protocol.records import NewRecord, encode_batch

SEGMENT = "00000000000000000000"

app = typer.Typer()
app.command()(dump_log)
runner = CliRunner()


def segment(directory: Path, *values: bytes, base: int = 0) -> Path:
    records = [NewRecord(value=v, timestamp=1) for v in values]
    path = directory / f"{base:020d}.log"
    path.write_bytes(encode_batch(records, base_offset=base, partition_leader_epoch=0))
    return path


def test_positional_files_are_dumped(tmp_path: Path) -> None:
    log = segment(tmp_path, b"hello")

    result = runner.invoke(app, [str(log), "--print-data-log"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[:2] == [f"Dumping {log}", "Log starting offset: 0"]
    assert lines[3].endswith("headerKeys: [] payload: hello")
    assert result.stderr == ""


def test_files_option_takes_kafkas_comma_separated_list(tmp_path: Path) -> None:
    first = segment(tmp_path, b"a")
    second = segment(tmp_path, b"b", base=1)

    result = runner.invoke(app, ["--files", f"{first},{second}", "--deep-iteration"])
    assert result.exit_code == 0, result.output
    dumped = [line for line in result.stdout.splitlines() if line.startswith("Dumping")]
    assert dumped == [f"Dumping {first}", f"Dumping {second}"]
    assert result.stderr.splitlines() == [
        f"Non-consecutive offsets in {second.absolute()}",
        "  -1 is followed by 1",
    ]


def test_missing_file_is_one_line_on_stderr_and_exit_1(tmp_path: Path) -> None:
    missing = tmp_path / f"{SEGMENT}.log"

    result = runner.invoke(app, [str(missing)])
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [f"Dumping {missing}", "Log starting offset: 0"]
    assert result.stderr == f"{missing}: No such file or directory\n"


def test_unknown_file_is_reported_and_the_next_file_still_dumped(tmp_path: Path) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("hi")
    log = segment(tmp_path, b"a")

    result = runner.invoke(app, [str(other), str(log)])
    assert result.exit_code == 1
    assert result.stderr == f"Ignoring unknown file {other}\n"
    assert f"Dumping {log}" in result.stdout
    assert "baseOffset: 0 lastOffset: 0" in result.stdout


def test_corrupt_data_is_one_line_without_a_traceback(tmp_path: Path) -> None:
    log = segment(tmp_path, b"a", base=5)  # a gap Kafka would report, had it finished
    log.write_bytes(log.read_bytes() + struct.pack(">qi", 6, 2) + b"\x00" * 10)

    result = runner.invoke(app, [str(log), "--deep-iteration"])
    assert result.exit_code == 1
    assert result.stderr == (
        f"Found record size 2 smaller than minimum record overhead (14) in file {log}.\n"
    )
    assert "baseOffset: 5" in result.stdout
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_index_mismatch_is_reported_on_stderr_with_exit_1(tmp_path: Path) -> None:
    segment(tmp_path, b"a", b"b")
    index = tmp_path / f"{SEGMENT}.index"
    index.write_bytes(struct.pack(">ii", 0, 0))

    result = runner.invoke(app, ["--files", str(index), "--verify-index-only"])
    assert result.exit_code == 1
    assert result.stdout == f"Dumping {index}\n"
    assert result.stderr.splitlines() == [
        f"Mismatches in :{index.absolute()}",
        "  Index offset: 0, log offset: 1",
    ]


def test_no_files_is_an_error(tmp_path: Path) -> None:
    result = runner.invoke(app, [])
    assert result.exit_code == 1
    assert "--files" in result.stderr


def test_offsets_decoder_flag_decodes_consumer_offsets(tmp_path: Path) -> None:
    key = struct.pack(">hh", 2, 1) + b"g"
    path = tmp_path / f"{SEGMENT}.log"
    path.write_bytes(encode_batch([NewRecord(key=key, value=None, timestamp=1)]))

    result = runner.invoke(app, [str(path), "--offsets-decoder"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[3].endswith(
        'key: {"type":"2","data":{"group":"g"}} payload: <DELETE>'
    )
