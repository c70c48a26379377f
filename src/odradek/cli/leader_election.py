"""`odradek leader-election`: Kafka's kafka-leader-election.sh, through confluent-kafka's
ElectLeaders.

    --election-type preferred|unclean (--topic T --partition P | --all-topic-partitions)

Preferred moves leadership back to each partition's first replica where it is alive
and in sync; unclean gives a leaderless partition to any live replica, losing what only
the old in-sync replicas had.
"""

from __future__ import annotations

import typer

from odradek.cli.common import BootstrapOption, client_config, fail, reported

TIMEOUT_S = 30


def leader_election(
    bootstrap: str = BootstrapOption,
    election_type: str = typer.Option(..., "--election-type", help="preferred or unclean"),
    topic: str | None = typer.Option(None, "--topic"),
    partition: int | None = typer.Option(None, "--partition"),
    all_partitions: bool = typer.Option(False, "--all-topic-partitions"),
) -> None:
    """Elect partition leaders (kafka-leader-election.sh)."""
    if election_type.lower() not in ("preferred", "unclean"):
        fail("--election-type is preferred or unclean")
    if all_partitions == (topic is not None):
        fail("give --all-topic-partitions, or --topic with --partition")
    if topic is not None and partition is None:
        fail("--topic needs --partition")
    elect(bootstrap, election_type,
          None if all_partitions else [(str(topic), int(partition or 0))])


def elect(bootstrap: str, election_type: str, partitions: list[tuple[str, int]] | None) -> None:
    """Run one election of `election_type` for `partitions` (None: every partition) and
    print Kafka's result lines; exit 1 if a partition failed."""
    from confluent_kafka import ElectionType, KafkaError, TopicPartition
    from confluent_kafka.admin import AdminClient

    kind = {"preferred": ElectionType.PREFERRED,
            "unclean": ElectionType.UNCLEAN}[election_type.lower()]
    wanted = None if partitions is None else [TopicPartition(t, p) for t, p in partitions]
    label = election_type.upper()
    with reported():
        admin = AdminClient(client_config(bootstrap))
        # no timeouts as arguments: confluent-kafka 2.16's binding rejects any keyword
        # there ("more argument specifiers than keyword list entries")
        results = admin.elect_leaders(kind, wanted).result(TIMEOUT_S)
    done, not_needed, failed = [], [], []
    for tp, error in sorted(results.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
        name = f"{tp.topic}-{tp.partition}"
        if error is None:
            done.append(name)
            continue
        # the binding hands back KafkaError values here, not KafkaExceptions
        err = error if isinstance(error, KafkaError) else error.args[0]
        if err.code() == KafkaError.ELECTION_NOT_NEEDED:
            not_needed.append(name)
        else:
            failed.append(f"{name}: {err.str()}")
    if done:
        print(f"Successfully completed leader election ({label}) for partitions "
              + ", ".join(done))
    if not_needed:
        print("Valid replica already elected for partitions " + ", ".join(not_needed))
    for line in failed:
        print(f"Error completing leader election ({label}) for partition: {line}")
    if not (done or not_needed or failed):
        print(f"No partition needed a {election_type.lower()} election")
    if failed:
        raise typer.Exit(1)
