"""The one rule of the layout (docs/architecture.md), as code: each layer imports only the
layers below it, client apps never import the server, protocol and storage know nothing
of sockets or asyncio.

Every module under src/odradek is parsed (nothing is imported), every `import` in it —
at module level, in functions, under TYPE_CHECKING: all are knowledge of another
layer — is mapped to its layer and checked against the table below. A new top-level
package fails the test until it is given a place here and in docs/architecture.md.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = SRC / "odradek"

# ---- the layers, bottom to top: what each may import besides itself ----------------------

# definitions of settings every layer validates its own with (no odradek imports of its own)
# and the data home's layout (odradek/home.py), which every command shares
BASE = frozenset({"configdef", "home"})
PROTOCOL = BASE | {"protocol"}
STORAGE = PROTOCOL | {"storage"}
# the broker's property table (names, types, defaults): tools read it without a broker
PROPERTIES = STORAGE | {"broker_properties"}
CLUSTER = PROPERTIES | {"cluster"}
REPLICATION = CLUSTER | {"replication"}
# the coordinator runtime writes its records with acks=all through the replica manager
COORDINATOR = REPLICATION | {"coordinator"}
# authenticators, ACLs, quotas: sans-IO; ACL znodes are read through the cluster's store
SECURITY = CLUSTER | {"security"}
SERVER = COORDINATOR | SECURITY | {"server"}
# composition roots: they build a Broker (in this process or a child) and run it
TESTING = SERVER | {"testing"}
# client apps speak the wire protocol (confluent-kafka, kafka-python, our framing):
# they may use the sans-IO layers and pure helpers, never a broker's insides
CLIENT = PROPERTIES | {"cluster", "security"}

ALLOWED: dict[str, frozenset[str]] = {
    "__init__": frozenset(),
    "configdef": frozenset(),
    "home": frozenset(),
    "protocol": PROTOCOL,
    "storage": STORAGE,
    "broker_properties": PROPERTIES,
    "cluster": CLUSTER,
    "replication": REPLICATION,
    "coordinator": COORDINATOR,
    "security": SECURITY,
    "server": SERVER,
    "testing": TESTING,
    "registry": CLIENT | {"registry"},
    "pipeline": CLIENT | {"pipeline", "registry"},  # decodes values by registered schemas
    "console": CLIENT | {"console", "client", "registry", "pipeline"},  # the lake, schemas
    "advice": CLIENT | {"advice"},
    # client-side helpers the CLI and the console share (health, lag, raw requests)
    "client": CLIENT | {"client"},
    "cli": CLIENT | {"cli", "client", "advice", "console", "registry", "pipeline"},
    "__main__": frozenset({"cli"}),
}

CLIENT_APPS = frozenset({"cli", "client", "console", "registry", "pipeline", "advice"})

# `odradek broker` and `odradek up` start a broker: like testing/, they are composition
# roots, the one place outside server/ that may build one. Hosting the registry or the
# console in a broker process happens here too, never inside server/.
COMPOSITION_ROOTS: dict[str, frozenset[str]] = {
    "odradek.cli.broker": frozenset({"server"}),
    "odradek.cli.up": frozenset({"server"}),  # reads the broker's config to find its port
}

# Where the code breaks a rule today. Each entry names the issue that removes it.
ALLOW_LIST: dict[tuple[str, str], str] = {}

# the network and the event loop: only the server (and the clients) touch them
NO_IO = frozenset({"asyncio", "socket", "selectors", "socketserver", "uvloop"})
SANS_IO_LAYERS = {"protocol": NO_IO, "storage": NO_IO, "security": NO_IO}


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, dotted
    target: str  # the imported module, dotted and absolute
    line: int

    def __str__(self) -> str:
        path = self.module.replace(".", "/")
        return f"src/{path}.py:{self.line}: imports {self.target}"


def module_name(path: Path, src: Path = SRC) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> str:
    """odradek.<layer>.… → layer; odradek's own __init__ and top-level modules by name."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports(path: Path, src: Path = SRC) -> Iterator[Import]:
    module = module_name(path, src)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(module, alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            yield Import(module, target, node.lineno)
            if target in ("odradek", *(f"odradek.{p}" for p in ALLOWED)):
                # `from odradek import server` names a layer through its members
                for alias in node.names:
                    yield Import(module, f"{target}.{alias.name}", node.lineno)


def all_imports() -> list[Import]:
    return [i for path in sorted(PACKAGE.rglob("*.py")) for i in imports(path)]


def violations(found: list[Import]) -> list[str]:
    bad = []
    for imp in found:
        layer = layer_of(imp.module)
        top = imp.target.split(".")[0]
        if top in SANS_IO_LAYERS.get(layer, ()):
            bad.append(f"{imp} ({layer} is sans-IO)")
        if top != "odradek" or imp.target == "odradek":
            continue
        target_layer = layer_of(imp.target)
        allowed = ALLOWED.get(layer, frozenset()) | {layer}
        allowed |= COMPOSITION_ROOTS.get(imp.module, frozenset())
        if target_layer in allowed or (imp.module, imp.target) in ALLOW_LIST:
            continue
        if layer in CLIENT_APPS and target_layer in ("server", "testing"):
            bad.append(f"{imp} (a client app never imports the broker)")
        else:
            bad.append(f"{imp} ({layer} may import only {sorted(allowed)})")
    return bad


def test_every_package_has_a_layer() -> None:
    tops = {layer_of(module_name(p)) for p in PACKAGE.rglob("*.py")}
    tops |= {p.name for p in PACKAGE.iterdir()
             if p.is_dir() and p.name != "__pycache__" and not p.name.startswith(".")}
    tops |= {p.stem for p in PACKAGE.glob("*.py")}
    missing = sorted(tops - set(ALLOWED))
    assert not missing, (f"no layer for odradek.{missing}: give each a place in "
                         "tests/test_layering.py and docs/architecture.md")


def test_each_layer_imports_only_the_layers_below_it() -> None:
    bad = violations(all_imports())
    assert not bad, "the layering of docs/architecture.md is broken:\n" + "\n".join(bad)


def test_the_allow_list_holds_only_imports_that_still_exist() -> None:
    found = {(i.module, i.target) for i in all_imports()}
    stale = sorted(set(ALLOW_LIST) - found)
    assert not stale, f"remove these fixed entries from ALLOW_LIST: {stale}"


def test_the_checker_catches_what_it_must() -> None:
    """The rules themselves, on made-up imports: each must be refused."""
    made_up = [
        Import("odradek.protocol.records", "odradek.storage.log", 1),
        Import("odradek.storage.log", "asyncio", 2),
        Import("odradek.protocol.frames", "socket", 3),
        Import("odradek.storage.log", "odradek.cluster.metadata", 4),
        Import("odradek.cluster.controller", "odradek.replication.partition", 5),
        Import("odradek.replication.partition", "odradek.coordinator.group", 6),
        Import("odradek.coordinator.group.classic", "odradek.server.broker", 7),
        Import("odradek.security.authorizer", "odradek.server.connection", 8),
        Import("odradek.console.app", "odradek.server.broker", 9),
        Import("odradek.registry.store", "odradek.server.config", 10),
        Import("odradek.pipeline.source", "odradek.server.broker", 11),
        Import("odradek.cli.topics", "odradek.server.broker", 12),
        Import("odradek.cli.topics", "odradek.testing.embedded", 13),
        Import("odradek.server.broker", "odradek.cli.common", 14),
        Import("odradek.server.broker", "odradek.registry.app", 15),
        Import("odradek.testing.embedded", "odradek.cli.main", 16),
        Import("odradek.registry.app", "odradek.console.app", 17),
        Import("odradek.security.tls", "asyncio", 18),
    ]
    assert len(violations(made_up)) == len(made_up)
    fine = [
        Import("odradek.server.broker", "odradek.security.authorizer", 1),
        Import("odradek.coordinator.runtime", "odradek.replication.partition", 2),
        Import("odradek.testing.embedded", "odradek.server.broker", 3),
        Import("odradek.cli.broker", "odradek.server.broker", 4),
        Import("odradek.cli.schemas", "odradek.registry.client", 5),
        Import("odradek.console.lake", "odradek.pipeline.lake_catalog", 6),
        Import("odradek.storage.log", "odradek.configdef", 7),
        Import("odradek.server.connection", "asyncio", 8),
    ]
    assert violations(fine) == []


def test_relative_and_from_package_imports_are_resolved(tmp_path: Path) -> None:
    pkg = tmp_path / "odradek" / "storage"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .log import Log\n")
    (pkg / "log.py").write_text("from ..server import broker\nfrom odradek import cli\n")
    found = {i.target for p in sorted(pkg.glob("*.py")) for i in imports(p, tmp_path)}
    assert {"odradek.storage.log", "odradek.server", "odradek.server.broker",
            "odradek.cli"} <= found
    assert len(violations([i for p in pkg.glob("*.py") for i in imports(p, tmp_path)])) == 3
