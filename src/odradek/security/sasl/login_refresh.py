"""A login whose credential expires, kept fresh as Kafka's
ExpiringCredentialRefreshingLogin keeps it: a thread of its own fetches the next token
at `sasl.login.refresh.window.factor` (+ up to `…window.jitter`) of the current one's
lifetime, no sooner than `…min.period.seconds` from now and no later than
`…buffer.seconds` before it expires; a failed refresh is tried again 10 s later.

Connections take the current token when they log in (`client()`); a broker's
connections to the others log in again before their session ends
(`connections.max.reauth.ms`, capped by the token's expiry, as the other broker reports
it), so they move to the new token by themselves.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from odradek.configdef import ConfigError
from odradek.security.sasl.oauth_login import (
    LoginFailed,
    LoginToken,
    OAuthBearerClient,
    login_setting,
)

log = logging.getLogger("odradek.security.sasl.login")

RETRY_AFTER_FAILURE_MS = 10_000  # Kafka's DELAY_SECONDS_BEFORE_NEXT_RETRY_WHEN_RELOGIN_FAILS


class NoTokenYet(ConnectionError):
    """The login has no token (yet): the connection is retried as a broken one is."""


@dataclass(frozen=True)
class RefreshConfig:
    window_factor: float = 0.8
    window_jitter: float = 0.05
    min_period_s: int = 60
    buffer_s: int = 300

    @staticmethod
    def from_config(props: Mapping[str, str]) -> RefreshConfig:
        """Kafka's sasl.login.refresh.* with their ranges."""
        def read(name: str) -> Any:
            return login_setting(props, f"sasl.login.refresh.{name}")

        return RefreshConfig(read("window.factor"), read("window.jitter"),
                             read("min.period.seconds"), read("buffer.seconds"))


def next_refresh_ms(now_ms: int, token: LoginToken, config: RefreshConfig,
                    rng: Callable[[], float] = random.random) -> int:
    """ExpiringCredentialRefreshingLogin.refreshMs (a broker may log in again before
    logging out, so an expired credential is retried rather than given up)."""
    expire = token.lifetime_ms
    if now_ms > expire:
        return now_ms + RETRY_AFTER_FAILURE_MS
    pct = config.window_factor + config.window_jitter * rng()
    if now_ms + 1000 * (config.min_period_s + config.buffer_s) > expire:
        return now_ms + int((expire - now_ms) * pct)  # the buffers cannot both fit
    start = token.start_time_ms if token.start_time_ms is not None else now_ms
    proposed = start + int((expire - start) * pct)
    if proposed > expire - config.buffer_s * 1000:
        return expire - config.buffer_s * 1000
    return max(proposed, now_ms + config.min_period_s * 1000)


class RefreshingLogin:
    """`fetch()` makes a token (LoginFailed when it cannot); the refresher thread, a
    daemon, ends with `close()` or once nothing refers to the login any more."""

    def __init__(self, fetch: Callable[[], LoginToken], extensions: Mapping[str, str],
                 config: RefreshConfig, name: str,
                 clock: Callable[[], float] = time.time) -> None:
        self._fetch = fetch
        self.extensions = dict(extensions)
        self.config = config
        self.name = name
        self._clock = clock
        self._lock = threading.Lock()
        self._token: LoginToken | None = None
        self._refresh_at_ms = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.refreshes = 0  # tokens fetched so far

    @property
    def token(self) -> LoginToken | None:
        with self._lock:
            return self._token

    def client(self) -> OAuthBearerClient:
        """A SASL client for one login, with the current token."""
        token = self.token
        if token is None:
            raise NoTokenYet(f"the OAUTHBEARER login of {self.name} has no token yet")
        return OAuthBearerClient(token.value, self.extensions)

    def refresh(self) -> bool:
        """Fetch a token now; False (logged in one line) when that failed."""
        now = int(self._clock() * 1000)
        try:
            token = self._fetch()
        except (LoginFailed, ConfigError) as e:
            log.warning("OAUTHBEARER login of %s failed (%s); trying again in %d s", self.name,
                        e, RETRY_AFTER_FAILURE_MS // 1000)
            with self._lock:
                self._refresh_at_ms = now + RETRY_AFTER_FAILURE_MS
            return False
        refresh_at = next_refresh_ms(int(self._clock() * 1000), token, self.config)
        with self._lock:
            self._token = token
            self._refresh_at_ms = refresh_at
            self.refreshes += 1
        log.info("OAUTHBEARER login of %s: token for principal %s valid until %s; next "
                 "refresh at %s", self.name, token.principal_name, _iso(token.lifetime_ms),
                 _iso(refresh_at))
        return True

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(
            target=_refresher, args=(weakref.ref(self), self._stop),
            name=f"oauthbearer-relogin-{self.name}", daemon=True)
        self._thread.start()
        weakref.finalize(self, self._stop.set)  # a login no one holds stops its thread

    def seconds_until_refresh(self) -> float:
        with self._lock:
            due = self._refresh_at_ms
        return max(0.0, due / 1000 - self._clock())

    def close(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)


def _refresher(ref: weakref.ref[RefreshingLogin], stop: threading.Event) -> None:
    # holds the login only while working on it, so an unused login is collected
    while not stop.is_set():
        login = ref()
        if login is None:
            return
        if login.seconds_until_refresh() <= 0:
            login.refresh()
        delay = login.seconds_until_refresh()
        del login
        stop.wait(delay)


def _iso(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))
