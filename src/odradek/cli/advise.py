"""`odradek advise`: the settings seed 004 recommends for a goal, and `advise check`,
which judges a user's own settings against them (exit 1 when any contradicts).

The rules are data in odradek.advice.rules; this module only parses and prints.
"""

from __future__ import annotations

import enum
import json
from pathlib import Path

import typer

from odradek.advice import Goal, Scope, check, rules_for
from odradek.advice import render as show
from odradek.advice.check import Settings
from odradek.cli.common import BOOTSTRAP_HELP, client_config, console, error_text, fail

app = typer.Typer(
    invoke_without_command=True,
    help="Settings for a goal — throughput, latency, durability, availability (seed 004).",
)


class For(enum.StrEnum):
    PRODUCER = "producer"
    CONSUMER = "consumer"
    BROKER = "broker"
    TOPIC = "topic"
    ALL = "all"


class Format(enum.StrEnum):
    TABLE = "table"
    PROPERTIES = "properties"
    JSON = "json"


class CheckFormat(enum.StrEnum):
    TEXT = "text"
    JSON = "json"


@app.callback()
def advise(
    ctx: typer.Context,
    goal: Goal | None = typer.Option(None, "--goal", "-g", help="What to optimize for"),
    for_: For = typer.Option(For.ALL, "--for", help="Only these settings"),
    fmt: Format = typer.Option(Format.TABLE, "--format", "-f",
                               help="table, properties (ready to paste) or json"),
) -> None:
    """Print the settings seed 004 recommends for a goal: name, value, default, why."""
    if ctx.invoked_subcommand is not None:
        return
    if goal is None:
        fail("give --goal throughput|latency|durability|availability", code=2)
    rules = rules_for(goal, None if for_ == For.ALL else Scope(for_.value))
    if fmt == Format.PROPERTIES:
        print(show.properties(goal, rules), end="")
    elif fmt == Format.JSON:
        print(json.dumps(show.as_json(goal, rules), indent=2))
    else:
        console.print(show.rules_view(goal, rules), highlight=False)
        console.print()
        for note in show.notes(goal):
            console.print(f"• {note}", highlight=False)


@app.command("check")
def check_cmd(
    goal: Goal = typer.Option(..., "--goal", "-g", help="The goal to check against"),
    producer_config: Path | None = typer.Option(None, "--producer-config", exists=True,
                                                dir_okay=False, help="producer .properties"),
    consumer_config: Path | None = typer.Option(None, "--consumer-config", exists=True,
                                                dir_okay=False, help="consumer .properties"),
    broker_config: Path | None = typer.Option(None, "--broker-config", exists=True,
                                              dir_okay=False, help="server.properties"),
    topic: list[str] | None = typer.Option(None, "--topic", "-t",
                                           help="A topic to check live (repeatable)"),
    bootstrap: str | None = typer.Option(
        None, "--bootstrap-server", "-b",
        help=BOOTSTRAP_HELP + "; checks every broker's live configs (and --topic's)"),
    fmt: CheckFormat = typer.Option(CheckFormat.TEXT, "--format", "-f",
                                  help="text (a line per finding) or json"),
) -> None:
    """Warn about each setting that contradicts GOAL or another setting.

    Exit code 0 when nothing contradicts, 1 when something does, 2 when the settings
    could not be read.
    """
    from odradek.advice import sources

    if topic and bootstrap is None:
        bootstrap = "localhost:9092"
    settings: list[Settings] = []
    try:
        if producer_config is not None:
            settings.append(sources.client_file(producer_config, Scope.PRODUCER))
        if consumer_config is not None:
            settings.append(sources.client_file(consumer_config, Scope.CONSUMER))
        if broker_config is not None:
            settings.append(sources.broker_file(broker_config))
        if bootstrap is not None:
            settings += sources.live(client_config(bootstrap), topic or [])
    except (OSError, ValueError) as e:
        fail(str(e), code=2)
    except Exception as e:  # confluent-kafka's KafkaException: the cluster did not answer
        fail(error_text(e), code=2)
    if not settings:
        fail("nothing to check: give --producer-config, --consumer-config, --broker-config, "
             "--topic or --bootstrap-server", code=2)
    findings = check(goal, settings)
    if fmt == CheckFormat.JSON:
        print(json.dumps({"goal": goal.value, "checked": [s.label for s in settings],
                          "findings": [f.as_dict() for f in findings]}, indent=2))
    elif findings:
        for line in show.finding_lines(findings):
            console.print(line, style="red", markup=False, highlight=False, soft_wrap=True)
        console.print(f"[red]{len(findings)} setting(s) contradict the {goal.value} goal "
                      "or each other[/red]", highlight=False)
    else:
        console.print(f"[green]nothing contradicts the {goal.value} goal[/green] "
                      f"(checked {', '.join(s.label for s in settings)})", highlight=False)
    raise typer.Exit(1 if findings else 0)
