"""The `odradek` command: Kafka's tools as subcommands."""

import os
import sys
import tempfile

# kio registers Hypothesis strategies when Hypothesis is installed (it is, with the test
# extra), and Hypothesis then caches Unicode tables in ./.hypothesis: every command would
# leave that folder wherever the user stands. Commands keep it in the temp folder; a test
# run (pytest loaded) keeps Hypothesis's own setting.
if "pytest" not in sys.modules:
    os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY",
                          os.path.join(tempfile.gettempdir(), "odradek-hypothesis"))
