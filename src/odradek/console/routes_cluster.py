"""Pages of the cluster itself: overview, topics, a topic and its messages, brokers,
health, and the charts' data."""

from __future__ import annotations

import urllib.parse
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from odradek.client.health import leader_balance
from odradek.console import browse as browser
from odradek.console.admin import ConsoleError, partition_rows, topic_rows
from odradek.console.web import back, blocking, post_route, render, state


def _view(request: Request) -> Any:
    return state(request).sampler.view


async def overview(request: Request) -> Response:
    s = state(request)
    view = s.sampler.view
    ctx: dict[str, Any] = {"view": view, "rates": s.sampler.rates, "alarms": s.sampler.alarms}
    if view is not None:
        parts = view.partitions
        ctx.update(
            online=sum(not p.offline for p in parts),
            under=sum(1 for p in parts if not p.offline and len(p.isr) < len(p.replicas)),
            offline=sum(p.offline for p in parts),
            under_min_isr=s.sampler.under_min_isr(),
            balance=leader_balance(view))
    return render(request, "overview.html", **ctx)


async def topics(request: Request) -> Response:
    s = state(request)
    view = s.sampler.view
    q = request.query_params.get("q", "").strip()
    internal = request.query_params.get("internal") == "1"
    rows = topic_rows(view.partitions, s.sampler.collector.partition_sizes) if view else []
    if q:
        rows = [r for r in rows if q.lower() in r.name.lower()]
    if not internal:
        rows = [r for r in rows if not r.internal]
    return render(request, "topics.html", rows=rows, q=q, internal=internal,
                  overrides=s.sampler.overrides)


async def topic(request: Request) -> Response:
    s = state(request)
    name = request.path_params["name"]
    try:
        metadata = await blocking(s.admin.metadata)
        tps = [(name, p) for p in metadata.topics[name].partitions] \
            if name in metadata.topics else []
        offsets = await blocking(s.admin.offsets, tps)
        rows = partition_rows(metadata, name, s.sampler.collector.partition_sizes, offsets)
        configs = await blocking(s.admin.configs, "topic", name)
    except ConsoleError as e:
        return render(request, "topic.html", status=404, name=name, rows=[], configs=[],
                      error=str(e))
    total = sum(r.size for r in rows if r.size is not None)
    return render(request, "topic.html", name=name, rows=rows, configs=configs, total=total,
                  messages=sum((r.log_end or 0) - (r.log_start or 0) for r in rows))


async def messages(request: Request) -> Response:
    s = state(request)
    name = request.path_params["name"]
    params = dict(request.query_params)
    result = None
    error = None
    try:
        query = browser.BrowseQuery.parse(name, params)
        partitions = await blocking(_partitions_of, request, name)
        result = await blocking(request.app.state.browser.browse, partitions, query,
                                s.admin.offsets)
    except ConsoleError as e:
        error = str(e)
    return render(request, "messages.html", name=name, params=params, result=result,
                  error=error, formats=browser.FORMATS)


def _partitions_of(request: Request, topic: str) -> list[int]:
    """The topic's partitions from the last sample, or asked afresh when it is new."""
    view = state(request).sampler.view
    known = sorted(p.partition for p in view.partitions if p.topic == topic) if view else []
    if known:
        return known
    t = state(request).admin.metadata().topics.get(topic)
    if t is None or t.error is not None:
        raise ConsoleError(f"topic {topic} does not exist (deleted?)")
    return sorted(t.partitions)


async def create_topic(request: Request, form: dict[str, str]) -> Response:
    name = form.get("name", "").strip()
    if not name:
        raise ConsoleError("a topic needs a name")
    partitions = _int(form, "partitions", 1)
    replication = _int(form, "replication", -1)
    configs = {}
    for line in form.get("configs", "").splitlines():
        if line.strip():
            k, sep, v = line.partition("=")
            if not sep:
                raise ConsoleError(f"a config must be name=value, got {line.strip()!r}")
            configs[k.strip()] = v.strip()
    await blocking(state(request).admin.create_topic, name, partitions, replication, configs)
    return back(f"/topics/{urllib.parse.quote(name)}", f"created topic {name}")


