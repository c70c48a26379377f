"""`odradek reassign`: Kafka's kafka-reassign-partitions.sh, with its JSON files.

    --generate --topics-to-move-json-file F --broker-list 1,2,3   propose a placement
    --execute  --reassignment-json-file F [--throttle BYTES/S]     start the moves
    --verify   --reassignment-json-file F                          are they done?
                                                  (when they are, the throttles go)
    --cancel   --reassignment-json-file F                          withdraw them

topics-to-move: {"version":1,"topics":[{"topic":"foo"}]}
reassignment:   {"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2],
                 "log_dirs":["any","any"]}]}

confluent-kafka has no binding for AlterPartitionReassignments or
ListPartitionReassignments, so they are sent to the controller as raw requests (kio's
messages), as `odradek transactions` does for its APIs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from odradek.cli.common import BootstrapOption, client_config, fail, reported

ALTER_PARTITION_REASSIGNMENTS, LIST_PARTITION_REASSIGNMENTS = 45, 46
TIMEOUT_S = 30


class _Cluster:
    """Brokers, racks, controller and replica sets, from confluent-kafka's admin client."""

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka.admin import AdminClient

        self.client = AdminClient(client_config(bootstrap))  # kept: futures need it
        described = self.client.describe_cluster(request_timeout=TIMEOUT_S).result(TIMEOUT_S)
        self.racks: dict[int, str | None] = {n.id: n.rack for n in described.nodes}
        self.addresses = {n.id: (n.host, n.port) for n in described.nodes}
        if described.controller is None:
            fail("the cluster has no controller right now; try again")
        self.controller = self.addresses[described.controller.id]
        self.metadata = self.client.list_topics(timeout=TIMEOUT_S)

    def replicas(self, topic: str) -> dict[int, list[int]]:
        md = self.metadata.topics.get(topic)
        if md is None or md.error is not None:
            fail(f"topic {topic} does not exist")
        return {p: list(info.replicas) for p, info in sorted(md.partitions.items())}


def _assignment_json(moves: dict[tuple[str, int], list[int]]) -> str:
    return json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(moves.items())]}, separators=(",", ":"))


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        fail(f"cannot read {path}: {e}")


def _read_moves(path: Path) -> dict[tuple[str, int], list[int]]:
    body = _read_json(path)
    try:
        return {(str(e["topic"]), int(e["partition"])): [int(b) for b in e["replicas"]]
                for e in body["partitions"]}
    except (KeyError, TypeError, ValueError) as e:
        fail(f"{path} is not a reassignment file: {e!r}")


def generate(cluster: _Cluster, topics_file: Path, broker_list: str) -> None:
    from odradek.cluster.placement import assign_replicas

    try:
        brokers = [int(b) for b in broker_list.split(",") if b.strip()]
    except ValueError:
        fail(f"--broker-list must be broker ids separated by commas, not {broker_list!r}")
    unknown = [b for b in brokers if b not in cluster.racks]
    if unknown:
        fail(f"brokers {unknown} are not in the cluster")
    body = _read_json(topics_file)
    names = [str(t["topic"]) for t in body.get("topics", [])]
    current: dict[tuple[str, int], list[int]] = {}
    proposed: dict[tuple[str, int], list[int]] = {}
    racks = {b: cluster.racks[b] for b in brokers}
    for name in names:
        replicas = cluster.replicas(name)
        for p, now in replicas.items():
            current[(name, p)] = now
        rf = len(next(iter(replicas.values())))
        for p, placed in enumerate(assign_replicas(racks, len(replicas), rf)):
            proposed[(name, p)] = list(placed)
    print("Current partition replica assignment")
    print(_assignment_json(current))
    print()
    print("Proposed partition reassignment configuration")
    print(_assignment_json(proposed))


