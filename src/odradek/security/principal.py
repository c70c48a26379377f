"""Principals: `User:alice`, and the names Kafka derives from a TLS certificate.

`KafkaPrincipal` is Kafka's `type:name` pair. `SslPrincipalMapper` applies
`ssl.principal.mapping.rules` (Kafka's RULE syntax) to a certificate subject, and
`rfc2253_name` builds that subject string the way Java's X500Principal.getName() does
(most specific RDN first, `CN=alice,OU=eng,O=acme`), which is what the rules see.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from odradek.configdef import ConfigError

USER_TYPE = "User"
WILDCARD_PRINCIPAL_STR = "User:*"


@dataclass(frozen=True, order=True)
class KafkaPrincipal:
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @staticmethod
    def parse(text: str) -> KafkaPrincipal:
        """SecurityUtils.parseKafkaPrincipal: split at the first colon."""
        if not text or ":" not in text:
            raise ValueError(
                f"expected a string in format principalType:principalName but got {text}"
            )
        ptype, name = text.split(":", 1)
        return KafkaPrincipal(ptype, name)


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
WILDCARD_PRINCIPAL = KafkaPrincipal(USER_TYPE, "*")


def user(name: str) -> KafkaPrincipal:
    return KafkaPrincipal(USER_TYPE, name)


# Java's X500Principal.getName(RFC2253) keywords for the OIDs it knows; others print
# as dotted OIDs with a #hex DER value, as Java does.
_RFC2253_KEYWORDS = {
    "2.5.4.3": "CN",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "2.5.4.6": "C",
    "2.5.4.9": "STREET",
    "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}


def _escape_rfc2253(value: str) -> str:
    out = []
    for i, ch in enumerate(value):
        if ch in ',+"\\<>;' or (i == 0 and ch in "# ") or (i == len(value) - 1 and ch == " "):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def _der_value(attr: object) -> bytes:
    """An attribute value as DER (tag, length, bytes): Java prints unknown OIDs so."""
    value = getattr(attr, "value", b"")
    raw = value.encode() if isinstance(value, str) else bytes(value)
    asn1 = getattr(attr, "_type", None)
    tag = int(getattr(asn1, "value", 12))
    n = len(raw)
    length = bytes([n]) if n < 128 else bytes([0x80 | ((n.bit_length() + 7) // 8)]) + n.to_bytes(
        (n.bit_length() + 7) // 8, "big"
    )
    return bytes([tag]) + length + raw


def rfc2253_name(subject: object) -> str:
    """The subject of a `cryptography` x509.Name as X500Principal.getName() prints it.

    RFC 2253 order (the last RDN of the DER sequence first), multi-valued RDNs joined
    with `+`, Java's escaping. Used to build the default principal `User:CN=…,OU=…`.
    """
    from cryptography import x509

    assert isinstance(subject, x509.Name)
    parts = []
    for rdn in reversed(list(subject.rdns)):
        avas = []
        for attr in rdn:
            oid = attr.oid.dotted_string
            key = _RFC2253_KEYWORDS.get(oid)
            if key is None or not isinstance(attr.value, str):
                avas.append(f"{oid}=#{_der_value(attr).hex()}")
            else:
                avas.append(f"{key}={_escape_rfc2253(attr.value)}")
        parts.append("+".join(avas))
    return ",".join(parts)


def rfc2253_from_ssl_peercert(peercert: dict[str, object]) -> str:
    """The same name from `SSLSocket.getpeercert()`'s `subject` (a tuple of RDNs)."""
    keys = {"commonName": "CN", "organizationalUnitName": "OU", "organizationName": "O",
            "localityName": "L", "stateOrProvinceName": "ST", "countryName": "C",
            "streetAddress": "STREET", "domainComponent": "DC", "userId": "UID"}
    rdns = peercert.get("subject", ())
    assert isinstance(rdns, tuple)
    parts = []
    for rdn in reversed(rdns):
        parts.append("+".join(f"{keys.get(k, k)}={_escape_rfc2253(v)}" for k, v in rdn))
    return ",".join(parts)


