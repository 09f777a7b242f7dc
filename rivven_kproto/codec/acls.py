"""Kafka's ACL vocabulary as it travels in CreateAcls/DescribeAcls/DeleteAcls: codes and entries."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3



@dataclass(frozen=True)
class AclEntry:
    """One ACL, or a filter over ACLs (then a None name, principal or host matches any)."""

    resource_type: int
    resource_name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission: int


# ``authorized_operations`` when the client did not ask for it (Java's Integer.MIN_VALUE).
OPERATIONS_NOT_REQUESTED = -2147483648

# The operations Kafka supports on each resource type (AclOperation codes); the bit set a client
# gets has those it is allowed (all of them without an authorizer).
TOPIC_OPERATIONS = (Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DELETE, Operation.ALTER,
                    Operation.DESCRIBE, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS)
CLUSTER_OPERATIONS = (Operation.CREATE, Operation.ALTER, Operation.DESCRIBE, Operation.CLUSTER_ACTION,
                      Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS, Operation.IDEMPOTENT_WRITE)
GROUP_OPERATIONS = (Operation.READ, Operation.DELETE, Operation.DESCRIBE, Operation.DESCRIBE_CONFIGS,
                    Operation.ALTER_CONFIGS)
