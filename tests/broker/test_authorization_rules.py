"""The authorization table covers every API the broker serves, and its rows are well formed."""

from __future__ import annotations

from rivven_kproto.broker.security.authorization_rules import RULES, Scope
from rivven_kproto.server.handlers import HANDLERS


def test_every_served_api_has_a_row() -> None:
    missing = sorted(key for key in HANDLERS if key not in RULES)
    assert not missing, f"served APIs without an authorization row: {missing}"


def test_no_row_for_an_api_not_served() -> None:
    assert sorted(set(RULES) - set(HANDLERS)) == []


def test_rows_are_well_formed() -> None:
    for key, row in RULES.items():
        assert row.api_key == key
        for check in row.checks:
            if check.scope is Scope.FILTER:
                assert check.error is None, (row.name, check.label)
            elif check.scope is not Scope.DETAILS:  # DETAILS withhold with an error, or without (a bit set)
                assert check.error is not None, (row.name, check.label)
        served = HANDLERS[key].versions
        for check in row.checks:
            if check.versions is not None:
                assert check.versions[0] <= served.high, (row.name, check.label)
