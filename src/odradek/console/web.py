"""What every page and action of the console uses: shared state, rendering, CSRF
protection and read-only mode. The app that wires them is console/app.py.

Every blocking client call runs in a worker thread (`blocking`), never on the event
loop. Mutating routes are POSTs that carry a CSRF token (double submit: a SameSite
cookie and the same value in the form or the X-CSRF-Token header); with --read-only
they answer 403 and the pages do not show them.
"""

from __future__ import annotations

import datetime as dt
import hmac
import secrets
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from importlib.resources import files
from typing import Any, TypeVar

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.templating import Jinja2Templates

from odradek.console.admin import Admin, ConsoleError
from odradek.console.lake import Lake
from odradek.console.sampler import Sampler
from odradek.console.settings import ConsoleSettings

CSRF_COOKIE = "odradek_csrf"
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
T = TypeVar("T")

PACKAGE = files("odradek.console")
templates = Jinja2Templates(directory=str(PACKAGE / "templates"))


def _size(n: int | float | None) -> str:
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return str(n)


def _when(ts: float | None) -> str:
    if not ts:
        return "-"
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%H:%M:%S UTC")


templates.env.filters["size"] = _size
templates.env.filters["when"] = _when
templates.env.filters["q"] = lambda s: urllib.parse.quote(str(s), safe="")


@dataclass
class State:
    settings: ConsoleSettings
    admin: Admin
    sampler: Sampler
    lake: Lake


def state(request: Request) -> State:
    s: State = request.app.state.console
    return s


async def blocking(fn: Callable[..., T], *args: Any) -> T:
    """Run a blocking client call off the event loop."""
    return await run_in_threadpool(fn, *args)


def csrf_token(request: Request) -> str:
    token = request.cookies.get(CSRF_COOKIE)
    if not token:
        token = getattr(request.state, "new_csrf", None) or secrets.token_urlsafe(24)
        request.state.new_csrf = token
    return token


def render(request: Request, template: str, status: int = 200, **context: Any) -> Response:
    s = state(request)
    sampler = s.sampler
    context.update(
        request=request, read_only=s.settings.read_only, csrf=csrf_token(request),
        sampler_error=sampler.error, updated=sampler.updated, bootstrap=s.settings.bootstrap,
        alarm_count=sum(a.fatal for a in sampler.alarms), refresh_ms=int(
            max(s.settings.refresh_s, 1.0) * 1000),
        notice=request.query_params.get("msg", ""), nav=template.split(".")[0])
    context.setdefault("error", None)
    response = templates.TemplateResponse(request, template, context, status_code=status)
    new = getattr(request.state, "new_csrf", None)
    if new:
        response.set_cookie(CSRF_COOKIE, new, httponly=True, samesite="strict")
    return response


async def checked_form(request: Request) -> dict[str, str]:
    """The POST's form, after the read-only and CSRF checks; raises ConsoleError."""
    if state(request).settings.read_only:
        raise PermissionError("this console is read-only (--read-only)")
    form = await request.form()
    fields = {k: str(v) for k, v in form.items()}
    cookie = request.cookies.get(CSRF_COOKIE, "")
    sent = fields.get(CSRF_FIELD) or request.headers.get(CSRF_HEADER, "")
    if not cookie or not hmac.compare_digest(cookie, sent):
        raise PermissionError("the form's CSRF token is missing or stale: reload the page")
    return fields


def back(url: str, message: str) -> RedirectResponse:
    sep = "&" if "?" in url else "?"
    return RedirectResponse(f"{url}{sep}msg={urllib.parse.quote(message)}", status_code=303)


def post_route(path: str, handler: Callable[[Request, dict[str, str]], Any]) -> Route:
    """A mutating route: checks, then the handler; a refused or failed action says why in
    one line on the page it came from."""
    async def endpoint(request: Request) -> Response:
        try:
            fields = await checked_form(request)
        except PermissionError as e:
            return PlainTextResponse(str(e), status_code=403)
        try:
            response: Response = await handler(request, fields)
        except ConsoleError as e:
            referer = request.headers.get("referer", "/")
            parsed = urllib.parse.urlsplit(referer)
            return back(parsed.path + (f"?{_without_msg(parsed.query)}"
                                       if _without_msg(parsed.query) else ""),
                        f"error: {e}")
        state(request).sampler.refresh_soon()
        return response

    return Route(path, endpoint, methods=["POST"])


def _without_msg(query: str) -> str:
    pairs = [(k, v) for k, v in urllib.parse.parse_qsl(query) if k != "msg"]
    return urllib.parse.urlencode(pairs)
