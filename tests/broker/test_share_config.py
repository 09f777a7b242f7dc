"""share.auto.offset.reset's values (Kafka 4.2): latest, earliest and ``by_duration:<ISO 8601
duration>`` read as java.time.Duration.parse reads it; malformed or negative durations refused."""

from __future__ import annotations

import pytest

from rivven_kproto.broker.share.config import ShareConfig, ShareConfigError, apply_share_keys


def reset(value: str) -> ShareConfig:
    return apply_share_keys(ShareConfig(), {"share.auto.offset.reset": value})


@pytest.mark.parametrize(("value", "normalized", "millis"), [
    ("latest", "latest", None),
    ("EARLIEST", "earliest", None),
    ("by_duration:PT1H", "by_duration:PT1H", 3_600_000),
    ("BY_DURATION:p1dt2h30m", "by_duration:P1DT2H30M", 95_400_000),
    ("by_duration:P2D", "by_duration:P2D", 172_800_000),
    ("by_duration:PT0.5S", "by_duration:PT0.5S", 500),
    ("by_duration:PT0S", "by_duration:PT0S", 0),
])
def test_accepted_values(value: str, normalized: str, millis: int | None) -> None:
    config = reset(value)
    assert (config.auto_offset_reset, config.reset_duration_ms) == (normalized, millis)


@pytest.mark.parametrize("value", ["none", "by_duration", "by_duration:", "by_duration:P", "by_duration:PT",
                                   "by_duration:1H", "by_duration:P1W", "by_duration:-PT1H", "by_duration:PT-1S"])
def test_refused_values(value: str) -> None:
    with pytest.raises(ShareConfigError):
        reset(value)
