"""The `odradek` command: Kafka's tools as subcommands."""

import os
import sys
import tempfile
from pathlib import Path


def _started_as_the_command() -> bool:
    """`odradek …` or `python -m odradek …`, not a program that imports the CLI."""
    started = Path(sys.argv[0]) if sys.argv and sys.argv[0] else Path()
    return started.name == "odradek" or (
        started.name == "__main__.py" and started.parent.name == "odradek")


# kio registers Hypothesis strategies when Hypothesis is installed (it is, with the test
# extra). Importing it (and the pytest and trio it pulls in) took 1 to 2 s of every
# command's start, a broker's restart included; the command has no use for it, so it is
# hidden from kio. A program that imports the CLI keeps it, and Hypothesis then caches
# Unicode tables in ./.hypothesis: outside a test run that folder goes to the temp dir.
if "pytest" not in sys.modules:
    if _started_as_the_command():
        sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]
    os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY",
                          os.path.join(tempfile.gettempdir(), "odradek-hypothesis"))
