"""`odradek kafka-topics`: Kafka's kafka-topics.sh (TopicCommand), flag for flag."""

from __future__ import annotations

import re
import sys
from typing import Any

from odradek.cli.kafka.client import TIMEOUT_S, ToolError, admin, client_conf, message_of
from odradek.cli.kafka.jopt import (
    OptionError,
    Parsed,
    Parser,
    check_invalid,
    check_required,
    exactly_one_action,
    help_or_version,
    usage_and_exit,
)

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state",
                             "__share_group_state"})
_ALTER_HINT = " (To alter topic configurations, the kafka-configs tool can be used.)"


class IllegalArgument(Exception):
    """Java's IllegalArgumentException: TopicCommand prints it bare on stderr."""


class _Options:
    def __init__(self) -> None:
        p = self.parser = Parser()
        self.bootstrap = p.option("bootstrap-server", "REQUIRED: The Kafka server to connect to.",
                                  "server to connect to")
        self.command_config = p.option(
            "command-config", "Property file containing configs to be passed to Admin Client.",
            "command config property file")
        self.list = p.flag("list", "List all available topics.")
        self.create = p.flag("create", "Create a new topic.")
        self.delete = p.flag("delete", "Delete a topic.")
        self.alter = p.flag("alter", "Alter the number of partitions and replica assignment."
                            + _ALTER_HINT)
        self.describe = p.flag("describe", "List details for the given topics.")
        self.topic = p.option("topic", "The topic to create, alter, describe or delete. It also "
                              "accepts a regular expression, except for --create option.", "topic")
        self.topic_id = p.option("topic-id", "The topic-id to describe.", "topic-id")
        self.config = p.option("config", "A topic configuration override for the topic being "
                               "created. It is supported only in combination with --create."
                               + _ALTER_HINT, "name=value")
        self.delete_config = p.option("delete-config", "This option is no longer supported and "
                                      "has been deprecated since 4.0", "name")
        self.partitions = p.option("partitions", "The number of partitions for the topic being "
                                   "created or altered.", "# of partitions", "Integer")
        self.replication_factor = p.option(
            "replication-factor", "The replication factor for each partition in the topic being "
            "created. If not supplied, the topic uses the cluster default.",
            "replication factor", "Integer")
        self.replica_assignment = p.option(
            "replica-assignment", "A list of manual partition-to-broker assignments for the "
            "topic being created or altered.",
            "broker_id_for_part1_replica1 : broker_id_for_part1_replica2 , "
            "broker_id_for_part2_replica1 : broker_id_for_part2_replica2 , ...")
        self.under_replicated = p.flag("under-replicated-partitions", "If set when describing "
                                       "topics, only show under-replicated partitions.")
        self.unavailable = p.flag("unavailable-partitions", "If set when describing topics, only "
                                  "show partitions whose leader is not available.")
        self.under_min_isr = p.flag("under-min-isr-partitions", "If set when describing topics, "
                                    "only show partitions whose isr count is less than the "
                                    "configured minimum.")
        self.at_min_isr = p.flag("at-min-isr-partitions", "If set when describing topics, only "
                                 "show partitions whose isr count is equal to the configured "
                                 "minimum.")
        self.with_overrides = p.flag("topics-with-overrides", "If set when describing topics, "
                                     "only show topics that have overridden configs.")
        self.if_exists = p.flag("if-exists", "If set when altering or deleting or describing "
                                "topics, the action will only execute if the topic exists.")
        self.if_not_exists = p.flag("if-not-exists", "If set when creating topics, the action "
                                    "will only execute if the topic does not already exist.")
        self.exclude_internal = p.flag("exclude-internal", "Exclude internal topics when listing "
                                       "or describing topics. By default, the internal topics "
                                       "are included.")
        self.partition_limit = p.option(
            "partition-size-limit-per-response", "The maximum partition size to be included in "
            "one DescribeTopicPartitions response.",
            "maximum number of partitions per response", "Integer")

    def check(self, o: Parsed) -> None:
        p = self.parser
        if not o.raw:
            usage_and_exit(p, "Create, delete, describe, or change a topic.")
        help_or_version(p, o, "This tool helps to create, delete, describe, or change a topic.")
        actions = [self.create, self.list, self.alter, self.describe, self.delete]
        exactly_one_action(p, o, actions, "Command must include exactly one action: --list, "
                           "--describe, --create, --alter or --delete")
        if o.has(self.delete_config):
            print("delete-config option is no longer supported and deprecated since version "
                  "4.0. The config will be fully removed in future releases.", file=sys.stderr)
        if not o.has(self.bootstrap):
            raise IllegalArgument("--bootstrap-server must be specified")
        if o.has(self.describe) and o.has(self.if_exists) and not o.has(self.topic) \
                and not o.has(self.topic_id):
            usage_and_exit(p, "--topic or --topic-id is required to describe a topic")
        if not o.has(self.list) and not o.has(self.describe):
            check_required(p, o, self.topic)
        if o.has(self.alter):
            if o.has(self.config):
                usage_and_exit(p, f'Option combination "[{self.bootstrap}, {self.config}]" '
                               f'can\'t be used with option "{self.alter}"{_ALTER_HINT}')
            check_required(p, o, self.partitions)

        def others(*keep: Any) -> list[Any]:
            return [a for a in actions if a not in keep]

        check_invalid(p, o, self.config, *others(self.alter, self.create))
        check_invalid(p, o, self.partitions, *others(self.alter, self.create))
        check_invalid(p, o, self.replication_factor, *others(self.create))
        check_invalid(p, o, self.replica_assignment, *others(self.alter, self.create))
        if o.has(self.create):
            check_invalid(p, o, self.replica_assignment, self.partitions, self.replication_factor)
        reports = [self.under_replicated, self.under_min_isr, self.at_min_isr, self.unavailable]
        for report in reports:
            check_invalid(p, o, report, *others(self.describe), self.with_overrides)
        check_invalid(p, o, self.with_overrides, *others(self.describe), *reports)
        check_invalid(p, o, self.if_exists, *others(self.alter, self.delete, self.describe))
        check_invalid(p, o, self.if_not_exists, *others(self.create))
        check_invalid(p, o, self.exclude_internal, *others(self.list, self.describe))


