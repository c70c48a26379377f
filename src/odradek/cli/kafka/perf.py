"""kafka-producer-perf-test and kafka-consumer-perf-test over `odradek perf`.

ProducerPerformance parses with argparse4j (GNU-style, as Python's argparse), and
ConsumerPerformance with joptsimple; each keeps its parser's syntax and messages here.
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from odradek.cli import perf
from odradek.cli.kafka.client import load_properties
from odradek.cli.kafka.jopt import Parser, check_required, help_or_version, try_parse


def main(tool: str, argv: list[str]) -> None:
    (_produce if tool == "kafka-producer-perf-test" else _consume)(argv)


def _props(files: list[str], pairs: list[str]) -> list[str]:
    out = [f"{k}={v}" for f in files for k, v in load_properties(f).items()]
    return out + pairs


class _ArgParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse4j: usage, then "prog: error: message"
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(1)


def _produce(argv: list[str]) -> None:
    a = _ArgParser(prog="producer-performance", add_help=True,
                   description="This tool is used to verify the producer performance.")
    a.add_argument("--topic", required=True, metavar="TOPIC", help="produce messages to this topic")
    a.add_argument("--num-records", required=True, type=int, metavar="NUM-RECORDS")
    a.add_argument("--record-size", type=int, metavar="RECORD-SIZE")
    a.add_argument("--payload-file", metavar="PAYLOAD-FILE")
    a.add_argument("--payload-delimiter", default="\\n", metavar="PAYLOAD-DELIMITER")
    a.add_argument("--throughput", required=True, type=float, metavar="THROUGHPUT")
    a.add_argument("--producer-props", nargs="+", default=[], metavar="PROP-NAME=PROP-VALUE")
    a.add_argument("--producer.config", dest="config", metavar="CONFIG-FILE")
    a.add_argument("--command-config", dest="command_config", metavar="CONFIG-FILE")
    a.add_argument("--bootstrap-server", metavar="BOOTSTRAP-SERVER")
    a.add_argument("--print-metrics", action="store_true")
    a.add_argument("--transactional-id", metavar="TRANSACTIONAL-ID")
    a.add_argument("--transaction-duration-ms", type=int, metavar="DURATION")
    a.add_argument("--payload-monotonic", action="store_true")
    ns = a.parse_args(argv)
    if ns.record_size is None and ns.payload_file is None and not ns.payload_monotonic:
        a.error("one of --record-size, --payload-file or --payload-monotonic is required")
    for unsupported in ("payload_file", "transactional_id", "transaction_duration_ms"):
        if getattr(ns, unsupported):
            a.error(f"odradek does not support --{unsupported.replace('_', '-')} yet")
    if ns.payload_monotonic or ns.print_metrics:
        a.error("odradek does not support --payload-monotonic or --print-metrics yet")
    props = _props([f for f in (ns.config, ns.command_config) if f], ns.producer_props)
    bootstrap = ns.bootstrap_server or next(
        (p.split("=", 1)[1] for p in props if p.startswith("bootstrap.servers=")), None)
    if bootstrap is None:
        a.error("--bootstrap-server or bootstrap.servers in --producer-props is required")
    perf.produce(topic=ns.topic, num_records=ns.num_records, record_size=ns.record_size,
                 throughput=ns.throughput, producer_props=props, bootstrap=str(bootstrap),
                 timeout=600.0, as_json=False)


def _consume(argv: list[str]) -> None:
    p = Parser()
    bootstrap = p.option("bootstrap-server", "REQUIRED unless --broker-list(deprecated) is "
                         "specified. The server(s) to connect to.", "server to connect to")
    topic = p.option("topic", "REQUIRED: The topic to consume from.", "topic")
    group = p.option("group", "The group id to consume on.", "gid")
    messages = p.option("messages", "REQUIRED: The number of messages to consume.", "count",
                        "Long")
    from_latest = p.flag("from-latest", "If the consumer does not already have an established "
                         "offset to consume from, start with the latest message present in the "
                         "log rather than the earliest message.")
    config = p.option("consumer.config", "Consumer config properties file.", "config file")
    command_config = p.option("command-config", "Config properties file.", "config file")
    hide_header = p.flag("hide-header", "If set, skips printing the header for the stats.")
    timeout = p.option("timeout", "The maximum allowed time in milliseconds between returned "
                       "records.", "milliseconds", "Long")
    for name in ("fetch-size", "socket-buffer-size", "reporting-interval"):
        p.option(name, arg=name, type="Integer")
    for name in ("print-metrics", "show-detailed-stats"):
        p.flag(name)
    p.option("date-format", arg="date format")
    opts = try_parse(p, argv)
    help_or_version(p, opts, "This tool helps in performance test for the full zookeeper "
                    "consumer")
    check_required(p, opts, topic, messages, bootstrap)
    from odradek.cli.kafka.jopt import usage_and_exit

    for name in ("fetch-size", "socket-buffer-size", "reporting-interval", "print-metrics",
                 "show-detailed-stats", "date-format"):
        if opts.has(p.specs[name]):
            usage_and_exit(p, f"odradek does not support --{name} yet")
    props = _props(opts.all(config) + opts.all(command_config), [])
    perf.consume(topic=opts.value(topic) or "", messages=opts.int_value(messages) or 0,
                 group=opts.value(group), from_latest=opts.has(from_latest),
                 consumer_props=props, bootstrap=opts.value(bootstrap) or "",
                 timeout=(opts.int_value(timeout) or 10_000) / 1000,
                 hide_header=opts.has(hide_header), as_json=False)
