"""Which Kafka release a broker's ApiVersions table corresponds to (pure)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rivven_kproto.client.kafka_releases import RELEASES
from rivven_kproto.client.release_match import match_releases
from tests.spec_gate import need_spec

ROOT = Path(__file__).resolve().parents[2]
SPEC_ROOT = ROOT.parent / "shared" / "kafka-protocol"


@pytest.mark.parametrize("release", sorted(RELEASES))
def test_a_table_equal_to_a_release_matches_it_exactly(release: str) -> None:
    table = {key: newest for key, (_, newest) in RELEASES[release].items()}
    best = match_releases(table)[0]
    assert best.release == release and not best.behind and not best.beyond
    assert sorted(best.same) == sorted(table)


def test_differences_are_sorted_into_behind_and_beyond() -> None:
    table = {key: newest for key, (_, newest) in RELEASES["3.9"].items()}
    table[0] -= 1  # an older Produce
    del table[1]  # no Fetch at all
    table[3] += 1  # a newer Metadata
    table[9999] = 0  # an API Kafka 3.9 does not have
    match = next(m for m in match_releases(table) if m.release == "3.9")
    assert match.behind == {0: (RELEASES["3.9"][0][1] - 1, RELEASES["3.9"][0][1]), 1: (None, RELEASES["3.9"][1][1])}
    assert match.beyond == {3: (RELEASES["3.9"][3][1] + 1, RELEASES["3.9"][3][1]), 9999: (0, None)}
    assert 0 not in match.same and 3 not in match.same


def test_known_facts_of_the_releases() -> None:
    """Spot checks read from Kafka's schemas: Kafka 4.x serves KIP-848's heartbeat v1 and
    Produce up to v12 (v13 with topic ids is 4.1+); 3.9 does not serve heartbeat v1."""
    assert RELEASES["4.2"][68][1] >= 1 and RELEASES["3.9"].get(68, (0, 0))[1] == 0
    assert RELEASES["4.2"][0][0] == 3  # KIP-896: Produce v0-v2 removed in 4.0
    assert RELEASES["3.9"][0] == (0, 11)


def test_the_generated_table_is_current() -> None:
    need_spec(SPEC_ROOT)
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "kafka_release_table.py"), "--check", "--spec-root", str(SPEC_ROOT)],
        capture_output=True, text=True, cwd=ROOT / "tools",
    )
    assert result.returncode == 0, result.stderr
