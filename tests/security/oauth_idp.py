"""A tiny OAuth identity provider for tests: an HTTP token endpoint (RFC 6749 4.4, the
client_credentials grant with HTTP Basic client authentication) that signs RS256 JWTs,
and the JWKS file of its key for the brokers' validator. A client it knows but signs
for with a key outside the JWKS ("rogue") gets a token no broker accepts."""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ISSUER = "https://idp.test"
AUDIENCE = "kafka"


class IdentityProvider:
    def __init__(self, base: Path, clients: dict[str, str], lifetime_s: int = 3600,
                 rogue: frozenset[str] = frozenset()) -> None:
        import jwt
        from cryptography.hazmat.primitives.asymmetric import rsa
        from jwt.algorithms import RSAAlgorithm

        self._jwt = jwt
        self.clients = clients
        self.lifetime_s = lifetime_s
        self.rogue = rogue
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        jwk = json.loads(RSAAlgorithm.to_jwk(self.key.public_key()))
        jwk.update(kid="idp-1", alg="RS256", use="sig")
        self.jwks_path = base / "jwks.json"
        self.jwks_path.write_text(json.dumps({"keys": [jwk]}))
        self.requests: list[dict[str, Any]] = []  # what each POST carried (no secret)
        self.fail: list[int] = []  # statuses to answer the next requests with
        self._server: ThreadingHTTPServer | None = None

    @property
    def token_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/oauth2/token"

    def issue(self, client_id: str, scope: str | None) -> str:
        now = int(time.time())
        claims: dict[str, Any] = {"sub": client_id, "iss": ISSUER, "aud": AUDIENCE,
                                  "iat": now, "exp": now + self.lifetime_s}
        if scope:
            claims["scope"] = scope
        key = self.other_key if client_id in self.rogue else self.key
        return str(self._jwt.encode(claims, key, algorithm="RS256",
                                    headers={"kid": "idp-1"}))

    def _handle(self, handler: BaseHTTPRequestHandler) -> tuple[int, dict[str, Any]]:
        length = int(handler.headers.get("Content-Length") or 0)
        form = urllib.parse.parse_qs(handler.rfile.read(length).decode())
        auth = handler.headers.get("Authorization", "")
        client_id, secret = "", ""
        if auth.startswith("Basic "):
            client_id, _, secret = base64.b64decode(auth[6:]).decode().partition(":")
        self.requests.append({"path": handler.path, "client_id": client_id, "form": form,
                              "content_type": handler.headers.get("Content-Type")})
        if self.fail:
            return self.fail.pop(0), {"error": "temporarily_unavailable"}
        if form.get("grant_type") != ["client_credentials"]:
            return 400, {"error": "unsupported_grant_type"}
        if self.clients.get(client_id) != secret or not secret:
            return 401, {"error": "invalid_client", "error_description": "bad credentials"}
        scope = form.get("scope", [None])[0]
        return 200, {"access_token": self.issue(client_id, scope), "token_type": "Bearer",
                     "expires_in": self.lifetime_s}

    @contextmanager
    def serving(self) -> Iterator[IdentityProvider]:
        idp = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                status, body = idp._handle(self)
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True,
                                  name="test-idp")
        thread.start()
        try:
            yield self
        finally:
            self._server.shutdown()
            self._server.server_close()
            thread.join(5)

    def broker_properties(self, listener: str, client_id: str, secret: str,
                          scope: str | None = None) -> dict[str, str]:
        """A broker that validates tokens against this IdP's JWKS and logs in to the
        others with the client_credentials grant, in Kafka's property names."""
        prefix = f"listener.name.{listener.lower()}.oauthbearer."
        scope_option = f' scope="{scope}"' if scope else ""
        return {
            f"{prefix}sasl.server.callback.handler.class":
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
            f"{prefix}sasl.login.callback.handler.class":
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
            f"{prefix}sasl.jaas.config":
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                f'clientId="{client_id}" clientSecret="{secret}"{scope_option};',
            "sasl.oauthbearer.token.endpoint.url": self.token_url,
            "sasl.oauthbearer.jwks.endpoint.url": f"file://{self.jwks_path}",
            "sasl.oauthbearer.expected.audience": AUDIENCE,
            "sasl.oauthbearer.expected.issuer": ISSUER,
        }
