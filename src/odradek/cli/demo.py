"""`odradek demo`: the simulated device fleet."""

from __future__ import annotations

import sys
import threading
import time

import typer

from odradek.cli.common import BootstrapOption, console, fail
from odradek.cli.signals import long_running

app = typer.Typer(no_args_is_help=True, help="Demo data: a simulated IoT device fleet.")


@app.callback()
def demo() -> None:
    """Demo data: a simulated IoT device fleet."""


@app.command()
@long_running
def fleet(
    bootstrap: str = BootstrapOption,
    devices: int = typer.Option(30, "--devices", help="How many devices"),
    rate: float = typer.Option(200.0, "--rate", help="Records per second (0: as fast as can)"),
    total: int | None = typer.Option(None, "--count", help="Stop after this many records"),
    firmware_update_after: int = typer.Option(
        2_000, "--firmware-update-after",
        help="Records before the firmware update (adds a field, changes a type); -1: never"),
    malformed: float = typer.Option(0.005, "--malformed-share",
                                    help="Share of malformed records"),
    seed: int = typer.Option(7, "--seed"),
) -> None:
    """Send camera, door-lock and climate telemetry to fleet.* topics, keyed by device."""
    from odradek.pipeline.fleet import FleetConfig, FleetStats, run_fleet

    config = FleetConfig(devices=devices, rate=rate, malformed_share=malformed, seed=seed,
                         firmware_update_after=None if firmware_update_after < 0
                         else firmware_update_after)
    stop = threading.Event()
    stats = FleetStats()
    last = [time.monotonic()]

    def progress(s: FleetStats) -> None:
        now = time.monotonic()
        if now - last[0] >= 2:
            last[0] = now
            console.print(f"sent {s.sent} records ({s.malformed} malformed)"
                          + (", firmware 2.0.0 rolled out" if s.updated else ""))

    console.print(f"fleet of {devices} devices → fleet.camera, fleet.door, fleet.climate "
                  f"at {rate:g} records/s; Ctrl-C stops")
    try:
        run_fleet(bootstrap, config, stop, total, stats, progress)
    except KeyboardInterrupt:
        stop.set()
    except Exception as e:
        fail(str(e))
    if stats.errors:
        fail(f"{stats.errors} records were not acknowledged")
    console.print(f"sent {stats.sent} records ({stats.malformed} malformed)")


if __name__ == "__main__":
    sys.exit(app())
