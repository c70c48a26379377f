"""Entry point of the broker processes a test starts (a child or the zygote).

kio registers hypothesis strategies for its types when hypothesis is importable, and
importing hypothesis is a third of a broker's import time; a broker process has no use
for it, so it is hidden before anything imports kio.
"""

from __future__ import annotations

import sys

if __name__ == "__main__":
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]
    from odradek.testing.child_process import main

    main()
