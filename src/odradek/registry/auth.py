"""HTTP basic authentication, as Confluent's registry configures it: a password file of
`user: password[,role...]` lines (Jetty's PropertyFileLoginModule format), every request
authenticated. Only plain passwords: Jetty's OBF:/MD5:/CRYPT: forms are refused at start
rather than silently compared as text.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
from pathlib import Path

from starlette.types import ASGIApp, Receive, Scope, Send

CONTENT_TYPE = b"application/vnd.schemaregistry.v1+json"
USER = "odradek.registry.user"  # the authenticated user's name, in the ASGI scope


class PasswordFileError(ValueError):
    pass


def load_password_file(path: Path) -> dict[str, str]:
    users: dict[str, str] = {}
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        raise PasswordFileError(f"cannot read the password file {path}: {e}") from e
    for n, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        user, sep, rest = line.partition(":")
        password = rest.split(",", 1)[0].strip()
        if not sep or not user.strip() or not password:
            raise PasswordFileError(f"{path}:{n}: expected 'user: password[,role...]'")
        if password.startswith(("OBF:", "MD5:", "CRYPT:")):
            raise PasswordFileError(f"{path}:{n}: only plain passwords are supported, "
                                    f"not {password.split(':', 1)[0]}:")
        users[user.strip()] = password
    if not users:
        raise PasswordFileError(f"{path}: no users")
    return users


def basic_auth(app: ASGIApp, users: dict[str, str], realm: str = "SchemaRegistry") -> ASGIApp:
    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        user = _authenticated(scope, users)
        if user is not None:
            await app({**scope, USER: user}, receive, send)
            return
        body = json.dumps({"error_code": 401, "message": "Unauthorized"}).encode()
        await send({"type": "http.response.start", "status": 401, "headers": [
            (b"content-type", CONTENT_TYPE), (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", f'Basic realm="{realm}"'.encode())]})
        await send({"type": "http.response.body", "body": body})
    return wrapped


def _authenticated(scope: Scope, users: dict[str, str]) -> str | None:
    header = dict(scope.get("headers") or []).get(b"authorization", b"")
    scheme, _, token = header.partition(b" ")
    if scheme.lower() != b"basic":
        return None
    try:
        user, _, password = base64.b64decode(token, validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return None
    expected = users.get(user)
    if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
        return None
    return user