# Kafka's SslPrincipalMapper patterns, translated from Java regex literals.
_RULE_PATTERN = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE_PATTERN + r")\s*(,\s*|$)")
_RULE_PARSER = re.compile(_RULE_PATTERN)
_BACKREF = re.compile(r"\$(\d+)")


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None
    replacement: str
    lower: bool
    upper: bool

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if not self.pattern.fullmatch(dn):
            return None
        result = self.pattern.sub(self._python_replacement(), dn)
        if self.lower:
            return result.lower()
        if self.upper:
            return result.upper()
        return result

    def _python_replacement(self) -> str:
        """Java's `$n` replacement syntax as Python's, keeping Kafka's rule that a
        reference beyond the group count loses digits until it fits, else is literal."""
        assert self.pattern is not None
        groups = self.pattern.groups
        out = []
        i = 0
        text = self.replacement
        while i < len(text):
            ch = text[i]
            if ch == "\\" and i + 1 < len(text):
                out.append(text[i + 1].replace("\\", "\\\\"))
                i += 2
                continue
            m = _BACKREF.match(text, i)
            if m and groups > 0:
                digits = m.group(1)
                n = int(digits)
                while n > groups and n >= 10:
                    n //= 10
                if n <= groups:
                    used = len(str(n))
                    out.append(f"\\g<{n}>")
                    out.append(digits[used:])
                    i = m.end()
                    continue
                out.append("$")
                i += 1
                continue
            out.append("\\\\" if ch == "\\" else ch)
            i += 1
        return "".join(out)

    def __str__(self) -> str:
        if self.pattern is None:
            return "DEFAULT"
        suffix = "/L" if self.lower else "/U" if self.upper else ""
        return f"RULE:{self.pattern.pattern}/{self.replacement}{suffix}"


class SslPrincipalMapper:
    """`ssl.principal.mapping.rules`: the first rule that matches names the principal."""

    def __init__(self, rules: str | None = "DEFAULT") -> None:
        self.rules = self._parse(self._split(rules if rules is not None else "DEFAULT"))

    @staticmethod
    def _split(text: str) -> list[str]:
        return [m.group(1) for m in _RULE_SPLITTER.finditer(text.strip())]

    @staticmethod
    def _parse(rules: Sequence[str]) -> list[_Rule]:
        out = []
        for rule in rules:
            m = _RULE_PARSER.match(rule)
            if m is None:
                raise ConfigError(f"ssl.principal.mapping.rules: Invalid rule: {rule}")
            if m.end() != len(rule):
                raise ConfigError(
                    f"ssl.principal.mapping.rules: Invalid rule: `{rule}`, "
                    f"unmatched substring: `{rule[m.end():]}`"
                )
            if m.group(1) is not None:
                out.append(_Rule(None, "", False, False))
            elif m.group(2) is not None:
                try:
                    pattern = re.compile(m.group(2))
                except re.error as e:
                    raise ConfigError(
                        f"ssl.principal.mapping.rules: Invalid rule: {rule}: {e}"
                    ) from None
                out.append(_Rule(pattern, m.group(4), m.group(6) == "L", m.group(6) == "U"))
        return out

    def name(self, distinguished_name: str) -> str:
        for rule in self.rules:
            result = rule.apply(distinguished_name)
            if result is not None:
                return result
        raise NoMatchingRule(
            f"No rules apply to {distinguished_name}, rules [{', '.join(map(str, self.rules))}]"
        )

    def principal(self, distinguished_name: str) -> KafkaPrincipal:
        return KafkaPrincipal(USER_TYPE, self.name(distinguished_name))


class NoMatchingRule(ValueError):
    """No mapping rule applies to a certificate subject: Kafka fails the handshake."""
