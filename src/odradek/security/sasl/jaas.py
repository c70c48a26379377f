"""Kafka's JAAS configuration syntax, for `sasl.jaas.config` and
`listener.name.<listener>.<mechanism>.sasl.jaas.config`:

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_admin="admin-secret";

One login module, a control flag, `key=value` options (values quoted or bare words),
a closing semicolon; `/* */` and `//` comments as Java's StreamTokenizer allows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from odradek.configdef import ConfigError

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
MODULE_FOR_MECHANISM = {"PLAIN": PLAIN_MODULE, "SCRAM-SHA-256": SCRAM_MODULE,
                        "SCRAM-SHA-512": SCRAM_MODULE, "OAUTHBEARER": OAUTHBEARER_MODULE}
FLAGS = ("required", "requisite", "sufficient", "optional")


@dataclass(frozen=True)
class LoginModule:
    name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:  # options hold passwords: never print them
        return f"LoginModule({self.name} {self.flag}, options={sorted(self.options)})"

    @property
    def plain_users(self) -> dict[str, str]:
        """PlainLoginModule's `user_<name>="<password>"` options."""
        return {k[5:]: v for k, v in self.options.items() if k.startswith("user_") and k[5:]}


def _tokens(text: str, prop: str) -> list[tuple[str, str]]:
    """(kind, value) with kind in word, quoted, '=', ';'."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise ConfigError(f"{prop}: unterminated comment in JAAS config")
            i = end + 2
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif ch in "=;":
            out.append((ch, ch))
            i += 1
        elif ch == '"':
            j = i + 1
            buf = []
            while j < n and text[j] != '"':
                if text[j] == "\\" and j + 1 < n:
                    j += 1
                buf.append(text[j])
                j += 1
            if j >= n:
                raise ConfigError(f"{prop}: unterminated quoted value in JAAS config")
            out.append(("quoted", "".join(buf)))
            i = j + 1
        else:
            j = i
            while j < n and not text[j].isspace() and text[j] not in '=;"':
                j += 1
            out.append(("word", text[i:j]))
            i = j
    return out


def parse_jaas(text: str, prop: str = "sasl.jaas.config") -> list[LoginModule]:
    toks = _tokens(text, prop)
    modules = []
    i = 0
    while i < len(toks):
        kind, name = toks[i]
        if kind != "word":
            raise ConfigError(f"{prop}: expected a login module class name in JAAS config")
        if i + 1 >= len(toks) or toks[i + 1][0] != "word":
            raise ConfigError(f"{prop}: login module control flag not specified in JAAS config")
        flag = toks[i + 1][1].lower()
        if flag not in FLAGS:
            raise ConfigError(f"{prop}: invalid login module control flag "
                              f"'{toks[i + 1][1]}' in JAAS config")
        i += 2
        options: dict[str, str] = {}
        while True:
            if i >= len(toks):
                raise ConfigError(f"{prop}: JAAS config entry not terminated by semi-colon")
            kind, key = toks[i]
            if kind == ";":
                i += 1
                break
            if kind != "word":
                raise ConfigError(f"{prop}: expected an option name in JAAS config")
            if i + 2 >= len(toks) or toks[i + 1][0] != "=" or toks[i + 2][0] not in (
                    "word", "quoted"):
                raise ConfigError(f"{prop}: Value not specified for key '{key}' in JAAS config")
            options[key] = toks[i + 2][1]
            i += 3
        modules.append(LoginModule(name, flag, options))
    return modules


def parse_single(text: str, prop: str = "sasl.jaas.config") -> LoginModule:
    """`sasl.jaas.config` must hold exactly one login module, as Kafka requires."""
    modules = parse_jaas(text, prop)
    if len(modules) != 1:
        raise ConfigError(f"{prop}: JAAS config property contains {len(modules)} login "
                          "modules, should be 1 module")
    return modules[0]


def listener_jaas(props: Mapping[str, str], listener: str, mechanism: str) -> LoginModule | None:
    """The broker's JAAS entry for one listener and mechanism
    (`listener.name.<listener>.<mechanism>.sasl.jaas.config`, names lower-cased), checked
    to be that mechanism's login module."""
    prop = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
    text = props.get(prop)
    if text is None:
        return None
    module = parse_single(text, prop)
    expected = MODULE_FOR_MECHANISM.get(mechanism)
    if expected is not None and module.name != expected:
        raise ConfigError(f"{prop}: {mechanism} needs {expected}, got {module.name}")
    return module