def _int(form: dict[str, str], key: str, default: int) -> int:
    raw = form.get(key, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConsoleError(f"{key} must be a whole number, got {raw!r}") from None


async def add_partitions(request: Request, form: dict[str, str]) -> Response:
    name = request.path_params["name"]
    total = _int(form, "total", 0)
    await blocking(state(request).admin.add_partitions, name, total)
    return back(f"/topics/{urllib.parse.quote(name)}", f"{name} now has {total} partitions")


async def set_config(request: Request, form: dict[str, str]) -> Response:
    name = request.path_params["name"]
    key = form.get("key", "").strip()
    if not key:
        raise ConsoleError("name the config to set")
    value = None if form.get("op") == "delete" else form.get("value", "")
    await blocking(state(request).admin.set_config, name, key, value)
    what = f"{key} reset to its default" if value is None else f"{key} set"
    return back(f"/topics/{urllib.parse.quote(name)}", what)


async def delete_topic(request: Request, form: dict[str, str]) -> Response:
    name = request.path_params["name"]
    if form.get("confirm", "") != name:
        raise ConsoleError(f"type the topic's name ({name}) to confirm the deletion")
    await blocking(state(request).admin.delete_topic, name)
    return back("/topics", f"deleted topic {name}")


async def produce(request: Request, form: dict[str, str]) -> Response:
    name = request.path_params["name"]
    partition = form.get("partition", "").strip()
    message = browser.TestMessage(
        name, form.get("key") or None, form.get("value", ""),
        browser.parse_headers(form.get("headers", "")),
        _int(form, "partition", 0) if partition else None)
    p, offset = await blocking(browser.produce, state(request).settings, message)
    return back(f"/topics/{urllib.parse.quote(name)}/messages?partition={p}&offset={offset}",
                f"produced to partition {p} at offset {offset}")


async def brokers(request: Request) -> Response:
    s = state(request)
    view = s.sampler.view
    chosen = request.query_params.get("broker")
    configs: list[Any] = []
    error = None
    if chosen is None and view is not None and view.brokers:
        chosen = str(view.brokers[0].node_id)
    if chosen:
        try:
            configs = await blocking(s.admin.configs, "broker", chosen)
        except ConsoleError as e:
            error = str(e)
    overridden = request.query_params.get("all") != "1"
    if overridden:
        configs = [c for c in configs if c.overridden]
    return render(request, "brokers.html", view=view, chosen=chosen, configs=configs,
                  error=error, overridden=overridden)


async def health(request: Request) -> Response:
    s = state(request)
    return render(request, "health.html", view=s.sampler.view, alarms=s.sampler.alarms)


async def series(request: Request) -> Response:
    """Chart data: {name: [[unix seconds…], [values…]]} for each ?name=."""
    history = state(request).sampler.history
    names = request.query_params.getlist("name")
    prefix = request.query_params.get("prefix")
    if prefix:
        names += history.names(prefix)
    out = {}
    for n in names:
        points = history.get(n)
        out[n] = [[round(t, 1) for t, _ in points], [v for _, v in points]]
    return JSONResponse(out)


def routes() -> list[BaseRoute]:
    return [
        Route("/", overview),
        Route("/topics", topics),
        post_route("/topics", create_topic),
        Route("/topics/{name:path}/messages", messages),
        post_route("/topics/{name:path}/partitions", add_partitions),
        post_route("/topics/{name:path}/config", set_config),
        post_route("/topics/{name:path}/delete", delete_topic),
        post_route("/topics/{name:path}/produce", produce),
        Route("/topics/{name:path}", topic),
        Route("/brokers", brokers),
        Route("/health", health),
        Route("/api/series", series),
    ]
