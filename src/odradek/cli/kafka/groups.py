"""`odradek kafka-consumer-groups`: Kafka's kafka-consumer-groups.sh (ConsumerGroupCommand).

The work is `odradek groups`'s; this is Kafka's option parsing and checks in front of it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from odradek.cli import groups
from odradek.cli.common import command_properties, reported
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
        self.state = p.option("state", "When specified with '--describe', includes the state "
                              "of the group. When specified with '--list', it displays the "
                              "state of all groups. It can also be used to list groups with "
                              "specific states.", "String", optional=True)
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
        if o.has(self.describe) and o.value(self.state) is not None:
            usage_and_exit(p, f"Option {self.describe} does not take a value for {self.state}")
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
    with reported():
        _run(spec, opts, bootstrap)


def _run(spec: _Options, opts: Parsed, bootstrap: str) -> None:
    if opts.has(spec.list):
        _list(bootstrap, opts.has(spec.state), opts.value(spec.state))
        return
    if opts.has(spec.timeout):
        usage_and_exit(spec.parser, "odradek does not support --timeout yet")
    names = opts.all(spec.group) or _all_groups(bootstrap)
    if opts.has(spec.describe):
        for group in names:
            _describe(bootstrap, group, opts.has(spec.members), opts.has(spec.state),
                      opts.has(spec.verbose))
    elif opts.has(spec.delete):
        _delete(bootstrap, names)
    elif opts.has(spec.delete_offsets):
        groups.delete_offsets(group=names[0], topic=opts.all(spec.topic), bootstrap=bootstrap)
    else:
        _reset(spec, opts, names, bootstrap)


def _delete(bootstrap: str, names: list[str]) -> None:
    """ConsumerGroupCommand.deleteGroups' report (its exit status stays 0, as Kafka's)."""
    from odradek.cli.common import client_config, error_text

    client = admin(client_config(bootstrap))
    futures = client.delete_consumer_groups(names, request_timeout=TIMEOUT_S)
    done, failed = [], {}
    for group, future in futures.items():
        try:
            future.result()
            done.append(group)
        except Exception as e:  # a KafkaException per group
            failed[group] = error_text(e)
    if not failed:
        print(f"Deletion of requested consumer groups ('{', '.join(done)}') was successful.")
        return
    print("\nError: Deletion of some consumer groups failed:")
    for group, error in failed.items():
        print(f"* Group '{group}' could not be deleted due to: {error}")
    if done:
        print(f"\nThese consumer groups were deleted successfully: '{chr(39).join(done)}', '")


def _java(fmt: str, *values: object) -> str:
    """Java's printf with %-Ns / %s only: left-justified, never cut."""
    out = []
    for i, part in enumerate(fmt.split("%")[1:]):
        width = part[1:part.index("s")] if part.startswith("-") else ""
        text = "-" if values[i] is None else str(values[i])
        out.append(text.ljust(int(width)) if width else text)
        out.append(part[part.index("s") + 1:])
    return fmt.split("%")[0] + "".join(out)


def _state_name(desc: Any) -> str:
    # ConsumerGroupState.toString(): "Stable", "Empty", "PreparingRebalance"…
    return "".join(w.title() for w in desc.state.name.split("_"))


def _list(bootstrap: str, with_state: bool, states: str | None) -> None:
    from odradek.cli.common import client_config

    client = admin(client_config(bootstrap))
    listed = sorted(client.list_consumer_groups(request_timeout=TIMEOUT_S).result().valid,
                    key=lambda g: g.group_id)
    if states:
        wanted = {s.strip().lower() for s in states.split(",") if s.strip()}
        known = {"preparingrebalance", "completingrebalance", "stable", "dead", "empty",
                 "assigning", "reconciling", "unknown"}
        bad = sorted(wanted - known)
        if bad:
            raise ValueError(f"Invalid state list '{states}'. Valid states are: "
                             "Assigning, CompletingRebalance, Dead, Empty, "
                             "PreparingRebalance, Reconciling, Stable, Unknown")
        listed = [g for g in listed if _state_name(g).lower() in wanted]
    if not with_state:
        for g in listed:
            print(g.group_id)
        return
    width = max((max(15, len(g.group_id)) for g in listed), default=15) + 10
    fmt = f"%-{width}s %-20s"
    print(_java(fmt, "GROUP", "STATE"))
    for g in listed:
        print(_java(fmt, g.group_id, _state_name(g)))


