"""Principals and ssl.principal.mapping.rules, with Kafka's own rule-test cases."""

from __future__ import annotations

import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID

from odradek.configdef import ConfigError
from odradek.security.principal import (
    KafkaPrincipal,
    NoMatchingRule,
    SslPrincipalMapper,
    rfc2253_name,
)


def test_principal_parses_at_the_first_colon_and_prints_back() -> None:
    p = KafkaPrincipal.parse("User:CN=a:b,O=c")
    assert p == KafkaPrincipal("User", "CN=a:b,O=c")
    assert str(p) == "User:CN=a:b,O=c"
    with pytest.raises(ValueError, match="principalType:principalName"):
        KafkaPrincipal.parse("alice")


def test_default_rule_keeps_the_whole_distinguished_name() -> None:
    assert SslPrincipalMapper("DEFAULT").name("CN=alice,OU=eng") == "CN=alice,OU=eng"
    assert SslPrincipalMapper(None).principal("CN=x") == KafkaPrincipal("User", "CN=x")


@pytest.mark.parametrize(
    ("rules", "dn", "expected"),
    [
        # cases from Kafka's SslPrincipalMapperTest
        ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT", "CN=kafka-server1,OU=ServiceUsers,O=Org",
         "kafka-server1"),
        ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT", "CN=kafka1,OU=SME,O=mycp,L=Fulton",
         "CN=kafka1,OU=SME,O=mycp,L=Fulton"),
        ("RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,DEFAULT",
         "CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Palo Alto,ST=CA,C=US", "duke@javasoft"),
        ("RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/U,DEFAULT",
         "CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Palo Alto,ST=CA,C=US", "DUKE@JAVASOFT"),
        ("RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U", "cn=a,ou=b,dc=c,dc=d", "A@B"),
        ("RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/,DEFAULT", "CN=Some Name,OU=x", "Some Name"),
        # a back reference beyond the groups is literal, as Kafka's escaping
        ("RULE:^CN=(.*?),O=.*$/$1@$4/", "CN=svc,O=x", "svc@$4"),
        ("RULE:^CN=(.*),OU=(.*)$/$1\\/$2/", "CN=a,OU=b", "a/b"),
    ],
)
def test_mapping_rules_name_principals_as_kafka(rules: str, dn: str, expected: str) -> None:
    assert SslPrincipalMapper(rules).name(dn) == expected


def test_no_matching_rule_and_invalid_rules_are_refused() -> None:
    with pytest.raises(NoMatchingRule, match="No rules apply to CN=x"):
        SslPrincipalMapper("RULE:^CN=y$/z/").name("CN=x")
    for bad in ("DEFAULTS", "RULE:CN=(.*?)/$1/G", "RULE:CN=(.*?)/$1", "RULE:(/$1/"):
        with pytest.raises(ConfigError, match=r"ssl\.principal\.mapping\.rules"):
            SslPrincipalMapper(bad)


def test_subject_prints_in_rfc2253_order_with_java_escaping() -> None:
    name = x509.Name([
        x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Acme, Inc"),
        x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "eng"),
        x509.NameAttribute(NameOID.COMMON_NAME, "alice"),
    ])
    assert rfc2253_name(name) == "CN=alice,OU=eng,O=Acme\\, Inc,C=US"
    email = x509.Name([x509.NameAttribute(NameOID.EMAIL_ADDRESS, "a@b"),
                       x509.NameAttribute(NameOID.COMMON_NAME, "a")])
    # Java prints an OID it has no keyword for as its DER value (IA5String 0x16)
    assert rfc2253_name(email) == "CN=a,1.2.840.113549.1.9.1=#1603614062"
