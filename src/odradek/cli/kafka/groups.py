"""`odradek kafka-consumer-groups`: Kafka's kafka-consumer-groups.sh (ConsumerGroupCommand).

The work is `odradek groups`'s; this is Kafka's option parsing and checks in front of it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from odradek.cli import groups
from odradek.cli.common import command_properties
from odradek.cli.kafka.client import TIMEOUT_S, admin, client_conf
from odradek.cli.kafka.jopt import (
    Parsed,
    Parser,
    Spec,
    check_invalid,
    check_required,
    help_or_version,
    try_parse,
    usage_and_exit,
)


class _Options:
    def __init__(self) -> None:
        p = self.parser = Parser()
        self.bootstrap = p.option("bootstrap-server", "REQUIRED: The server(s) to connect to.",
                                  "server to connect to")
        self.command_config = p.option("command-config", "Property file containing configs to "
                                       "be passed to Admin Client and Consumer.",
                                       "command config property file")
        self.group = p.option("group", "The consumer group we wish to act on.", "consumer group")
        self.topic = p.option("topic", "The topic whose consumer group information should be "
                              "deleted or topic whose should be included in the reset offset "
                              "process.", "topic")
        self.all_topics = p.flag("all-topics", "Consider all topics assigned to a group in the "
                                 "`reset-offsets` process.")
        self.list = p.flag("list", "List all consumer groups.")
        self.describe = p.flag("describe", "Describe consumer group and list offset lag (number "
                               "of messages not yet processed) related to given group.")
        self.all_groups = p.flag("all-groups", "Apply to all consumer groups.")
        self.delete = p.flag("delete", "Pass in groups to delete topic partition offsets and "
                             "ownership information over the entire consumer group.")
        self.timeout = p.option("timeout", "The timeout that can be set for some use cases.",
                                "timeout (ms)", "Long")
        self.reset = p.flag("reset-offsets", "Reset offsets of consumer group.")
        self.dry_run = p.flag("dry-run", "Only show results without executing changes on "
                              "Consumer Groups.")
        self.execute = p.flag("execute", "Execute operation.")
        self.export = p.flag("export", "Export operation execution to a CSV file.")
        self.to_offset = p.option("to-offset", "Reset offsets to a specific offset.", "offset",
                                  "Long")
        self.to_datetime = p.option("to-datetime", "Reset offsets to offset from datetime. "
                                    "Format: 'YYYY-MM-DDTHH:mm:SS.sss'", "datetime")
        self.by_duration = p.option("by-duration", "Reset offsets to offset by duration from "
                                    "current timestamp. Format: 'PnDTnHnMnS'", "duration")
        self.to_earliest = p.flag("to-earliest", "Reset offsets to earliest offset.")
        self.to_latest = p.flag("to-latest", "Reset offsets to latest offset.")
        self.to_current = p.flag("to-current", "Reset offsets to current offset.")
        self.shift_by = p.option("shift-by", "Reset offsets shifting current offset by 'n', "
                                 "where 'n' can be positive or negative.",
                                 "number-of-offsets", "Long")
        self.from_file = p.option("from-file", "Reset offsets to values defined in CSV file.",
                                  "path to CSV file")
        self.members = p.flag("members", "Describe members of the group.")
        self.verbose = p.flag("verbose", "Provide additional information, if any, when "
                              "describing the group.")
        self.offsets = p.flag("offsets", "Describe the group and list all topic partitions in "
                              "the group along with their offset lag. This is the default "
                              "sub-action.")
        self.state = p.flag("state", "When specified with '--describe', includes the state of "
                            "the group. When specified with '--list', it displays the state of "
                            "all groups.")
        self.delete_offsets = p.flag("delete-offsets", "Delete offsets of consumer group.")
        self.actions = [self.list, self.describe, self.delete, self.reset, self.delete_offsets]
        self.scenarios = [self.to_offset, self.to_datetime, self.by_duration, self.to_earliest,
                          self.to_latest, self.to_current, self.shift_by, self.from_file]

    def check(self, o: Parsed) -> None:
        p = self.parser
        help_or_version(p, o, "This tool helps to list all consumer groups, describe a consumer "
                        "group, delete consumer group info, or reset consumer group offsets.")
        if sum(o.has(a) for a in self.actions) != 1:
            usage_and_exit(p, "Command must include exactly one action: --list, --describe, "
                           "--delete, --reset-offsets, --delete-offsets")
        check_required(p, o, self.bootstrap)
        scope = f"{self.all_groups}, {self.group}"

        def needs_group(action: Spec) -> None:
            if o.has(action) and not o.has(self.group) and not o.has(self.all_groups):
                usage_and_exit(p, f"Option {action} takes one of these options: {scope}")

        needs_group(self.describe)
        if o.has(self.describe) and sum(o.has(x) for x in (self.members, self.offsets,
                                                           self.state)) > 1:
            usage_and_exit(p, f"Option {self.describe} takes at most one of these options: "
                           f"{self.members}, {self.offsets}, {self.state}")
        needs_group(self.delete)
        if o.has(self.delete) and o.has(self.topic):
            usage_and_exit(p, "The consumer does not support topic-specific offset deletion "
                           "from a consumer group.")
        if o.has(self.delete_offsets) and not (o.has(self.group) and o.has(self.topic)):
            usage_and_exit(p, f"Option {self.delete_offsets} takes the following options: "
                           f"{self.group}, {self.topic}")
        if o.has(self.reset):
            if o.has(self.dry_run) and o.has(self.execute):
                usage_and_exit(p, f"Option {self.reset} only accepts one of {self.execute} and "
                               f"{self.dry_run}")
            if not o.has(self.dry_run) and not o.has(self.execute):
                print("WARN: No action will be performed as the --execute option is missing."
                      "In a future major release, the default behavior of this command will be "
                      "to prompt the user before executing the reset rather than doing a dry "
                      "run. You should add the --dry-run option explicitly if you are scripting "
                      "this command and want to keep the current default behavior without "
                      "prompting.", file=sys.stderr)
            needs_group(self.reset)
            for s in self.scenarios:
                check_invalid(p, o, s, *[x for x in self.scenarios if x is not s])
        check_invalid(p, o, self.group, self.all_groups)
        check_invalid(p, o, self.group, self.list)
        check_invalid(p, o, self.topic, self.list, self.describe)


def main(argv: list[str]) -> None:
    spec = _Options()
    opts = try_parse(spec.parser, argv)
    spec.check(opts)
    bootstrap = opts.value(spec.bootstrap) or ""
    conf = client_conf(None, opts.all(spec.command_config))
    conf.pop("log_level", None)
    command_properties.set(conf)
    if opts.has(spec.list):
        groups.list_groups(state=opts.has(spec.state), bootstrap=bootstrap)
        return
    names = opts.all(spec.group) or _all_groups(bootstrap)
    if opts.has(spec.describe):
        for i, group in enumerate(names):
            if i:
                print()
            groups.describe(group=group, members=opts.has(spec.members),
                            state=opts.has(spec.state), bootstrap=bootstrap)
    elif opts.has(spec.delete):
        groups.delete(groups=names, bootstrap=bootstrap)
    elif opts.has(spec.delete_offsets):
        groups.delete_offsets(group=names[0], topic=opts.all(spec.topic), bootstrap=bootstrap)
    else:
        _reset(spec, opts, names, bootstrap)


def _all_groups(bootstrap: str) -> list[str]:
    from odradek.cli.common import client_config

    client = admin(client_config(bootstrap))
    result = client.list_consumer_groups(request_timeout=TIMEOUT_S).result()
    return sorted(g.group_id for g in result.valid)


def _reset(spec: _Options, opts: Parsed, names: list[str], bootstrap: str) -> None:
    if opts.has(spec.export):
        usage_and_exit(spec.parser, "odradek does not support --export yet")
    shift = opts.int_value(spec.shift_by)
    if opts.has(spec.to_current):
        shift = 0  # the committed offset itself, clamped to the log's bounds
    from_file = opts.value(spec.from_file)
    kwargs: dict[str, Any] = dict(
        topic=opts.all(spec.topic) or None, all_topics=opts.has(spec.all_topics),
        to_earliest=opts.has(spec.to_earliest), to_latest=opts.has(spec.to_latest),
        to_offset=opts.int_value(spec.to_offset), to_datetime=opts.value(spec.to_datetime),
        shift_by=shift, by_duration=opts.value(spec.by_duration),
        from_file=Path(from_file) if from_file else None,
        execute=opts.has(spec.execute), dry_run=not opts.has(spec.execute), bootstrap=bootstrap)
    if not any(opts.has(s) for s in spec.scenarios):
        usage_and_exit(spec.parser, "Option [reset-offsets] takes one of these options: "
                       + ", ".join(str(s) for s in spec.scenarios))
    if kwargs["topic"] is None and not kwargs["all_topics"] and from_file is None:
        usage_and_exit(spec.parser, "Option [reset-offsets] takes one of these options: "
                       f"{spec.all_topics}, {spec.topic}")
    for group in names:
        groups.reset_offsets(group=group, **kwargs)
