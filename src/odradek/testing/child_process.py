"""The broker process's side of testing/child.py and testing/zygote.py: it reads one JSON
command per line and answers one per line (child.py's docstring has the protocol), and
the zygote's loop that forks such processes. Nothing here runs in the test's process.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import sys
from typing import IO, Any

from odradek.testing.config import TestkitError
from odradek.testing.embedded import EmbeddedBroker


def _serve(stdin: IO[str], stdout: IO[str]) -> None:
    from odradek.protocol.errors import KafkaError
    from odradek.server import broker as _preload  # noqa: F401 - import before `start`
    from odradek.server.heap import keep_freed_memory

    keep_freed_memory()  # a broker's process, as `odradek broker`'s (server/run.py)

    embedded: EmbeddedBroker | None = None

    def answer(value: dict[str, Any]) -> None:
        stdout.write(json.dumps(value) + "\n")
        stdout.flush()

    for line in stdin:
        command = json.loads(line)
        op = command.pop("op")
        try:
            if op == "start":
                props = dict(command["properties"])
                data_dir = props.pop("log.dirs")
                host, port = props.pop("listeners").rsplit("//", 1)[1].rsplit(":", 1)
                embedded = EmbeddedBroker(props, data_dir=data_dir, host=host, port=int(port),
                                          defaults={})
                embedded.start()
                answer({"port": embedded.port})
                continue
            if embedded is None:
                raise TestkitError(f"{op} before start")
            if op == "stop":
                embedded.stop()
                answer({})
                return
            answer(_command(embedded, op, command))
        except KafkaError as e:
            answer({"error": str(e), "kafka_error": int(e.code)})
        except Exception as e:
            answer({"error": f"{type(e).__name__}: {e}" if not isinstance(e, TestkitError)
                    else str(e)})
    if embedded is not None:  # stdin closed: the parent is gone
        embedded.stop()


def _command(embedded: Any, op: str, args: dict[str, Any]) -> dict[str, Any]:
    if op == "create_topic":
        embedded.create_topic(args["name"], args["partitions"], args["replication_factor"],
                              args["config"])
        return {}
    if op == "delete_topic":
        embedded.delete_topic(args["name"])
        return {}
    if op == "faults":
        faults = embedded.faults
        if args["method"] != "injected":
            getattr(faults, args["method"])(*args["args"], **args["kwargs"])
        return {"injected": list(faults.injected)}
    if op == "image":
        only = args.get("partition")
        summary: dict[str, Any] = embedded.call(lambda broker: _image_summary(broker, only))
        return summary
    raise TestkitError(f"unknown command {op!r}")


def _image_summary(broker: Any, only: list[Any] | None = None) -> dict[str, Any]:
    """What this broker's metadata image says: brokers, controller, partitions' leaders,
    and which partitions it hosts. `only` ([topic, partition]): that partition alone; a
    summary of 10,000 partitions held the broker's loop 60 ms, and a test polling one
    partition's ISR slowed what it measured."""
    image = broker.controller.image
    partitions = {}
    wanted = None if only is None else (str(only[0]), int(only[1]))
    topics = image.topics.values() if wanted is None else \
        [t for t in (image.topics.get(wanted[0]),) if t is not None]
    for topic in topics:
        for p in topic.partitions:
            if wanted is None or p.partition == wanted[1]:
                partitions[f"{topic.name}/{p.partition}"] = {
                    "leader": p.leader, "replicas": list(p.replicas), "isr": list(p.isr)}
    held = broker.replicas.partitions
    if wanted is not None:
        held = {wanted: held[wanted]} if wanted in held else {}
    hosted = {f"{t}/{i}": {"leader": p.is_leader if hasattr(p, "is_leader") else None}
              for (t, i), p in held.items()}
    return {"brokers": sorted(b.node_id for b in image.brokers.values()
                              if not getattr(b, "fenced", False)),
            "controller": image.controller_id, "partitions": partitions, "hosted": hosted}


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--zygote":
        _configure_process()
        zygote_main(int(sys.argv[2]))
        return
    _configure_process()
    _serve(sys.stdin, sys.stdout)


def _configure_process() -> None:
    logging.basicConfig(level=os.environ.get("ODRADEK_LOG_LEVEL", "INFO"),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # The parent stops us through stdin; signals from a terminal go to the parent.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


# ---- the zygote (it forks broker processes that serve as above) -------------------

def zygote_main(control_fd: int) -> None:
    from odradek.server import broker as _broker  # noqa: F401 - what the forks share
    from odradek.server import zk_membership as _zk  # noqa: F401

    control = socket.socket(fileno=control_fd)

    def reap(_sig: int, _frame: object) -> None:
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass

    signal.signal(signal.SIGCHLD, reap)
    while True:
        message, fds, _flags, _addr = socket.recv_fds(control, 4096, 1)
        if not message:
            return  # the parent closed the control socket (or died)
        pid = os.fork()
        if pid == 0:
            _forked(control, fds[0], message.decode())
        os.close(fds[0])
        control.sendall(f"{pid}\n".encode())


def _forked(control: socket.socket, fd: int, log_path: str) -> None:
    """The forked broker process: never returns into the zygote's loop."""
    status = 1
    try:
        control.close()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(log, 2)
        os.close(log)
        for handler in logging.getLogger().handlers:
            handler.flush()
        channel = socket.socket(fileno=fd)
        rfile = channel.makefile("r", encoding="utf-8")
        wfile = channel.makefile("w", encoding="utf-8")
        _serve(rfile, wfile)
        status = 0
    finally:
        os._exit(status)
