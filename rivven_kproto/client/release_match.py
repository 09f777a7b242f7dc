"""Which Kafka release a broker's ApiVersions table corresponds to.

Per release (``kafka_releases.RELEASES``) the broker's APIs are sorted into: at the release's
newest version, behind it (or missing), and beyond it (newer versions, or APIs the release's
brokers do not serve). The release with the fewest APIs behind, then beyond, is the one the table
"corresponds to"; the differences say by how much.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .kafka_releases import RELEASES


@dataclass
class ReleaseMatch:
    release: str
    same: list[int] = field(default_factory=list)  # API keys at the release's newest version
    behind: dict[int, tuple[int | None, int]] = field(default_factory=dict)  # key -> (ours or None, the release's)
    beyond: dict[int, tuple[int, int | None]] = field(default_factory=dict)  # key -> (ours, the release's or None)


def match_releases(broker_max: dict[int, int]) -> list[ReleaseMatch]:
    """``broker_max``: API key -> the newest version the broker serves. Best match first."""
    matches = []
    for release, apis in RELEASES.items():
        match = ReleaseMatch(release)
        for key, (_, newest) in sorted(apis.items()):
            ours = broker_max.get(key)
            if ours is None or ours < newest:
                match.behind[key] = (ours, newest)
            elif ours == newest:
                match.same.append(key)
            else:
                match.beyond[key] = (ours, newest)
        for key, ours in sorted(broker_max.items()):
            if key not in apis:
                match.beyond[key] = (ours, None)
        matches.append(match)
    return sorted(matches, key=lambda m: (len(m.behind), len(m.beyond), m.release))
