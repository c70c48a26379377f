"""A log dir's start-up: its `meta.properties` checked (or written), its checkpoints
read, and every partition found in it opened with `num.recovery.threads.per.data.dir`
threads.

Kafka's clean-shutdown marker `.kafka_cleanshutdown` says the files can be trusted
(no recovery scan); it is removed once the dir is loaded, so a crash from then on
triggers recovery. The log manager owns what is loaded: these functions fill the maps
it passes in, so a failure half-way leaves it what to close.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from odradek.storage.checkpoints import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_OFFSET_CHECKPOINT,
    META_PROPERTIES,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    MetaProperties,
    TopicPartition,
    fsync_dir,
    new_uuid,
    read_meta_properties,
    read_offsets_or_reset,
    write_meta_properties,
)
from odradek.storage.log import Log
from odradek.storage.log_dir_scan import (
    DirAssignments,
    LogDirError,
    StartupAborted,
    open_found_partition,
    partition_dirs,
)

log = logging.getLogger(__name__)

# (partition, its dir, recovery point, log start offset, clean shutdown) -> the log
OpenPartition = Callable[[TopicPartition, Path, int, int, bool], Log]


def check_meta_properties(dirs: Iterable[Path], node_id: int, cluster_id: str,
                          failed: Callable[[Path, OSError], None]) -> dict[Path, str]:
    """Each dir's `directory.id`, writing `meta.properties` where there is none; a dir
    that cannot be read goes to `failed`. Raises LogDirError for another node's or
    cluster's dir, or two dirs with the same id (one copied from the other)."""
    ids: dict[Path, str] = {}
    seen_ids: dict[str, Path] = {}
    for directory in dirs:
        path = directory / META_PROPERTIES
        try:
            meta = read_meta_properties(path)
            if meta is None:
                meta = MetaProperties(1, cluster_id, node_id, new_uuid())
                write_meta_properties(path, meta)
                log.info("wrote %s for node %d of cluster %s", path, node_id, cluster_id)
        except OSError as exc:
            failed(directory, exc)
            continue
        if meta.node_id is not None and meta.node_id != node_id:
            raise LogDirError(
                f"{path} belongs to node {meta.node_id}, but this broker is node "
                f"{node_id}: the dir holds another broker's data (check node.id "
                f"and log.dirs)"
            )
        if meta.cluster_id is not None and meta.cluster_id != cluster_id:
            raise LogDirError(
                f"{path} belongs to cluster {meta.cluster_id}, but this broker is in "
                f"cluster {cluster_id}: refusing to mix the two clusters' data"
            )
        if meta.directory_id is not None:
            if meta.directory_id in seen_ids:
                raise LogDirError(
                    f"{directory} and {seen_ids[meta.directory_id]} have the same "
                    f"directory.id {meta.directory_id}: one was copied from the other"
                )
            seen_ids[meta.directory_id] = directory
            ids[directory] = meta.directory_id
    return ids


def load_dir(directory: Path, open_partition: OpenPartition, *, assigned: DirAssignments,
             into: dict[TopicPartition, Log], threads: int,
             aborting: threading.Event) -> bool:
    """Open every partition of `directory` into `into` (and `assigned`); returns
    whether the dir had been shut down cleanly. Raises StartupAborted within one
    partition's load once `aborting` is set."""
    marker = directory / CLEAN_SHUTDOWN_FILE
    clean = marker.exists()
    recovery_points = read_offsets_or_reset(
        directory / RECOVERY_POINT_CHECKPOINT,
        "recovery points reset to 0: every partition of the dir is recovered in full")
    log_starts = read_offsets_or_reset(
        directory / LOG_START_OFFSET_CHECKPOINT,
        "log start offsets reset to each partition's first segment")
    high_watermarks = read_offsets_or_reset(
        directory / REPLICATION_OFFSET_CHECKPOINT,
        "high watermarks reset to each log's start until replication sets them")
    jobs = partition_dirs(directory)
    for tp, _path in jobs:
        if tp in assigned:
            raise LogDirError(
                f"partition {tp[0]}-{tp[1]} is in both {assigned[tp]} and {directory}"
            )
        assigned[tp] = directory

    def load(job: tuple[TopicPartition, Path]) -> tuple[TopicPartition, Log | None]:
        if aborting.is_set():
            raise StartupAborted
        tp, path = job
        return tp, open_found_partition(path, lambda: open_partition(
            tp, path, recovery_points.get(tp, 0), log_starts.get(tp, 0), clean))

    log.info("loading %d partitions from %s after %s shutdown, %d thread(s)",
             len(jobs), directory, "a clean" if clean else "an unclean", threads)
    started = time.monotonic()
    with ThreadPoolExecutor(threads) as pool:
        for tp, opened in pool.map(load, jobs):
            if opened is None:
                del assigned[tp]
                continue
            opened.high_watermark = high_watermarks.get(tp, opened.log_start_offset)
            # kept aside: the broker may open a partition as its only replica (HW =
            # LEO), and replication restores this when the partition has followers
            opened.recovered_high_watermark = opened.high_watermark
            into[tp] = opened
    log.info(
        "loaded %d partitions from %s in %.2fs (%s shutdown)",
        len(jobs), directory, time.monotonic() - started, "clean" if clean else "unclean",
    )
    if clean:
        marker.unlink()
        fsync_dir(directory)
    return clean
