"""KIP-848 server-side assignors, pure: subscriptions and partition counts in, a target assignment out.

``uniform`` (Kafka's default) balances partition counts across the members subscribed to each
topic and is sticky: a member keeps what the previous target gave it as long as that stays within
balance, so a member joining or leaving moves as few partitions as possible. ``range`` gives each
member a contiguous range of every topic it subscribes to (members sorted by id), so members
subscribed to the same co-partitioned topics get the same partition numbers.
"""

from __future__ import annotations

from collections.abc import Mapping

Assignment = dict[str, frozenset[int]]  # topic -> partitions
Target = dict[str, Assignment]  # member id -> its assignment

UNIFORM = "uniform"
RANGE = "range"
ASSIGNORS = (UNIFORM, RANGE)


def assign(
    assignor: str,
    subscriptions: Mapping[str, frozenset[str]],
    partitions: Mapping[str, int],
    previous: Mapping[str, Assignment] | None = None,
) -> Target:
    """``subscriptions``: member id -> subscribed topics that exist; ``partitions``: topic -> count."""
    if assignor == RANGE:
        return _range(subscriptions, partitions)
    return _uniform(subscriptions, partitions, previous or {})


def _range(subscriptions: Mapping[str, frozenset[str]], partitions: Mapping[str, int]) -> Target:
    owned: dict[str, dict[str, set[int]]] = {m: {} for m in subscriptions}
    for topic in sorted(partitions):
        members = sorted(m for m, topics in subscriptions.items() if topic in topics)
        if not members:
            continue
        count = partitions[topic]
        base, extra = divmod(count, len(members))
        start = 0
        for index, member in enumerate(members):
            size = base + (1 if index < extra else 0)
            if size:
                owned[member][topic] = set(range(start, start + size))
            start += size
    return _frozen(owned)


def _uniform(
    subscriptions: Mapping[str, frozenset[str]], partitions: Mapping[str, int], previous: Mapping[str, Assignment]
) -> Target:
    members = sorted(subscriptions)
    owned: dict[str, dict[str, set[int]]] = {m: {} for m in members}
    counts = dict.fromkeys(members, 0)
    # Fair share if every member could take every partition; heterogeneous subscriptions are
    # balanced by the moves below.
    total = sum(count for topic, count in partitions.items() if any(topic in s for s in subscriptions.values()))
    quota = -(-total // len(members)) if members else 0
    taken: set[tuple[str, int]] = set()
    for member in members:  # stickiness: keep what the previous target gave, up to the quota
        for topic, parts in sorted(previous.get(member, {}).items()):
            if topic not in subscriptions[member] or topic not in partitions:
                continue
            for p in sorted(parts):
                if p < partitions[topic] and (topic, p) not in taken and counts[member] < quota:
                    owned[member].setdefault(topic, set()).add(p)
                    counts[member] += 1
                    taken.add((topic, p))
    for topic in sorted(partitions):
        eligible = [m for m in members if topic in subscriptions[m]]
        if not eligible:
            continue
        for p in range(partitions[topic]):
            if (topic, p) in taken:
                continue
            member = min(eligible, key=lambda m: (counts[m], m))
            owned[member].setdefault(topic, set()).add(p)
            counts[member] += 1
            taken.add((topic, p))
    _balance(owned, counts, subscriptions)
    return _frozen(owned)


def _balance(owned: dict[str, dict[str, set[int]]], counts: dict[str, int],
             subscriptions: Mapping[str, frozenset[str]]) -> None:
    """Move single partitions from the most to a less loaded eligible member while that helps."""
    for _ in range(sum(counts.values()) + 1):
        moved = False
        for giver in sorted(counts, key=lambda m: (-counts[m], m)):
            for topic in sorted(owned[giver]):
                takers = [m for m in counts if topic in subscriptions[m] and counts[m] + 1 < counts[giver]]
                if not takers or not owned[giver][topic]:
                    continue
                taker = min(takers, key=lambda m: (counts[m], m))
                p = max(owned[giver][topic])
                owned[giver][topic].discard(p)
                if not owned[giver][topic]:
                    del owned[giver][topic]
                owned[taker].setdefault(topic, set()).add(p)
                counts[giver] -= 1
                counts[taker] += 1
                moved = True
                break
            if moved:
                break
        if not moved:
            return


def _frozen(owned: dict[str, dict[str, set[int]]]) -> Target:
    return {m: {t: frozenset(ps) for t, ps in topics.items() if ps} for m, topics in owned.items()}