def main(argv: list[str]) -> None:
    spec = _Options()
    try:
        opts = spec.parser.parse(argv)
        spec.check(opts)
        conf = client_conf(opts.value(spec.bootstrap), opts.all(spec.command_config))
        client = admin(conf)
        if opts.has(spec.create):
            _create(client, spec, opts)
        elif opts.has(spec.list):
            print("\n".join(_topics(client, opts.value(spec.topic),
                                    opts.has(spec.exclude_internal))))
        elif opts.has(spec.alter):
            _alter(client, spec, opts)
        elif opts.has(spec.describe):
            _describe(client, spec, opts)
        else:
            _delete(client, spec, opts)
    except IllegalArgument as e:
        print(e, file=sys.stderr)
        sys.exit(1)
    except (OptionError, ToolError) as e:
        _failed(str(e))
    except Exception as e:  # confluent-kafka's KafkaException: the tool's one line
        if type(e).__name__ != "KafkaException":
            raise
        _failed(message_of(e))


def _failed(message: str) -> None:
    print(f"Error while executing topic command : {message}")
    sys.exit(1)


def _include(pattern: str) -> re.Pattern[str]:
    """Kafka's IncludeList: commas mean alternatives, quotes and spaces are dropped."""
    text = re.sub(r"[\"']+$", "", re.sub(r"^[\"']+", "", pattern.strip().replace(",", "|")
                                         .replace(" ", "")))
    try:
        return re.compile(text)
    except re.error:
        raise ToolError(f"Illegal regular expression: {pattern}") from None


def _topics(client: Any, pattern: str | None, exclude_internal: bool) -> list[str]:
    names = sorted(client.list_topics(timeout=TIMEOUT_S).topics)
    if exclude_internal:
        names = [n for n in names if n not in INTERNAL_TOPICS]
    if pattern is not None:
        regex = _include(pattern)
        names = [n for n in names if regex.fullmatch(n)]
    return names


def _ensure_exists(found: list[str], topic: str | None, required: bool) -> None:
    if topic and required and not found:
        raise IllegalArgument(f"Topic '{topic}' does not exist as expected")


def _assignment(text: str) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for i, part in enumerate(text.split(",")):
        try:
            brokers = [int(b.strip()) for b in part.split(":")]
        except ValueError:
            raise ToolError(f'For input string: "{part}"') from None
        dups = sorted({b for b in brokers if brokers.count(b) > 1})
        if dups:
            raise ToolError("Partition replica lists may not contain duplicate entries: "
                            + ",".join(map(str, dups)))
        out[i] = brokers
        if len(brokers) != len(out[0]):
            raise ToolError(f"Partition {i} has different replication factor: {brokers}")
    return out


