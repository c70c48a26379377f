"""Any bytes into the SASL servers, the ACL znode decoders and the mapping rules: a
KafkaError (or the documented ValueError), never anything else."""

from __future__ import annotations

import contextlib

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.configdef import ConfigError
from odradek.protocol.errors import KafkaError
from odradek.security import acl_zk
from odradek.security.principal import SslPrincipalMapper
from odradek.security.sasl import SaslMechanisms
from odradek.security.sasl.oauthbearer import UnsecuredJwsValidator
from odradek.security.sasl.scram import make_credential

CRED = make_credential("SCRAM-SHA-256", "pw", 4096)
MECHS = SaslMechanisms.from_config({
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,OAUTHBEARER",
    "listener.name.x.plain.sasl.jaas.config":
        'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="pw";',
}, "X", lambda m, u: CRED)

SCRAM_LIKE = st.one_of(
    st.binary(max_size=200),
    st.builds(lambda n, r, e: f"n,,n={n},r={r}{e}".encode(), st.text(max_size=20),
              st.text(max_size=20), st.sampled_from(["", ",tokenauth=true", ",x=y"])),
)


@settings(max_examples=300, deadline=None)
@given(mechanism=st.sampled_from(["PLAIN", "SCRAM-SHA-256", "OAUTHBEARER"]),
       first=SCRAM_LIKE, second=st.binary(max_size=200))
def test_sasl_servers_fail_cleanly_on_any_bytes(mechanism: str, first: bytes,
                                                second: bytes) -> None:
    server = MECHS.create(mechanism)
    for data in (first, second):
        try:
            server.evaluate(data)
        except KafkaError as e:
            assert e.code.value != 0
            assert "pw" not in str(e).split("SASL mechanism")[0].replace("password", "")
            return


@settings(max_examples=300, deadline=None)
@given(token=st.one_of(st.text(max_size=100),
                       st.builds(lambda a, b, c: f"{a}.{b}.{c}", st.text(max_size=30),
                                 st.text(max_size=30), st.text(max_size=5))))
def test_unsecured_validator_refuses_garbage_with_token_invalid(token: str) -> None:
    from odradek.security.sasl.oauthbearer import TokenInvalid

    with contextlib.suppress(TokenInvalid):
        UnsecuredJwsValidator().validate(token)


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=300), path=st.text(max_size=60))
def test_acl_znodes_and_notifications_decode_or_raise_their_error(data: bytes,
                                                                  path: str) -> None:
    for call in (lambda: acl_zk.decode_acls(data),
                 lambda: acl_zk.decode_bindings("/kafka-acl/Topic/t", data),
                 lambda: acl_zk.decode_change(acl_zk.LITERAL_CHANGES, data),
                 lambda: acl_zk.decode_change(acl_zk.EXTENDED_CHANGES, data),
                 lambda: acl_zk.pattern_from_path(path)):
        with contextlib.suppress(acl_zk.AclZnodeError):
            call()


@settings(max_examples=300, deadline=None)
@given(rules=st.text(max_size=60), dn=st.text(max_size=60))
def test_mapping_rules_parse_or_raise_config_error(rules: str, dn: str) -> None:
    try:
        mapper = SslPrincipalMapper(rules)
    except ConfigError:
        return
    with contextlib.suppress(ValueError):
        mapper.name(dn)


def test_acl_znodes_of_the_wrong_shape() -> None:
    import pytest

    for data in (b'{"version":1,"acls":5}', b'{"version":1,"acls":[1]}', b"[1]",
                 b'{"version":1,"acls":[{"principal":"alice"}]}', b'"x"'):
        with pytest.raises(acl_zk.AclZnodeError):
            acl_zk.decode_acls(data)
    for data in (b"[1]", b'{"version":"x"}', b'{"version":1,"resourceType":"TOPIC"}'):
        with pytest.raises(acl_zk.AclZnodeError):
            acl_zk.decode_change(acl_zk.EXTENDED_CHANGES, data)
