"""A group's lag judged by Burrow's rules over a sliding window.

Each sample is, per partition, the committed offset, the log end offset and the time.
Over the window (`--window` samples) a partition is, in Burrow's order:
  REWIND  the committed offset went backwards;
  OK      the lag was zero at some sample (the consumer caught up);
  STOP    the offset never moved, the lag is non-zero, and the group has no active
          member (the consumer is gone);
  STALL   the offset never moved, the lag is non-zero, but members are there (stuck).
Burrow tells STOP from STALL by commit timestamps, which OffsetFetch does not return;
whether the group still has members is the same question asked directly.
  WARN    the offset moves but the lag grew at every sample (falling behind);
  OK      otherwise.
A partition with no committed offset is ERR. The group takes the worst: STOP, STALL,
REWIND or ERR make it ERR, WARN makes it WARN. Total and max lag come from the
latest sample.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass


@dataclass(frozen=True)
class Sample:
    time: float
    offset: int | None  # committed; None when the group has none for the partition
    log_end: int

    @property
    def lag(self) -> int | None:
        return None if self.offset is None else max(self.log_end - self.offset, 0)


def evaluate_partition(window: list[Sample], has_members: bool = True) -> str:
    if not window or window[-1].offset is None:
        return "ERR"
    samples = [s for s in window if s.offset is not None]
    offsets = [s.offset or 0 for s in samples]
    lags = [s.lag or 0 for s in samples]
    if any(b < a for a, b in itertools.pairwise(offsets)):
        return "REWIND"
    if any(lag == 0 for lag in lags):
        return "OK"
    if len(set(offsets)) == 1 and len(samples) > 1:
        return "STALL" if has_members else "STOP"
    if len(samples) > 1 and all(b > a for a, b in itertools.pairwise(lags)):
        return "WARN"
    return "OK"


def group_status(statuses: list[str]) -> str:
    if any(s in ("STOP", "STALL", "REWIND", "ERR") for s in statuses):
        return "ERR"
    if any(s == "WARN" for s in statuses):
        return "WARN"
    return "OK"
