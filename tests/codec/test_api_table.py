"""The codec declares exactly the API version ranges of the project's table (the broker advertises them)."""

import rivven_kproto.codec.messages  # noqa: F401
from rivven_kproto.codec.schema import REQUESTS, RESPONSES

TABLE = {
    0: (0, 12), 1: (4, 12), 2: (1, 7), 3: (0, 12), 8: (2, 9), 9: (1, 9), 10: (0, 4), 11: (0, 7),
    12: (0, 4), 13: (0, 5), 14: (0, 5), 15: (0, 5), 16: (0, 5), 17: (0, 1), 18: (0, 4), 19: (2, 7),
    20: (1, 6), 21: (0, 2), 22: (0, 6), 24: (0, 5), 25: (0, 4), 26: (0, 5), 27: (0, 1), 28: (0, 5),
    29: (1, 3), 30: (1, 3), 31: (1, 3), 32: (1, 4), 33: (0, 2), 35: (0, 4), 36: (0, 2), 37: (0, 3), 42: (0, 2),
    44: (0, 1), 47: (0, 0), 50: (0, 0), 51: (0, 0), 60: (0, 1), 61: (0, 0), 65: (0, 0), 66: (0, 1),
    68: (0, 1), 69: (0, 1),  # ConsumerGroupHeartbeat, ConsumerGroupDescribe (KIP-848, issue #21)
    74: (0, 1),  # ListConfigResources (Kafka 4.1, issue #42)
    75: (0, 0),  # DescribeTopicPartitions (KIP-966, issue #21)
    76: (1, 1), 77: (1, 1), 78: (1, 2), 79: (1, 2),  # share groups (KIP-932, issue #39)
    90: (0, 1), 91: (0, 0), 92: (0, 0),  # share-group offsets (KIP-932)
    58: (0, 0),  # Envelope (KIP-590): between brokers only, never advertised
}


def test_requests_and_responses_cover_the_table() -> None:
    for registry in (REQUESTS, RESPONSES):
        ranges = {key: (cls.VALID_VERSIONS.low, cls.VALID_VERSIONS.high) for key, cls in registry.items()}
        assert ranges == TABLE
