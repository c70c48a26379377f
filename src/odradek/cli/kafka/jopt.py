"""A small parser with joptsimple's rules, the parser behind every Kafka tool.

What Kafka's tools take and refuse, so scripts written for them behave the same here:
`--name value` and `--name=value`; an option that takes an argument consumes the next
token whatever it looks like; options may repeat (the tool reads the first value, or all
of them for lists such as `--config`); no abbreviations (Kafka builds its parsers with
`allowAbbreviations=false`); `--` ends the options; other words are non-option
arguments, which Kafka's tools ignore. The error messages are joptsimple's own.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import NoReturn


class OptionError(Exception):
    """A joptsimple OptionException: its message is what the tools print."""


@dataclass(frozen=True)
class Spec:
    name: str
    help: str = ""
    arg: str | None = None  # the argument's description; None: a flag
    type: str = "String"
    optional: bool = False  # joptsimple's withOptionalArg()

    def __str__(self) -> str:
        # joptsimple's OptionSpec.toString(), quoted by Kafka's messages: "[topic]"
        return f"[{self.name}]"


@dataclass
class Parsed:
    values: dict[str, list[str]] = field(default_factory=dict)
    args: list[str] = field(default_factory=list)
    raw: list[str] = field(default_factory=list)

    def has(self, spec: Spec) -> bool:
        return spec.name in self.values

    def value(self, spec: Spec, default: str | None = None) -> str | None:
        found = self.values.get(spec.name)
        return found[0] if found else default

    def all(self, spec: Spec) -> list[str]:
        return list(self.values.get(spec.name, []))

    def int_value(self, spec: Spec, default: int | None = None) -> int | None:
        text = self.value(spec)
        if text is None:
            return default
        try:
            return int(text)
        except ValueError:
            raise OptionError(f"Cannot parse argument '{text}' of option {spec.name}") from None


class Parser:
    """Options as Kafka declares them, with `--help` and `--version` as every tool has."""

    def __init__(self) -> None:
        self.specs: dict[str, Spec] = {}
        self.help = self.flag("help", "Print usage information.")
        self.version = self.flag("version", "Display Kafka version.")

    def flag(self, name: str, help: str = "") -> Spec:
        return self._add(Spec(name, help))

    def option(self, name: str, help: str = "", arg: str = "", type: str = "String",
               optional: bool = False) -> Spec:
        return self._add(Spec(name, help, arg or name, type, optional))

    def _add(self, spec: Spec) -> Spec:
        self.specs[spec.name] = spec
        return spec

    def parse(self, argv: list[str]) -> Parsed:
        out = Parsed(raw=list(argv))
        i = 0
        while i < len(argv):
            token = argv[i]
            i += 1
            if token == "--":
                out.args.extend(argv[i:])
                break
            if not token.startswith("-") or token == "-" or _is_number(token):
                out.args.append(token)
                continue
            name, sep, inline = token.lstrip("-").partition("=")
            spec = self.specs.get(name)
            if spec is None:
                if not token.startswith("--"):
                    # a cluster of short options: joptsimple names the first unknown one
                    name = name[:1]
                raise OptionError(f"{name} is not a recognized option")
            if spec.arg is None:
                if sep:
                    raise OptionError(f"Option {name} does not take an argument")
                out.values.setdefault(name, [])
                continue
            if sep:
                value = inline
            elif spec.optional:
                # an optional argument is the next word unless that looks like an option
                if i < len(argv) and not (argv[i].startswith("-") and not _is_number(argv[i])):
                    value = argv[i]
                    i += 1
                else:
                    out.values.setdefault(name, [])
                    continue
            elif i < len(argv):
                value = argv[i]
                i += 1
            else:
                raise OptionError(f"Option {name} requires an argument")
            if spec.type == "Integer" or spec.type == "Long":
                try:
                    int(value)
                except ValueError:
                    raise OptionError(f"Cannot parse argument '{value}' of option {name}") \
                        from None
            out.values.setdefault(name, []).append(value)
        return out

    def help_text(self) -> str:
        """joptsimple's BuiltinHelpFormatter layout: option column, description column."""
        rows = [("Option", "Description"), ("------", "-----------")]
        for spec in sorted(self.specs.values(), key=lambda s: s.name):
            left = f"--{spec.name}"
            if spec.arg is not None:
                left += f" [{spec.type}: {spec.arg}]" if spec.optional else \
                    f" <{spec.type}: {spec.arg}>"
            rows.append((left, spec.help))
        width = min(max(len(r[0]) for r in rows) + 1, 41)
        lines = []
        for left, text in rows:
            if len(left) >= width:
                lines.append(left)
                left = ""
            lines.append(f"{left.ljust(width)}{text}".rstrip())
        return "\n".join(lines)


def _is_number(token: str) -> bool:
    # joptsimple reads "-1" as an argument, not an option cluster
    try:
        float(token)
    except ValueError:
        return False
    return True


class ToolExit(Exception):
    """Leave the tool with this status (CommandLineUtils' Exit.exit)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def usage_and_exit(parser: Parser, message: str) -> NoReturn:
    """CommandLineUtils.printUsageAndExit: the message and the help on stderr, status 1."""
    print(message, file=sys.stderr)
    print(parser.help_text(), file=sys.stderr)
    raise ToolExit(1)


def check_required(parser: Parser, opts: Parsed, *required: Spec) -> None:
    for spec in required:
        if not opts.has(spec):
            usage_and_exit(parser, f'Missing required argument "{spec}"')


def check_invalid(parser: Parser, opts: Parsed, used: Spec, *invalid: Spec) -> None:
    if opts.has(used):
        for spec in invalid:
            if opts.has(spec):
                usage_and_exit(parser, f'Option "{used}" can\'t be used with option "{spec}"')


def exactly_one_action(parser: Parser, opts: Parsed, actions: list[Spec], message: str) -> None:
    if sum(opts.has(a) for a in actions) != 1:
        usage_and_exit(parser, message)


def help_or_version(parser: Parser, opts: Parsed, message: str) -> None:
    """CommandLineUtils.maybePrintHelpOrVersion: no arguments or --help, or --version."""
    if not opts.raw or opts.has(parser.help):
        usage_and_exit(parser, message)
    if opts.has(parser.version):
        from odradek.cli.kafka.client import KAFKA_VERSION

        print(KAFKA_VERSION)
        raise ToolExit(0)


def try_parse(parser: Parser, argv: list[str]) -> Parsed:
    """CommandLineUtils' tryParse: a parse error prints the usage and exits 1."""
    try:
        return parser.parse(argv)
    except OptionError as e:
        usage_and_exit(parser, str(e))