def _alter(cluster: _Cluster, moves: dict[tuple[str, int], list[int] | None]) -> list[str]:
    from odradek.client.raw import schema
    from odradek.client.transactions import call

    req = schema(ALTER_PARTITION_REASSIGNMENTS, 0)
    by_topic: dict[str, list[Any]] = {}
    for (t, p), r in sorted(moves.items()):
        by_topic.setdefault(t, []).append(req.ReassignablePartition(
            partition_index=p, replicas=None if r is None else tuple(r)))
    response = call(cluster.controller, ALTER_PARTITION_REASSIGNMENTS, 0,
                    timeout=_ms(TIMEOUT_S), topics=tuple(
                        req.ReassignableTopic(name=t, partitions=tuple(ps))
                        for t, ps in by_topic.items()))
    errors = []
    for topic in response.responses:
        for p in topic.partitions:
            if p.error_code:
                errors.append(f"{topic.name}-{p.partition_index}: {p.error_code.name.upper()}"
                              f"{': ' + p.error_message if p.error_message else ''}")
    return errors


def _ms(seconds: float) -> Any:
    import datetime

    return datetime.timedelta(seconds=seconds)


def ongoing(cluster: _Cluster) -> dict[tuple[str, int], Any]:
    from odradek.client.transactions import call

    response = call(cluster.controller, LIST_PARTITION_REASSIGNMENTS, 0,
                    timeout=_ms(TIMEOUT_S), topics=None)
    return {(t.name, p.partition_index): p for t in response.topics for p in t.partitions}


def ongoing_text(bootstrap: str) -> str:
    """The reassignments in progress, as kafka-reassign-partitions --list prints them."""
    with reported():
        moves = ongoing(_Cluster(bootstrap))
    lines = []
    for (t, p), m in sorted(moves.items()):
        adding = f" adding: {','.join(map(str, m.adding_replicas))}." if m.adding_replicas else ""
        removing = (f" removing: {','.join(map(str, m.removing_replicas))}."
                    if m.removing_replicas else "")
        lines.append(f"{t}-{p}: replicas: {','.join(map(str, m.replicas))}.{adding}{removing}")
    if not lines:
        return "No partition reassignments found."
    return "Current partition reassignments:\n" + "\n".join(lines)


_RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
          "replica.alter.log.dirs.io.max.bytes.per.second")
_REPLICA_LISTS = ("leader.replication.throttled.replicas",
                  "follower.replication.throttled.replicas")


def _set_configs(cluster: _Cluster, resources: list[Any]) -> None:
    for resource in resources:  # librdkafka takes one broker resource per call
        for future in cluster.client.incremental_alter_configs([resource]).values():
            future.result(TIMEOUT_S)