def _describe(bootstrap: str, group: str, members: bool, state: bool, verbose: bool) -> None:
    desc, rows = groups.describe_rows(bootstrap, group)
    kind = _state_name(desc)
    if kind in ("Dead", "Unknown") and not rows:
        print(f"\nError: Consumer group '{group}' does not exist.")
        return
    if kind == "Empty":
        print(f"\nConsumer group '{group}' has no active members.", file=sys.stderr)
    elif kind in ("PreparingRebalance", "CompletingRebalance"):
        print(f"\nWarning: Consumer group '{group}' is rebalancing.", file=sys.stderr)
    if state:
        c = desc.coordinator
        coordinator = f"{c.host}:{c.port}  ({c.id})"
        fmt = f"\n%-{max(25, len(coordinator))}s %-25s %-20s %-15s %s"
        print(_java(fmt, "GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE",
                    "#MEMBERS") + _java(fmt, group, coordinator, desc.partition_assignor, kind,
                                        len(desc.members)))
        return
    if members:
        _members(group, desc, verbose)
        return
    if not rows:
        return
    def width(i: int) -> int:
        return max([15] + [len("-" if r[i] is None else str(r[i])) for r in rows])
    fmt = (f"\n%-{width(0)}s %-{width(1)}s %-10s %-15s %-15s %-15s %-{width(6)}s "
           f"%-{width(7)}s %s")
    print(_java(fmt, *groups.COLUMNS) + "".join(_java(fmt, *r) for r in rows))


def _members(group: str, desc: Any, verbose: bool) -> None:
    ms = desc.members
    instance = any(getattr(m, "group_instance_id", None) for m in ms)

    def width(values: list[str], least: int = 15) -> int:
        return max([least] + [len(v) for v in values])

    g = width([group] * bool(ms))
    c = width([m.member_id for m in ms])
    i = width([m.group_instance_id or "" for m in ms], 17)
    h = width([m.host for m in ms])
    k = width([m.client_id for m in ms])
    fmt = (f"%-{g}s %-{c}s " + (f"%-{i}s " if instance else "") + f"%-{h}s %-{k}s %-15s ")
    head = ["GROUP", "CONSUMER-ID"] + (["GROUP-INSTANCE-ID"] if instance else []) + \
        ["HOST", "CLIENT-ID", "#PARTITIONS"]
    print("\n" + _java(fmt, *head) + ("ASSIGNMENT" if verbose else ""))
    for m in ms:
        tps = m.assignment.topic_partitions if m.assignment else []
        values = [group, m.member_id] + ([m.group_instance_id or ""] if instance else []) + \
            [m.host, m.client_id, len(tps)]
        line = _java(fmt, *values)
        if verbose:
            by_topic: dict[str, list[int]] = {}
            for tp in tps:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            line += ", ".join(sorted(f"{t}({','.join(map(str, sorted(ps)))})"
                                     for t, ps in by_topic.items())) or "-"
        print(line)


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
        execute=opts.has(spec.execute), bootstrap=bootstrap)
    if not any(opts.has(s) for s in spec.scenarios):
        usage_and_exit(spec.parser, "Option [reset-offsets] takes one of these options: "
                       + ", ".join(str(s) for s in spec.scenarios))
    if kwargs["topic"] is None and not kwargs["all_topics"] and from_file is None:
        usage_and_exit(spec.parser, "Option [reset-offsets] takes one of these options: "
                       f"{spec.all_topics}, {spec.topic}")
    plans = {group: groups.plan_reset(group=group, **kwargs) for group in names}
    fmt = "\n%-30s %-30s %-10s %-15s"
    rows = [_java(fmt, g, t, p, o) for g, plan in plans.items()
            for (t, p), o in sorted(plan.items())]
    print((_java(fmt, "GROUP", "TOPIC", "PARTITION", "NEW-OFFSET") if rows else "")
          + "".join(rows))
    if opts.has(spec.execute):
        for group, plan in plans.items():
            groups.apply_reset(bootstrap, group, plan)
