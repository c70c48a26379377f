"""Pages of what runs on the cluster: consumer and share groups, transactions, and the
lake."""

from __future__ import annotations

import urllib.parse
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from odradek.console import groups as group_ops
from odradek.console import shares, txns
from odradek.console.admin import ConsoleError
from odradek.console.web import back, blocking, post_route, render, state


async def groups(request: Request) -> Response:
    view = state(request).sampler.view
    rows = view.groups if view is not None else []
    q = request.query_params.get("q", "").strip()
    if q:
        rows = [g for g in rows if q.lower() in g.group.lower()]
    return render(request, "groups.html", rows=rows, q=q)


def _statuses(request: Request, group: str) -> dict[tuple[str, int], str]:
    view = state(request).sampler.view
    for g in view.groups if view is not None else []:
        if g.group == group:
            return {(t, p): status for t, p, _lag, status in g.partitions}
    return {}


async def group(request: Request) -> Response:
    s = state(request)
    gid = request.path_params["group"]
    ctx: dict[str, Any] = {"gid": gid, "detail": None, "moves": None, "reset": None,
                           "strategies": group_ops.STRATEGIES}
    try:
        ctx["detail"] = await blocking(group_ops.detail, s.admin, gid, _statuses(request, gid))
    except ConsoleError as e:
        return render(request, "group.html", status=404, error=str(e), **ctx)
    params = dict(request.query_params)
    if params.get("strategy"):  # the dry run: a GET, it changes nothing
        try:
            req = group_ops.ResetRequest.parse(params)
            metadata = await blocking(s.admin.metadata)
            ctx["moves"] = await blocking(group_ops.preview, s.admin, gid, req, metadata)
            ctx["reset"] = req
        except ConsoleError as e:
            ctx["error"] = str(e)
    return render(request, "group.html", **ctx)


async def reset_offsets(request: Request, form: dict[str, str]) -> Response:
    s = state(request)
    gid = request.path_params["group"]
    req = group_ops.ResetRequest.parse(form)
    metadata = await blocking(s.admin.metadata)
    moves = await blocking(group_ops.preview, s.admin, gid, req, metadata)
    await blocking(group_ops.apply, s.admin, gid, moves)
    return back(f"/groups/{urllib.parse.quote(gid, safe='')}",
                f"reset {len(moves)} partition(s) of {gid}")


async def share_groups(request: Request) -> Response:
    rows: list[Any] = []
    error = None
    try:
        rows = await blocking(shares.share_groups, state(request).settings)
    except ConsoleError as e:
        error = str(e)
    return render(request, "share_groups.html", rows=rows, error=error)


async def transactions(request: Request) -> Response:
    s = state(request)
    params = request.query_params
    raw = params.get("max_timeout_min", "15")
    rows: list[Any] = []
    error = None
    scan: txns.HangingScan = request.app.state.hanging
    try:
        if s.settings.secured:
            raise ConsoleError(txns.SECURED)
        try:
            max_min = int(raw)
        except ValueError:
            raise ConsoleError(f"max_timeout_min must be whole minutes, got {raw!r}") from None
        if params.get("scan") == "1":  # start it, then a URL the live region may repeat
            scan.request(max_min, force=True)
            return RedirectResponse(f"/transactions?max_timeout_min={max_min}", 303)
        scan.request(max_min)  # the live region shows its result when it is done
        rows = await blocking(txns.ongoing, s.settings.kafka_config())
    except ConsoleError as e:
        error = str(e)
    return render(request, "transactions.html", ongoing=rows, scan=scan, error=error,
                  max_timeout_min=raw)


async def abort(request: Request, form: dict[str, str]) -> Response:
    try:
        partition, start = int(form.get("partition", "")), int(form.get("start_offset", ""))
    except ValueError:
        raise ConsoleError("partition and start offset must be whole numbers") from None
    topic = form.get("topic", "")
    pid = await blocking(txns.abort, state(request).settings.kafka_config(), topic, partition,
                         start)
    return back("/transactions", f"aborted producer {pid}'s transaction in {topic}-{partition}")


async def lake(request: Request) -> Response:
    q = request.query_params.get("q", "").strip()
    tables: list[Any] = []
    hits: list[Any] = []
    error = None
    try:
        tables, hits = await blocking(state(request).lake.tables, q)
    except ConsoleError as e:
        error = str(e)
    return render(request, "lake.html", tables=tables, hits=hits, q=q, error=error,
                  catalog=state(request).settings.lake_catalog_uri)


async def lake_table(request: Request) -> Response:
    name = request.path_params["name"]
    try:
        desc, snapshots = await blocking(state(request).lake.table, name)
    except ConsoleError as e:
        return render(request, "lake_table.html", status=404, name=name, desc=None,
                      snapshots=[], error=str(e))
    quarantined = sum(s["quarantined"] for s in snapshots)
    return render(request, "lake_table.html", name=name, desc=desc, snapshots=snapshots,
                  quarantined=quarantined)


def routes() -> list[BaseRoute]:
    return [
        Route("/groups", groups),
        post_route("/groups/{group:path}/reset", reset_offsets),
        Route("/groups/{group:path}", group),
        Route("/share-groups", share_groups),
        Route("/transactions", transactions),
        post_route("/transactions/abort", abort),
        Route("/lake", lake),
        Route("/lake/{name:path}", lake_table),
    ]
