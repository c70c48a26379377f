"""`kafka-acls.sh`: AclCommand's flags, parsed by joptsimple's rules, carried out by
`odradek acls` (which prints what AclCommand prints).

The convenience options expand as AclCommand expands them: `--producer` is WRITE,
DESCRIBE and CREATE on the topics (with WRITE and DESCRIBE on a `--transactional-id`,
IDEMPOTENT_WRITE on the cluster with `--idempotent`); `--consumer` is READ and DESCRIBE
on the topics and READ on the `--group`s. `--list --principal P` prints each
principal's ACLs under `ACLs for principal `P``, as AclCommand does. Delegation-token
and user-principal resources are refused in one line: odradek serves no delegation
tokens (APIs 38-41), the only thing ACLs on them authorize, and confluent-kafka's
admin client, which carries the ACLs, has no such resource types.
"""

from __future__ import annotations

from pathlib import Path

from odradek.cli.kafka.jopt import (
    Parsed,
    Parser,
    check_invalid,
    check_required,
    exactly_one_action,
    help_or_version,
    try_parse,
    usage_and_exit,
)


class _Options:
    def __init__(self) -> None:
        p = self.parser = Parser()
        self.bootstrap = p.option("bootstrap-server", "A list of host/port pairs to use for "
                                  "establishing the connection to the Kafka cluster.", "server")
        self.bootstrap_controller = p.option("bootstrap-controller", "A list of host/port "
                                             "pairs to use for establishing the connection "
                                             "to the Kafka cluster.", "controller")
        self.command_config = p.option("command-config", "A property file containing configs "
                                       "to be passed to Admin Client.", "command-config")
        self.add = p.flag("add", "Indicates you are trying to add ACLs.")
        self.remove = p.flag("remove", "Indicates you are trying to remove ACLs.")
        self.list = p.flag("list", "List ACLs for the specified resource, use --topic "
                           "<topic> or --group <group> or --cluster to specify a resource.")
        self.topic = p.option("topic", "topic to which ACLs should be added or removed.",
                              "topic")
        self.cluster = p.flag("cluster", "Add/Remove cluster ACLs.")
        self.group = p.option("group", "Consumer Group to which the ACLs should be added or "
                              "removed.", "group")
        self.transactional_id = p.option("transactional-id", "The transactionalId to which "
                                         "ACLs should be added or removed.", "transactional-id")
        self.delegation_token = p.option("delegation-token", "Delegation token to which ACLs "
                                         "should be added or removed.", "delegation-token")
        self.user_principal = p.option("user-principal", "Specifies a user principal as a "
                                       "resource in relation with the operation.", "user-principal")
        self.pattern_type = p.option("resource-pattern-type", "The type of the resource "
                                     "pattern or pattern filter.", "ANY|MATCH|LITERAL|PREFIXED")
        self.allow_principal = p.option("allow-principal", "principal is in principalType:name "
                                        "format.", "allow-principal")
        self.deny_principal = p.option("deny-principal", "principal is in principalType:name "
                                       "format.", "deny-principal")
        self.principal = p.option("principal", "List ACLs for the specified principal.",
                                  "principal")
        self.allow_host = p.option("allow-host", "Host from which principals listed in "
                                   "--allow-principal will have access.", "allow-host")
        self.deny_host = p.option("deny-host", "Host from which principals listed in "
                                  "--deny-principal will be denied access.", "deny-host")
        self.operation = p.option("operation", "Operation that is being allowed or denied.",
                                  "operation")
        self.producer = p.flag("producer", "Convenience option to add/remove ACLs for "
                               "producer role.")
        self.consumer = p.flag("consumer", "Convenience option to add/remove ACLs for "
                               "consumer role.")
        self.idempotent = p.flag("idempotent", "Enable idempotence for the producer.")
        self.force = p.flag("force", "Assume Yes to all queries and do not prompt.")

    def check(self, opts: Parsed) -> None:
        p = self.parser
        help_or_version(p, opts, "This tool helps to manage acls on kafka.")
        if opts.has(self.bootstrap) and opts.has(self.bootstrap_controller):
            usage_and_exit(p, "Only one of --bootstrap-server or --bootstrap-controller "
                           "must be specified")
        if not opts.has(self.bootstrap):
            usage_and_exit(p, "One of --bootstrap-server or --bootstrap-controller must be "
                           "specified")
        exactly_one_action(p, opts, [self.add, self.remove, self.list],
                           "Command must include exactly one action: --list, --add, --remove. ")
        check_invalid(p, opts, self.list, self.producer, self.consumer, self.allow_host,
                      self.allow_principal, self.deny_host, self.deny_principal)
        check_invalid(p, opts, self.producer, self.operation, self.deny_principal)
        check_invalid(p, opts, self.consumer, self.operation, self.deny_principal)
        if opts.has(self.consumer):
            check_required(p, opts, self.topic, self.group)
        if opts.has(self.producer) and not opts.has(self.topic):
            usage_and_exit(p, "With --producer you must specify a --topic")
        if opts.has(self.principal) and not opts.has(self.list):
            usage_and_exit(p, "The --principal option is only available if --list is set")
        if opts.has(self.idempotent) and not opts.has(self.producer):
            usage_and_exit(p, "The --idempotent option is only available if --producer is "
                           "set")
        for unsupported in (self.delegation_token, self.user_principal):
            if opts.has(unsupported):
                usage_and_exit(p, f"--{unsupported.name} is not supported by odradek: it has no "
                               "delegation tokens (APIs 38-41), which such ACLs authorize")
        if opts.has(self.bootstrap_controller):
            usage_and_exit(p, "--bootstrap-controller is not supported by odradek: "
                           "it has no KRaft controllers")


