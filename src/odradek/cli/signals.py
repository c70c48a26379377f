"""Ctrl-C and `kill` for the long-running commands, whatever the parent left behind.

A process started from a non-interactive shell with `cmd &` inherits SIGINT as ignored,
and Python then never raises KeyboardInterrupt: a command relying on the inherited
disposition cannot be stopped with Ctrl-C (a test's SIGINT), and the brokers or ZooKeeper
it started live on. So every long-running command runs inside `stop_on_signals()`: SIGINT
and SIGTERM raise KeyboardInterrupt in the main thread, and the command's own
`except KeyboardInterrupt` / `finally` stops its children. `@long_running` puts a whole
command inside it (and marks it, so a test can find every command that is).
"""

from __future__ import annotations

import functools
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, TypeVar, cast

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

Handler = Callable[[int, FrameType | None], Any] | int | None
F = TypeVar("F", bound=Callable[..., Any])


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """While the block runs, the first SIGINT or SIGTERM raises KeyboardInterrupt.

    Later ones are ignored: a second Ctrl-C while the command stops its children must
    not cut that short and leave them running (the stops themselves are bounded, then
    kill). The previous handlers come back when the block ends.
    """
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers belong to the main thread; its caller owns them
        return
    fired = threading.Event()

    def interrupt(signum: int, frame: FrameType | None) -> None:
        if not fired.is_set():
            fired.set()
            raise KeyboardInterrupt

    previous: dict[int, Handler] = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    for sig in STOP_SIGNALS:
        signal.signal(sig, interrupt)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            # None: set from C, not Python; the default is the honest restoration
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)


def long_running(command: F) -> F:
    """A typer command that runs until stopped: the whole of it inside stop_on_signals()."""

    @functools.wraps(command)  # typer reads the options from the wrapped signature
    def run(*args: Any, **kwargs: Any) -> Any:
        with stop_on_signals():
            return command(*args, **kwargs)

    run.stops_on_signals = True  # type: ignore[attr-defined]
    return cast(F, run)