def _throttle(cluster: _Cluster, moves: dict[tuple[str, int], list[int]],
              current: dict[tuple[str, int], list[int]], rate: int) -> None:
    """Kafka's: the moving partitions' current replicas are leader-throttled, the
    replicas they gain follower-throttled, and every broker involved gets the rate."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    leader: dict[str, list[str]] = {}
    follower: dict[str, list[str]] = {}
    brokers: set[int] = set()
    for (t, p), target in sorted(moves.items()):
        now = current.get((t, p), [])
        if now == target:
            continue
        brokers |= set(now) | set(target)
        leader.setdefault(t, []).extend(f"{p}:{b}" for b in now)
        follower.setdefault(t, []).extend(f"{p}:{b}" for b in target if b not in now)
    set_op = AlterConfigOpType.SET
    _set_configs(cluster, [ConfigResource(ResourceType.TOPIC, t, incremental_configs=[
        ConfigEntry(_REPLICA_LISTS[0], ",".join(leader[t]), incremental_operation=set_op),
        ConfigEntry(_REPLICA_LISTS[1], ",".join(follower.get(t, [])),
                    incremental_operation=set_op)]) for t in sorted(leader)])
    _set_configs(cluster, [ConfigResource(ResourceType.BROKER, str(b), incremental_configs=[
        ConfigEntry(name, str(rate), incremental_operation=set_op) for name in _RATES[:2]])
        for b in sorted(brokers) if b in cluster.addresses])
    print("Warning: You must run --verify periodically, until the reassignment completes, "
          "to ensure the throttle is removed.")
    print(f"The inter-broker throttle limit was set to {rate} B/s")


def _clear_throttles(cluster: _Cluster, topics: set[str]) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    delete = AlterConfigOpType.DELETE
    brokers = sorted(cluster.addresses)
    _set_configs(cluster, [ConfigResource(ResourceType.BROKER, str(b), incremental_configs=[
        ConfigEntry(name, None, incremental_operation=delete) for name in _RATES[:2]])
        for b in brokers])
    print(f"Clearing broker-level throttles on brokers {','.join(map(str, brokers))}")
    for t in sorted(topics):
        _set_configs(cluster, [ConfigResource(ResourceType.TOPIC, t, incremental_configs=[
            ConfigEntry(name, None, incremental_operation=delete)
            for name in _REPLICA_LISTS])])
        print(f"Clearing topic-level throttles on topic {t}")


def execute(cluster: _Cluster, path: Path, throttle: int = -1) -> None:
    moves = _read_moves(path)
    current = {}
    for topic in {t for t, _ in moves}:
        for p, r in cluster.replicas(topic).items():
            if (topic, p) in moves:
                current[(topic, p)] = r
    print("Current partition replica assignment\n")
    print(_assignment_json(current))
    print("\nSave this to use as the --reassignment-json-file option during rollback")
    if throttle >= 0:
        _throttle(cluster, moves, current, throttle)
    errors = _alter(cluster, dict(moves))
    if errors:
        fail("reassignment refused: " + "; ".join(errors))
    print("Successfully started partition reassignments for "
          + ",".join(f"{t}-{p}" for t, p in sorted(moves)))


def verify(cluster: _Cluster, path: Path) -> bool:
    """Kafka's lines, one per partition; True when every move is complete."""
    moves = _read_moves(path)
    in_progress = ongoing(cluster)
    print("Status of partition reassignment:")
    done = True
    for (t, p), target in sorted(moves.items()):
        if (t, p) in in_progress:
            print(f"Reassignment of partition {t}-{p} is still in progress.")
            done = False
            continue
        actual = cluster.replicas(t).get(p)
        if actual == target:
            print(f"Reassignment of partition {t}-{p} is completed.")
        else:
            print(f"There is no active reassignment of partition {t}-{p}, but replica set "
                  f"is {actual} rather than {target}.")
            done = False
    if done:  # as Kafka's tool: the throttles go once every move is complete
        _clear_throttles(cluster, {t for t, _ in moves})
    return done


def cancel(cluster: _Cluster, path: Path) -> None:
    moves = _read_moves(path)
    errors = _alter(cluster, dict.fromkeys(moves))
    if errors:
        fail("cancel refused: " + "; ".join(errors))
    print("Successfully cancelled partition reassignments for "
          + ",".join(f"{t}-{p}" for t, p in sorted(moves)))


def reassign(
    bootstrap: str = BootstrapOption,
    do_generate: bool = typer.Option(False, "--generate"),
    do_execute: bool = typer.Option(False, "--execute"),
    do_verify: bool = typer.Option(False, "--verify"),
    do_cancel: bool = typer.Option(False, "--cancel"),
    topics_to_move: Path | None = typer.Option(None, "--topics-to-move-json-file"),
    broker_list: str | None = typer.Option(None, "--broker-list"),
    reassignment: Path | None = typer.Option(None, "--reassignment-json-file"),
    throttle: int = typer.Option(
        -1, "--throttle", help="Bytes/s each broker may replicate the moving partitions "
        "at (KIP-73); --verify removes it once the moves are done."),
) -> None:
    """Move partition replicas between brokers (kafka-reassign-partitions.sh)."""
    actions = [do_generate, do_execute, do_verify, do_cancel]
    if sum(actions) != 1:
        fail("give exactly one of --generate, --execute, --verify, --cancel")
    if throttle != -1 and not do_execute:
        fail("--throttle applies to --execute only")
    if throttle < -1:
        fail(f"--throttle must be at least 0, not {throttle}")
    with reported():
        cluster = _Cluster(bootstrap)
        if do_generate:
            if topics_to_move is None or broker_list is None:
                fail("--generate needs --topics-to-move-json-file and --broker-list")
            generate(cluster, topics_to_move, broker_list)
            return
        if reassignment is None:
            fail("--reassignment-json-file is required")
        if do_execute:
            execute(cluster, reassignment, throttle)
        elif do_verify:
            verify(cluster, reassignment)
        else:
            cancel(cluster, reassignment)