def main(argv: list[str]) -> None:
    from odradek.cli.acls import acls

    spec = _Options()
    opts = try_parse(spec.parser, argv)
    spec.check(opts)
    config = opts.value(spec.command_config)
    common = {
        "bootstrap_server": opts.value(spec.bootstrap) or "",
        "command_config": Path(config) if config else None,
        "add": opts.has(spec.add), "remove": opts.has(spec.remove),
        "list_": opts.has(spec.list),
        "allow_principal": opts.all(spec.allow_principal),
        "deny_principal": opts.all(spec.deny_principal),
        "allow_host": opts.all(spec.allow_host), "deny_host": opts.all(spec.deny_host),
        "pattern_type": opts.value(spec.pattern_type, "literal") or "literal",
        "force": opts.has(spec.force),
        "list_principal": opts.all(spec.principal),
    }
    nothing: dict[str, object] = {"topic": [], "group": [], "transactional_id": [],
                                  "cluster": False}
    topics, groups = opts.all(spec.topic), opts.all(spec.group)
    txn_ids = opts.all(spec.transactional_id)
    # one `odradek acls` run per (resources, operations) AclCommand would pair
    runs: list[tuple[dict[str, object], list[str]]] = []
    if opts.has(spec.producer) or opts.has(spec.consumer):
        if opts.has(spec.producer):
            runs.append(({"topic": topics}, ["Write", "Describe", "Create"]))
            if txn_ids:
                runs.append(({"transactional_id": txn_ids}, ["Write", "Describe"]))
            if opts.has(spec.idempotent):
                runs.append(({"cluster": True}, ["IdempotentWrite"]))
        if opts.has(spec.consumer):
            runs.append(({"topic": topics}, ["Read", "Describe"]))
            runs.append(({"group": groups}, ["Read"]))
    else:
        runs.append(({"topic": topics, "group": groups, "transactional_id": txn_ids,
                      "cluster": opts.has(spec.cluster)}, opts.all(spec.operation)))
    for resources, operations in runs:
        acls(**common, **{**nothing, **resources},  # type: ignore[arg-type]
             operation=operations)
