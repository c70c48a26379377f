"""The console's Starlette app: the pages and actions of routes_cluster and routes_ops,
the static assets, and the background samplers, started and stopped with the app."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles

from odradek.console import routes_cluster, routes_ops
from odradek.console.admin import Admin
from odradek.console.browse import Browser
from odradek.console.lake import Lake
from odradek.console.sampler import Sampler
from odradek.console.settings import ConsoleSettings
from odradek.console.txns import HangingScan
from odradek.console.web import PACKAGE, State


def create_app(settings: ConsoleSettings, sampler: Sampler | None = None) -> Starlette:
    admin = Admin(settings)
    sampler = sampler or Sampler(settings)
    lake = Lake(settings.lake_catalog_uri, settings.lake_warehouse)
    browser = Browser(settings)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        sampler.start()
        # the first page should show the cluster, not "no data yet"
        await run_in_threadpool(sampler.wait_for_round, 0, settings.timeout_s + 5)
        try:
            yield
        finally:
            await run_in_threadpool(sampler.stop)
            await run_in_threadpool(browser.close)

    routes = [*routes_cluster.routes(), *routes_ops.routes(),
              Mount("/static", StaticFiles(directory=str(PACKAGE / "static")), name="static")]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.console = State(settings, admin, sampler, lake)
    app.state.hanging = HangingScan(settings.kafka_config())
    app.state.browser = browser
    app.state.started = time.time()
    return app
