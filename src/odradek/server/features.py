"""Feature flags (KIP-584, KIP-778, KIP-1022) as a Kafka 4 broker reports them.

A Kafka 4 broker tells clients, in ApiVersions v3+, which versions of each feature it
supports and at which level the cluster has finalized it; clients pick protocols by
them (a Java producer uses KIP-890's transaction flow only at transaction.version 2).
odradek's levels are fixed by what it implements, so each supported range is exactly
the finalized level: claiming a range would let UpdateFeatures move a level this
broker cannot honour.
- metadata.version 25 (4.0-IV3): the 4.0 protocol set odradek serves;
- group.version 1: the KIP-848 consumer group protocol is served;
- transaction.version 2 (KIP-890 part 2), what Kafka 4 finalizes for a new cluster.
  As in Kafka, the level tells clients which protocol to use; the broker serves each
  request by its version: EndTxn v5 ends a transaction with an epoch bump, Produce v12
  and TxnOffsetCommit v5 add their partitions to the transaction themselves (the
  partition leader asks the coordinator: AddPartitionsToTxn v5, verify_only false),
  while older versions (librdkafka, kafka-python, aiokafka, KafkaJS) keep transaction
  version 1's protocol. Kafka 4 advertises those API versions whatever the level is;
  so does odradek. The level also decides how the coordinator's own aborts (timeouts,
  fences) bump the epoch.
A level-0 feature is not listed as finalized, as in Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Feature:
    name: str
    min_version: int
    max_version: int
    finalized: int


FEATURES: tuple[Feature, ...] = (
    Feature("group.version", 1, 1, 1),
    Feature("metadata.version", 25, 25, 25),
    Feature("transaction.version", 2, 2, 2),
)
BY_NAME = {f.name: f for f in FEATURES}
# Kafka uses the metadata log offset of the last feature change; ours never change.
FINALIZED_EPOCH = 1


def level(name: str) -> int:
    """The finalized level of a feature (0 when it is not finalized)."""
    feature = BY_NAME.get(name)
    return 0 if feature is None else feature.finalized


def finalized() -> tuple[Feature, ...]:
    return tuple(f for f in FEATURES if f.finalized > 0)


def update_error(name: str, level: int, upgrade_type: int, node_id: int) -> str | None:
    """Why a finalized level cannot become `level` (Kafka's words), or None when the
    update changes nothing and is accepted."""
    if upgrade_type not in (1, 2, 3):
        return _invalid(name, level, "The controller does not support the given upgrade type.")
    if level < 0:
        return _invalid(name, level, "A feature version cannot be less than 0.")
    feature = BY_NAME.get(name)
    if feature is None:
        return _invalid(name, level, f"Local controller {node_id} does not support this feature.")
    if level == feature.finalized:
        return None
    if level < feature.finalized and upgrade_type == 1:
        return _invalid(name, level, "Can't downgrade the version of this feature without "
                        "setting the upgrade type to either safe or unsafe downgrade.")
    return _invalid(name, level, f"Local controller {node_id} only supports versions "
                    f"{feature.min_version}-{feature.max_version}")


def _invalid(name: str, level: int, why: str) -> str:
    return f"Invalid update version {level} for feature {name}. {why}"