def _configs(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        parts = re.split(r"\s*=\s*", item)
        if len(parts) != 2:
            raise IllegalArgument("requirement failed: Invalid topic config: all configs to be "
                                  "added must be in the format \"key=val\".")
        out[parts[0].strip()] = parts[1].strip()
    return out


def _create(client: Any, spec: _Options, opts: Parsed) -> None:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import NewTopic

    name = opts.value(spec.topic) or ""
    if "." in name and "_" in name:
        print("WARNING: Due to limitations in metric names, topics with a period ('.') or "
              "underscore ('_') could collide. To avoid issues it is best to use either, but "
              "not both.")
    partitions = opts.int_value(spec.partitions)
    rf = opts.int_value(spec.replication_factor)
    if rf is not None and not 1 <= rf <= 32767:
        raise IllegalArgument("The replication factor must be between 1 and 32767 inclusive")
    if partitions is not None and partitions < 1:
        raise IllegalArgument("The partitions must be greater than 0")
    configs = _configs(opts.all(spec.config))
    assignment = opts.value(spec.replica_assignment)
    if assignment:
        replicas = _assignment(assignment)
        new = NewTopic(name, replica_assignment=[replicas[i] for i in sorted(replicas)],
                       config=configs)
    else:
        new = NewTopic(name, num_partitions=-1 if partitions is None else partitions,
                       replication_factor=-1 if rf is None else rf, config=configs)
    future = client.create_topics([new], request_timeout=TIMEOUT_S)[name]
    try:
        future.result(TIMEOUT_S)
    except Exception as e:
        err = e.args[0] if e.args else None
        if opts.has(spec.if_not_exists) and getattr(err, "code", lambda: None)() \
                == KafkaError.TOPIC_ALREADY_EXISTS:
            return
        raise
    print(f"Created topic {name}.")


def _alter(client: Any, spec: _Options, opts: Parsed) -> None:
    from confluent_kafka.admin import NewPartitions

    topic = opts.value(spec.topic)
    found = _topics(client, topic, opts.has(spec.exclude_internal))
    _ensure_exists(found, topic, not opts.has(spec.if_exists))
    count = opts.int_value(spec.partitions) or 0
    assignment = opts.value(spec.replica_assignment)
    md = client.list_topics(timeout=TIMEOUT_S).topics
    news = []
    for name in found:
        if assignment:
            replicas = _assignment(assignment)
            extra = [replicas[i] for i in sorted(replicas) if i >= len(md[name].partitions)]
            news.append(NewPartitions(name, count, replica_assignment=extra))
        else:
            news.append(NewPartitions(name, count))
    if news:
        for future in client.create_partitions(news, request_timeout=TIMEOUT_S).values():
            future.result(TIMEOUT_S)


def _delete(client: Any, spec: _Options, opts: Parsed) -> None:
    topic = opts.value(spec.topic)
    found = _topics(client, topic, opts.has(spec.exclude_internal))
    _ensure_exists(found, topic, not opts.has(spec.if_exists))
    if found:
        for future in client.delete_topics(found, request_timeout=TIMEOUT_S).values():
            future.result(TIMEOUT_S)


def _describe(client: Any, spec: _Options, opts: Parsed) -> None:
    from odradek.cli.topics import describe_topics, kafka_uuid

    topic_id = opts.value(spec.topic_id)
    exclude = opts.has(spec.exclude_internal)
    if topic_id and topic_id != "AAAAAAAAAAAAAAAAAAAAAA":
        from confluent_kafka import TopicCollection

        names = _topics(client, None, exclude)
        described = client.describe_topics(TopicCollection(names)) if names else {}
        found = [n for n, f in described.items()
                 if kafka_uuid(f.result(TIMEOUT_S).topic_id) == topic_id]
        if not found and not opts.has(spec.if_exists):
            raise IllegalArgument(f"TopicId '{topic_id}' does not exist as expected")
    else:
        topic = opts.value(spec.topic)
        found = _topics(client, topic, exclude)
        _ensure_exists(found, topic, not opts.has(spec.if_exists))
    reports = {name for name, flag in (
        ("under-replicated", spec.under_replicated), ("unavailable", spec.unavailable),
        ("under-min-isr", spec.under_min_isr), ("at-min-isr", spec.at_min_isr))
        if opts.has(flag)}
    for line in describe_topics(client, found, reports, opts.has(spec.with_overrides)):
        print(line)
