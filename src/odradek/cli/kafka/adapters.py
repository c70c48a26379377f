"""kafka-dump-log, kafka-reassign-partitions, kafka-leader-election, kafka-delete-records.

odradek's own commands already take these tools' flags and print their output; here is
Kafka's joptsimple parsing and Kafka's checks in front of them. Flags odradek cannot
honour (replication throttles, log-dir moves) are refused, never silently ignored.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import NoReturn

from odradek.cli import delete_records, dump_log, leader_election, reassign
from odradek.cli.common import command_properties
from odradek.cli.kafka.client import client_conf
from odradek.cli.kafka.jopt import (
    Parsed,
    Parser,
    ToolExit,
    check_required,
    exactly_one_action,
    help_or_version,
    try_parse,
    usage_and_exit,
)
from odradek.storage.dump import DEFAULT_MAX_MESSAGE_SIZE
from odradek.storage.dump_batches import INT32_MAX


def main(tool: str, argv: list[str]) -> None:
    {"kafka-dump-log": _dump_log, "kafka-reassign-partitions": _reassign,
     "kafka-leader-election": _leader_election,
     "kafka-delete-records": _delete_records}[tool](argv)


def _connect(p: Parser, opts: Parsed, *config_flags: str) -> str:
    """--bootstrap-server, with the properties file of `config_flags` for every client."""
    files = [f for name in config_flags for f in opts.all(p.specs[name])]
    conf = client_conf(None, files)
    conf.pop("log_level", None)
    command_properties.set(conf)
    return opts.value(p.specs["bootstrap-server"]) or ""


def _refuse(p: Parser, opts: Parsed, *names: str) -> None:
    for name in names:
        if opts.has(p.specs[name]):
            usage_and_exit(p, f"odradek does not support --{name}")


def _dump_log(argv: list[str]) -> None:
    p = Parser()
    files = p.option("files", "REQUIRED: The comma separated list of data and index log files "
                     "to be dumped.", "file1, file2, ...")
    flags = {n: p.flag(n) for n in ("print-data-log", "deep-iteration", "index-sanity-check",
                                    "verify-index-only", "offsets-decoder",
                                    "transaction-log-decoder", "skip-record-metadata",
                                    "cluster-metadata-decoder", "remote-log-metadata-decoder",
                                    "share-group-state-decoder")}
    max_bytes = p.option("max-bytes", "Limit the amount of total batches read in bytes "
                         "avoiding reading the whole .log file(s).", "size", "Integer")
    max_message = p.option("max-message-size", "Size of largest message.", "size", "Integer")
    for name in ("key-decoder-class", "value-decoder-class"):
        p.option(name, "Unsupported by odradek: Java decoder classes.", "class")
    opts = try_parse(p, argv)
    help_or_version(p, opts, "This tool helps to parse a log file and dump its contents to the "
                    "console, useful for debugging a seemingly corrupt log segment.")
    check_required(p, opts, files)
    _refuse(p, opts, "cluster-metadata-decoder", "remote-log-metadata-decoder",
            "share-group-state-decoder", "key-decoder-class", "value-decoder-class")
    dump_log.dump_log(
        files=None, files_csv=opts.all(files),
        print_data_log=opts.has(flags["print-data-log"]),
        deep_iteration=opts.has(flags["deep-iteration"]),
        max_bytes=opts.int_value(max_bytes, INT32_MAX) or 0,
        index_sanity_check=opts.has(flags["index-sanity-check"]),
        verify_index_only=opts.has(flags["verify-index-only"]),
        offsets_decoder=opts.has(flags["offsets-decoder"]),
        transaction_log_decoder=opts.has(flags["transaction-log-decoder"]),
        max_message_size=opts.int_value(max_message, DEFAULT_MAX_MESSAGE_SIZE) or 0,
        skip_record_metadata=opts.has(flags["skip-record-metadata"]))


def _reassign(argv: list[str]) -> None:
    p = Parser()
    p.option("bootstrap-server", "REQUIRED: the server(s) to use for bootstrapping.",
             "Server(s) to use for bootstrapping")
    p.option("command-config", "Property file containing configs to be passed to Admin Client.",
             "Admin client property file")
    actions = [p.flag("generate"), p.flag("execute"), p.flag("verify"), p.flag("cancel"),
               p.flag("list")]
    reassignment = p.option("reassignment-json-file", "The JSON file with the partition "
                            "reassignment configuration.", "manual assignment json file path")
    topics = p.option("topics-to-move-json-file", "Generate a reassignment configuration to "
                      "move the partitions of the specified topics to the list of brokers "
                      "specified by the --broker-list option.", "topics to reassign json file path")
    brokers = p.option("broker-list", "The list of brokers to which the partitions need to be "
                       "reassigned in the form \"0,1,2\".", "brokerlist")
    for name in ("disable-rack-aware", "additional", "preserve-throttles"):
        p.flag(name)
    throttle = p.option("throttle", "The movement of partitions between brokers will be "
                        "throttled to this value (bytes/sec).", "throttle", "Long")
    for name in ("replica-alter-log-dirs-throttle", "timeout"):
        p.option(name, arg=name, type="Long")
    opts = try_parse(p, argv)
    help_or_version(p, opts, "This tool helps to move topic partitions between replicas.")
    exactly_one_action(p, opts, actions, "Command must include exactly one action: "
                       "--generate, --execute, --verify, --cancel, --list")
    check_required(p, opts, p.specs["bootstrap-server"])
    _refuse(p, opts, "disable-rack-aware", "additional", "preserve-throttles",
            "replica-alter-log-dirs-throttle")
    if opts.has(actions[4]):
        print(reassign.ongoing_text(_connect(p, opts, "command-config")))
        return
    if opts.has(actions[0]):
        check_required(p, opts, topics, brokers)
    else:
        check_required(p, opts, reassignment)
    file = opts.value(reassignment)
    moves = opts.value(topics)
    rate = opts.int_value(throttle, -1)
    reassign.reassign(
        bootstrap=_connect(p, opts, "command-config"),
        do_generate=opts.has(actions[0]), do_execute=opts.has(actions[1]),
        do_verify=opts.has(actions[2]), do_cancel=opts.has(actions[3]),
        topics_to_move=Path(moves) if moves else None, broker_list=opts.value(brokers),
        reassignment=Path(file) if file else None,
        throttle=-1 if rate is None else rate)


def _leader_election(argv: list[str]) -> None:
    p = Parser()
    p.option("bootstrap-server", "A hostname and port for the broker to connect to, in the "
             "form host:port. Multiple comma separated URLs can be given. REQUIRED.",
             "host:port")
    p.option("admin.config", "Configuration properties files to pass to the admin client",
             "config file")
    json_file = p.option("path-to-json-file", "The JSON file with the list of partitions for "
                         "which leader elections should be performed.", "Path to JSON file")
    topic = p.option("topic", "Name of topic for which to perform an election.", "topic name")
    partition = p.option("partition", "Partition id for which to perform an election. REQUIRED "
                         "if --topic is specified.", "partition id", "Integer")
    all_partitions = p.flag("all-topic-partitions", "Perform election on all of the eligible "
                            "topic partitions based on the type of election (see the "
                            "--election-type flag).")
    kind = p.option("election-type", "Type of election to attempt. Possible values are "
                    "\"preferred\" for preferred leader election or \"unclean\" for unclean "
                    "leader election.", "election type")
    opts = try_parse(p, argv)
    help_or_version(p, opts, "This tool attempts to elect a new leader for a set of topic "
                    "partitions. The type of elections supported are preferred replicas and "
                    "unclean replicas.")
    # LeaderElectionCommand's own checks: bare messages on stderr, exit 1
    missing = [s.name for s in (p.specs["bootstrap-server"], kind) if not opts.has(s)]
    if missing:
        _leave(f"Missing required option(s): {', '.join(missing)}")
    if sum(opts.has(s) for s in (topic, all_partitions, json_file)) != 1:
        _leave("One and only one of the following options is required: topic, "
               "all-topic-partitions, path-to-json-file")
    if opts.has(topic) and not opts.has(partition):
        _leave("Missing required option(s): partition")
    if opts.has(partition) and not opts.has(topic):
        _leave("Option partition is only allowed if topic is used")
    election = (opts.value(kind) or "").lower()
    if election not in ("preferred", "unclean"):
        _leave(f"Cannot parse argument '{opts.value(kind)}' of option election-type")
    partitions: list[tuple[str, int]] | None = None
    if opts.has(topic):
        partitions = [(opts.value(topic) or "", opts.int_value(partition) or 0)]
    elif opts.has(json_file):
        partitions = _election_partitions(opts.value(json_file) or "")
    leader_election.elect(_connect(p, opts, "admin.config"), election, partitions)


def _leave(message: str) -> NoReturn:
    print(message, file=sys.stderr)
    raise ToolExit(1)


def _election_partitions(path: str) -> list[tuple[str, int]]:
    """LeaderElectionCommand's JSON: {"partitions": [{"topic": "t", "partition": 0}]}."""
    try:
        doc = json.loads(Path(path).read_text())
    except OSError as e:
        _leave(f"{path} ({e.strerror})")
    except ValueError as e:
        _leave(f"Unable to parse {path}: {e}")
    if not doc:
        _leave("Replica election data is empty")
    if "partitions" not in doc:
        _leave('Replica election data is missing "partitions" field')
    out: list[tuple[str, int]] = []
    for entry in doc["partitions"]:
        try:
            tp = (str(entry["topic"]), int(entry["partition"]))
        except (KeyError, TypeError, ValueError):
            _leave(f"Replica election data has a malformed partition: {entry}")
        if tp in out:
            _leave(f"Replica election data contains duplicate partitions: {tp[0]}-{tp[1]}")
        out.append(tp)
    return out


def _delete_records(argv: list[str]) -> None:
    p = Parser()
    p.option("bootstrap-server", "REQUIRED: The server to connect to.", "server(s) to use for "
             "bootstrapping")
    p.option("command-config", "A property file containing configs to be passed to Admin "
             "Client.", "command config property file path")
    offsets = p.option("offset-json-file", "REQUIRED: The JSON file with offset per partition. "
                       "The format to use is:\n{\"partitions\":\n  [{\"topic\": \"foo\", "
                       "\"partition\": 1, \"offset\": 1}],\n \"version\":1\n}",
                       "Offset json file path")
    opts = try_parse(p, argv)
    help_or_version(p, opts, "This tool helps to delete records of the given partitions down "
                    "to the specified offset.")
    check_required(p, opts, p.specs["bootstrap-server"], offsets)
    delete_records.delete_records(
        offset_json_file=Path(opts.value(offsets) or ""), topic=None, partition=None,
        offset=None, bootstrap=_connect(p, opts, "command-config"))
