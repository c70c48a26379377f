"""LogManager over several dirs: a failed dir, the cleaner threads, the checkpoints."""

from __future__ import annotations

import errno
import time
from pathlib import Path

import pytest

from odradek.protocol.errors import KafkaStorageError
from odradek.storage.checkpoints import CLEAN_SHUTDOWN_FILE, CLEANER_OFFSET_CHECKPOINT, read_offsets
from odradek.storage.cleaner_manager import CleanerConfig
from odradek.storage.log_config import LogConfig
from odradek.storage.manager import LogManager
from odradek.storage.segment import LogSegment
from tests.lifecycle.helpers import compact_config, keyed_batch, read_all

CLUSTER = "q1Sh-9_ISia_zwGINzRvyQ"


def manager(dirs: list[Path], config: LogConfig | None = None, **kwargs: object) -> LogManager:
    m = LogManager(dirs, node_id=1, cluster_id=CLUSTER, config=config or LogConfig(),
                   **kwargs)  # type: ignore[arg-type]
    m.startup()
    return m


def test_an_io_error_takes_only_its_dir_offline(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    dirs = [tmp_path / "a", tmp_path / "b", tmp_path / "c"]
    m = manager(dirs)
    logs = [m.create("t", p) for p in range(6)]
    assert {lg.directory.parent for lg in logs} == set(dirs)
    for lg in logs:
        lg.append_as_leader(keyed_batch([(b"k", b"before")]), 0)
    failing = dirs[1]
    original = LogSegment.append

    def append(self: LogSegment, *args: object, **kwargs: object) -> None:
        if self.directory.parent == failing:
            raise OSError(errno.ENOSPC, "No space left on device")
        original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(LogSegment, "append", append)
    offline = [lg for lg in logs if lg.directory.parent == failing]
    with pytest.raises(KafkaStorageError, match="No space left"):
        offline[0].append_as_leader(keyed_batch([(b"k", b"after")]), 0)
    assert list(m.offline_dirs) == [failing]
    # Every partition of the dir is offline, reads too; the others carry on.
    for lg in offline:
        with pytest.raises(KafkaStorageError, match="offline"):
            lg.read(0, 1000)
    for lg in logs:
        if lg not in offline:
            assert lg.append_as_leader(keyed_batch([(b"k", b"after")]), 0).first_offset == 1
    usage = {u.path: u for u in m.dir_usage()}
    assert usage[failing].offline and "No space left" in (usage[failing].error or "")
    assert not usage[dirs[0]].offline
    # New partitions avoid the failed dir.
    assert all(m.create("u", p).directory.parent != failing for p in range(4))
    m.shutdown()
    assert (dirs[0] / CLEAN_SHUTDOWN_FILE).exists()
    assert not (failing / CLEAN_SHUTDOWN_FILE).exists()  # recovered at the next start
    monkeypatch.undo()
    # Repaired: everything acknowledged is there.
    again = manager(dirs)
    assert not again.offline_dirs
    for p in range(6):
        lg = again.get("t", p)
        assert lg is not None
        lg.high_watermark = lg.log_end_offset
        values = [r.value for r in read_all(lg)]
        assert values[0] == b"before"
        assert values == ([b"before"] if lg.directory.parent == failing
                          else [b"before", b"after"])
    again.shutdown()


def test_a_dir_that_cannot_be_read_at_startup_starts_offline(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    m = manager(dirs)
    m.create("t", 0)
    m.create("t", 1)
    m.shutdown()
    dirs[1].rename(tmp_path / "gone")
    dirs[1].write_text("not a directory any more")
    again = manager(dirs)
    assert list(again.offline_dirs) == [dirs[1].resolve()]
    assert again.get("t", 0) is not None or again.get("t", 1) is not None
    again.shutdown()


def _wait(predicate: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.02)
    raise AssertionError("timed out")


def test_the_cleaner_threads_compact_and_checkpoint(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    m = manager(dirs, compact_config(segment_bytes=600),
                cleaner_config=CleanerConfig(num_threads=2, backoff_ms=50))
    logs = [m.create("compacted", p) for p in range(2)]
    for lg in logs:
        for i in range(100):
            lg.append_as_leader(keyed_batch([(b"k%d" % (i % 5), b"v%d" % i)]), 0)
        lg.high_watermark = lg.log_end_offset
    m.start_cleaner()
    assert m.cleaner is not None
    _wait(lambda: m.cleaner is not None and m.cleaner.cleanings >= 2)
    for lg in logs:
        cleaned = [r for r in read_all(lg) if r.offset < lg.active_segment.base_offset]
        assert len({r.key for r in cleaned}) == len(cleaned)
    m.shutdown()
    checkpoints: dict[tuple[str, int], int] = {}
    for d in dirs:
        checkpoints.update(read_offsets(d / CLEANER_OFFSET_CHECKPOINT))
    assert set(checkpoints) == {("compacted", 0), ("compacted", 1)}
    assert all(v > 0 for v in checkpoints.values())
    # A deleted partition leaves the checkpoint.
    again = manager(dirs, compact_config(segment_bytes=600))
    assert again.cleaner_manager.checkpoint_of(("compacted", 0)) == checkpoints[("compacted", 0)]
    again.delete("compacted", 0)
    assert again.cleaner_manager.checkpoint_of(("compacted", 0)) is None
    again.shutdown()


def test_retention_leaves_a_log_alone_while_it_is_cleaned(tmp_path: Path) -> None:
    m = manager([tmp_path / "a"], compact_config(cleanup_policy=("compact", "delete"),
                                                 retention_ms=1))
    lg = m.create("t", 0)
    for i in range(50):
        lg.append_as_leader(keyed_batch([(b"k", b"v%d" % i)], ts=1), 0)
    lg.high_watermark = lg.log_end_offset
    ltc = m.cleaner_manager.grab_filthiest()
    assert ltc is not None and m.cleaner_manager.in_progress(("t", 0))
    assert m.cleanup_logs() == 0
    m.cleaner_manager.cleaning_ended(("t", 0))
    assert m.cleanup_logs() > 0
    m.shutdown()


def test_deleting_a_partition_aborts_its_cleaning(tmp_path: Path,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    m = manager([tmp_path / "a"], compact_config(segment_bytes=20_000),
                cleaner_config=CleanerConfig(backoff_ms=20, io_max_bytes_per_second=200_000))
    for name in ("doomed", "survivor"):
        lg = m.create(name, 0)
        for i in range(3000):
            lg.append_as_leader(keyed_batch([(b"k%d" % (i % 50), b"v" * 50)]), 0)
        lg.high_watermark = lg.log_end_offset
    m.start_cleaner()
    _wait(lambda: any(m.cleaner_manager.in_progress((n, 0)) for n in ("doomed", "survivor")))
    cleaning = "doomed" if m.cleaner_manager.in_progress(("doomed", 0)) else "survivor"
    m.delete(cleaning, 0)  # returns at once; the cleaner gives up between batches
    other = "survivor" if cleaning == "doomed" else "doomed"
    _wait(lambda: m.cleaner is not None and m.cleaner.cleanings >= 1, timeout=30)
    survivor = m.get(other, 0)
    assert survivor is not None
    cleaned = [r for r in read_all(survivor) if r.offset < survivor.active_segment.base_offset]
    assert len({r.key for r in cleaned}) == len(cleaned)
    assert not [r for r in caplog.records if r.levelname == "ERROR"]
    assert not m.cleaner_manager.uncleanable
    m.shutdown()


def test_a_swap_handed_to_the_owner_thread_is_run_or_cancelled_never_both() -> None:
    import threading

    from odradek.storage.cleaner_manager import owner_via

    ran: list[str] = []
    queued: list[object] = []
    owner = owner_via(queued.append, timeout_s=0.05)  # nobody runs the queue
    assert owner(lambda: ran.append("late") is None) is False
    queued[0]()  # the owner thread wakes up after the cleaner gave up
    assert ran == [], "a cancelled swap never runs"

    def schedule(fn: object) -> None:
        threading.Thread(target=fn).start()  # type: ignore[arg-type]

    def slow() -> bool:
        time.sleep(0.2)  # longer than the timeout, but already started
        return True

    assert owner_via(schedule, timeout_s=0.05)(slow) is True

    def closed(_fn: object) -> None:
        raise RuntimeError("Event loop is closed")

    assert owner_via(closed)(lambda: True) is False
