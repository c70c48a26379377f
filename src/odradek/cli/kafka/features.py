"""`kafka-features.sh` (Kafka 4's FeatureCommand): `describe`, `upgrade`, `downgrade` and
`disable` of finalized feature levels, with Kafka's flags and Kafka's lines.

librdkafka has no feature admin calls, so this tool speaks through kafka-python's admin
client (DescribeFeatures is ApiVersions v3+, UpdateFeatures is API 57). An update that
fails prints FeatureCommand's `Could not <op> <feature> to <level>. <reason>` per
feature and `N out of M operation(s) failed.` on stderr, exit 1; `--dry-run` sends the
update with `validate_only` and prints `… can be upgraded to …`.
`--release-version`, `version-mapping` and `feature-dependencies` are not offered.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from odradek.cli.kafka.client import ToolError, librdkafka_config, load_properties

# metadata.version levels FeatureCommand prints by their release name
_METADATA_VERSIONS = {22: "4.0-IV0", 23: "4.0-IV1", 24: "4.0-IV2", 25: "4.0-IV3"}
# kafka-python raises a failed UpdateFeatures as "Request … failed with response
# 'UpdateFeaturesResponse(…, error_message='…')'": the broker's message is the reason
_ERROR_MESSAGE = re.compile(r"error_message=(['\"])(.*)\1\)'\.?$", re.S)
_UPGRADE_TYPES = {"upgrade": "UPGRADE", "downgrade": "SAFE_DOWNGRADE", "disable": "SAFE_DOWNGRADE"}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kafka-features",
                                description="This tool manages feature flags in Kafka.")
    p.add_argument("--command-config", help="Property file containing configs to be passed "
                   "to Admin Client.")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--bootstrap-server", help="A comma-separated list of host:port pairs "
                       "to use for establishing the connection to the Kafka cluster.")
    where.add_argument("--bootstrap-controller", help="A comma-separated list of host:port "
                       "pairs to use for establishing the connection to the KRaft quorum.")
    ops = p.add_subparsers(dest="op", required=True)
    ops.add_parser("describe", help="Describes the current active feature flags.")
    for op, text in (("upgrade", "Upgrade one or more feature flags."),
                     ("downgrade", "Downgrade one or more feature flags."),
                     ("disable", "Disable one or more feature flags. This is the same as "
                      "downgrading the version to zero.")):
        sub = ops.add_parser(op, help=text)
        sub.add_argument("--feature", action="append", default=[],
                         help="A feature to " + op + ("" if op == "disable" else
                                                       ", as feature=level"))
        if op == "downgrade":
            sub.add_argument("--unsafe", action="store_true", help="Perform this downgrade "
                             "even if it may irreversibly destroy metadata.")
        sub.add_argument("--dry-run", action="store_true",
                         help="Validate this operation, but do not perform it.")
    return p


def _admin_config(bootstrap: str, command_config: str | None) -> dict[str, Any]:
    """The Java client's properties as kafka-python's admin client takes them."""
    conf: dict[str, Any] = {"bootstrap_servers": bootstrap}
    props = librdkafka_config(load_properties(command_config)) if command_config else {}
    names = {"security.protocol": "security_protocol", "sasl.mechanism": "sasl_mechanism",
             "sasl.username": "sasl_plain_username", "sasl.password": "sasl_plain_password",
             "ssl.ca.location": "ssl_cafile", "client.id": "client_id"}
    for key, value in props.items():
        if key in names:
            conf[names[key]] = value
    return conf


def _level_text(feature: str, level: int) -> str:
    if feature == "metadata.version":
        return _METADATA_VERSIONS.get(level, str(level))
    return str(level)


def _describe(client: Any) -> None:
    features = client.describe_features()
    # one epoch for the cluster's finalized levels (kafka-python gives it per feature)
    epoch = next((f["finalized_epoch"] for f in features.values()
                  if f.get("finalized_epoch") is not None), None)
    for name, f in sorted(features.items()):
        low, high = f["supported"]
        finalized = (f.get("finalized") or (0, 0))[1]
        print(f"Feature: {name}\tSupportedMinVersion: {_level_text(name, low)}\t"
              f"SupportedMaxVersion: {_level_text(name, high)}\t"
              f"FinalizedVersionLevel: {_level_text(name, finalized)}\t"
              f"Epoch: {'-' if epoch is None else epoch}")


def _updates(op: str, args: argparse.Namespace) -> dict[str, tuple[str, int]]:
    kind = "UNSAFE_DOWNGRADE" if getattr(args, "unsafe", False) else _UPGRADE_TYPES[op]
    updates: dict[str, tuple[str, int]] = {}
    for item in args.feature:
        if op == "disable":
            name, level = item, 0
        else:
            name, sep, text = item.partition("=")
            if not sep or not text.strip().lstrip("-").isdigit():
                raise ToolError(f"Can't parse feature={item}; expected format: "
                                "feature=level")
            level = int(text)
        updates[name.strip()] = (kind, level)
    if not updates:
        raise ToolError(f"You must specify at least one feature to {op}")
    return updates


def _update(client: Any, op: str, args: argparse.Namespace) -> None:
    from kafka.errors import KafkaError

    updates = _updates(op, args)
    try:
        client.update_features(updates, validate_only=args.dry_run)
        failure = None
    except KafkaError as e:  # Kafka 4 fails every feature of the request with one error
        found = _ERROR_MESSAGE.search(str(e.args[0])) if e.args else None
        failure = found.group(2) if found else str(e.description)
    for name, (_, level) in sorted(updates.items()):
        what = f"disable {name}" if op == "disable" else f"{op} {name} to {level}"
        if failure is not None:
            print(f"{'Can not' if args.dry_run else 'Could not'} {what}. {failure}")
        else:
            done = "disabled." if op == "disable" else f"{op}d to {level}."
            print(f"{name}{' can be ' if args.dry_run else ' was '}{done}")
    if failure is not None:
        raise ToolError(f"{len(updates)} out of {len(updates)} operation(s) failed.")


def main(argv: list[str]) -> None:
    args = _parser().parse_args(argv)  # a usage error exits 2, as argparse4j's does
    try:
        from kafka.admin import KafkaAdminClient

        client = KafkaAdminClient(**_admin_config(
            args.bootstrap_server or args.bootstrap_controller, args.command_config))
        try:
            if args.op == "describe":
                _describe(client)
            else:
                _update(client, args.op, args)
        finally:
            client.close()
    except ToolError as e:
        print(e, file=sys.stderr)
        sys.exit(1)
