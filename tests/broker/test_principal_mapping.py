"""ssl.principal.mapping.rules as Kafka's SslPrincipalMapper applies them."""

from __future__ import annotations

import pytest

from rivven_kproto.broker.security.principal_mapping import (
    NoMatchingRule,
    describe_rules,
    map_principal,
    parse_rules,
)

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


# Kafka's own reference cases (SslPrincipalMapperTest, KIP-371).
@pytest.mark.parametrize(
    "text",
    [
        "DEFAULT",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
        "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
        "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
        "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
    ],
)
def test_kafkas_valid_rules(text: str) -> None:
    assert parse_rules(text)


@pytest.mark.parametrize(
    "text",
    [
        "default", "DEFAUL", "DEFAULT/L", "DEFAULT/U",
        "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
        "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
    ],
)
def test_kafkas_invalid_rules(text: str) -> None:
    with pytest.raises(ValueError, match="Invalid rule"):
        parse_rules(text)


def test_kafkas_mapper_cases() -> None:
    rules = parse_rules(", ".join([
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
        "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
        "DEFAULT",
    ]))
    assert map_principal(rules, "CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert map_principal(rules, "CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert map_principal(rules, "cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert map_principal(rules, "cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    assert map_principal(rules, "OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"


@pytest.mark.parametrize(
    ("text", "described"),
    [
        ("", "[]"),
        ("DEFAULT", "[DEFAULT]"),
        ("RULE://", "[RULE:/]"),
        ("RULE:/.*/", "[RULE:/.*]"),
        ("RULE:/.*/L", "[RULE:/.*/L]"),
        ("RULE://,DEFAULT", "[RULE:/, DEFAULT]"),
        ("  RULE:// ,  DEFAULT  ", "[RULE:/, DEFAULT]"),
        ("  RULE:   /     / ,  DEFAULT  ", "[RULE:   /     , DEFAULT]"),
        ("  RULE:  /     /U   ,DEFAULT  ", "[RULE:  /     /U, DEFAULT]"),
        ("  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ", "[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]"),
        # empty rules are ignored
        (",   , , ,      , , ,   ", "[]"),
        (",,RULE://,,,DEFAULT,,", "[RULE:/, DEFAULT]"),
        (",  , RULE: /   /    ,,,   DEFAULT, ,   ", "[RULE: /   , DEFAULT]"),
        ("     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,", "[RULE:   /  /U, DEFAULT]"),
        # escape sequences
        ("RULE:\\/\\\\\\(\\)\\n\\t/\\/\\//", "[RULE:\\/\\\\\\(\\)\\n\\t/\\/\\/]"),
        ("RULE:\\**\\/+/*/L,RULE:\\/*\\**/**/", "[RULE:\\**\\/+/*/L, RULE:\\/*\\**/**]"),
        # rules rule
        (
            "RULE:,RULE:,/,RULE:,\\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT",
            "[RULE:,RULE:,/,RULE:,\\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, /DEFAULT, DEFAULT]",
        ),
    ],
)
def test_kafkas_rule_splitting(text: str, described: str) -> None:
    assert describe_rules(parse_rules(text)) == described


def test_kafkas_comma_with_whitespace() -> None:
    rules = parse_rules("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT")
    assert map_principal(rules, "CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz") == "Tkac\\, Adam"


def test_no_rules_refuse_every_name() -> None:
    # Kafka: an empty ssl.principal.mapping.rules is no rule at all (its default is DEFAULT).
    with pytest.raises(NoMatchingRule):
        map_principal(parse_rules(""), "CN=x")


@pytest.mark.parametrize(
    ("rule", "dn", "name"),
    [
        ("RULE:^CN=(.*)$/\\$1-\\\\/", "CN=x", "$1-\\"),  # Java replacement escapes: \\x is x
        ("RULE:^CN=(.*)$/$12/", "CN=x", "x2"),  # $12 with one group: group 1, then "2"
        ("RULE:^CN=(.*)$/$1@$4/", "CN=x", "x@$4"),  # a group that does not exist is literal (Kafka)
        ("RULE:^CN=(a)?(.*)$/[$1]$2/", "CN=x", "[]x"),  # an unmatched group is empty
        ("RULE:^CN=(.*)$/$0!/", "CN=x", "CN=x!"),
    ],
)
def test_java_replacement_semantics(rule: str, dn: str, name: str) -> None:
    assert map_principal(parse_rules(rule), dn) == name


def test_a_replacement_java_cannot_apply_refuses_the_name() -> None:
    rules = parse_rules("RULE:^CN=(.*)$/$x/,DEFAULT")  # Kafka accepts it; applying it throws
    with pytest.raises(NoMatchingRule):
        map_principal(rules, "CN=x")
