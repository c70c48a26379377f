"""`odradek dump-log`: Kafka's `kafka-run-class kafka.tools.DumpLogSegments`.

Same flags, same output, so scripts written against Kafka's tool read ours. Files come
positionally or, as Kafka takes them, as `--files a,b`. Output goes to stdout as it is
produced (a segment is dumped batch by batch, never held in memory); problems go to
stderr. The exit status is 1 when a file could not be dumped (missing, unknown,
corrupt) or an index disagrees with its log, 0 otherwise.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import NoReturn

import typer

from odradek.storage.dump import (
    DEFAULT_MAX_MESSAGE_SIZE,
    Decoder,
    DumpError,
    DumpOptions,
    DumpProblems,
    FileSkipped,
    dump_file,
)
from odradek.storage.dump_batches import INT32_MAX


def dump_log(
    files: list[Path] | None = typer.Argument(
        None, help="Segment, index, snapshot or checkpoint files to dump", show_default=False
    ),
    files_csv: list[str] | None = typer.Option(
        None, "--files", help="Comma-separated files, as Kafka's tool takes them",
        show_default=False,
    ),
    print_data_log: bool = typer.Option(
        False, "--print-data-log",
        help="Print the records' keys and values (implies --deep-iteration)",
    ),
    deep_iteration: bool = typer.Option(
        False, "--deep-iteration", help="Print every record, not only the batches"
    ),
    max_bytes: int = typer.Option(
        INT32_MAX, "--max-bytes", help="Read at most this many bytes of each .log file"
    ),
    index_sanity_check: bool = typer.Option(
        False, "--index-sanity-check",
        help="Only run the check a broker runs on an index at startup",
    ),
    verify_index_only: bool = typer.Option(
        False, "--verify-index-only", help="Check indexes against the log without printing them"
    ),
    offsets_decoder: bool = typer.Option(
        False, "--offsets-decoder", help="Decode records as __consumer_offsets records"
    ),
    transaction_log_decoder: bool = typer.Option(
        False, "--transaction-log-decoder", help="Decode records as __transaction_state records"
    ),
    max_message_size: int = typer.Option(
        DEFAULT_MAX_MESSAGE_SIZE, "--max-message-size",
        help="Size of the largest batch, when checking an index",
    ),
    skip_record_metadata: bool = typer.Option(
        False, "--skip-record-metadata",
        help="Print records' contents only (and no control records)",
    ),
) -> None:
    """Dump log segments and their indexes as Kafka's DumpLogSegments does."""
    paths = list(files or [])
    for item in files_csv or []:
        paths.extend(Path(name) for name in item.split(",") if name)
    if not paths:
        _die("Missing required argument \"[files]\" (or --files)")
    if not 0 <= max_bytes <= INT32_MAX:
        _die(f"--max-bytes must be between 0 and {INT32_MAX}")
    if not 0 <= max_message_size <= INT32_MAX:
        _die(f"--max-message-size must be between 0 and {INT32_MAX}")
    if offsets_decoder and transaction_log_decoder:
        _die("--offsets-decoder and --transaction-log-decoder cannot be used together")
    options = DumpOptions(
        print_data_log=print_data_log,
        deep_iteration=deep_iteration,
        max_bytes=max_bytes,
        max_message_size=max_message_size,
        index_sanity_check=index_sanity_check,
        verify_index_only=verify_index_only,
        decoder=(
            Decoder.OFFSETS if offsets_decoder
            else Decoder.TRANSACTION_LOG if transaction_log_decoder
            else Decoder.STRING
        ),
        skip_record_metadata=skip_record_metadata,
    )  # fmt: skip
    raise typer.Exit(_run(paths, options))


def _run(paths: list[Path], options: DumpOptions) -> int:
    # Java prints what the terminal cannot show as '?'; Python would raise.
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(errors="replace")
    problems = DumpProblems()
    status = 0
    try:
        for path in paths:
            try:
                _write(dump_file(path, options, problems))
            except FileSkipped as exc:
                # Kafka reports these and carries on with the next file.
                _error(str(exc))
                status = 1
            except DumpError as exc:
                # Kafka dies here, before its end-of-run reports: one line only.
                _error(str(exc))
                return 1
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, and keep Python from
        # complaining when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    for line in problems.lines():
        _error(line)
    return 1 if problems.index_problems else status


def _write(lines: Iterable[str]) -> None:
    out = sys.stdout
    try:
        for line in lines:
            out.write(line)
            out.write("\n")
    finally:
        out.flush()


def _error(line: str) -> None:
    sys.stdout.flush()  # keep stderr after the stdout lines it follows
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def _die(message: str) -> NoReturn:
    _error(message)
    raise typer.Exit(1)
