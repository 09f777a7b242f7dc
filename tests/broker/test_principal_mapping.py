"""ssl.principal.mapping.rules as Kafka's SslPrincipalMapper applies them."""

from __future__ import annotations

import pytest

from rivven_kproto.broker.security.principal_mapping import NoMatchingRule, map_principal, parse_rules

DN = "CN=Kafka-Client1,OU=ServiceUsers,O=Example,L=Paris,ST=IDF,C=FR"
KAFKA_DOC_RULES = (
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,"
    "DEFAULT"
)


@pytest.mark.parametrize(
    ("dn", "name"),
    [
        (DN, "Kafka-Client1"),
        ("CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Santa Clara,ST=CA,C=US", "duke@javasoft"),
        ("OU=JavaSoft,cn=Duke2,O=Sun", "duke2"),
        ("OU=JavaSoft,O=Sun", "OU=JavaSoft,O=Sun"),  # only DEFAULT applies
    ],
)
def test_the_first_rule_that_applies_wins(dn: str, name: str) -> None:
    assert map_principal(parse_rules(KAFKA_DOC_RULES), dn) == name


def test_default_and_case_and_escaped_slashes() -> None:
    assert map_principal(parse_rules("DEFAULT"), DN) == DN
    assert map_principal(parse_rules("RULE:^CN=([^,]*),.*$/$1/U"), DN) == "KAFKA-CLIENT1"
    assert map_principal(parse_rules(r"RULE:^CN=([^,]*),OU=([^,]*),.*$/$2\/$1/"), DN) == "ServiceUsers/Kafka-Client1"
    assert map_principal(parse_rules("  RULE:^CN=([^,]*),.*$/svc-$1/L , DEFAULT  "), DN) == "svc-kafka-client1"


def test_no_rule_applies() -> None:
    with pytest.raises(NoMatchingRule, match="No rules apply to CN=x"):
        map_principal(parse_rules("RULE:^CN=admin$/admin/"), "CN=x")


@pytest.mark.parametrize("text", ["RULE:^CN=(.*)$/$1", "RULE:^CN=(.*$/$1/", "NOPE", "RULE:a/b/X"])
def test_malformed_rules_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="Invalid rule"):
        parse_rules(text)
