"""``--peer acl``: our broker again, with an authorizer and 1,000 ACLs loaded (issue #37's done-when).

The same command as the plain run, with ``authorizer.class.name`` set: the workloads' clients
connect to the same PLAINTEXT listener, so they are ``User:ANONYMOUS``, which is no super user;
every Produce, Fetch, transactional and group request they send is decided from the ACLs. Before
the clock starts the ACLs are created through a SASL_PLAINTEXT listener as the super user
``admin``, with confluent-kafka's AdminClient (the path users take). Of the 1,000, the bench
principal's ALLOWs that the workloads need are prefixed (``bench-`` topics, groups and
transactional ids); the rest are other principals' and ``User:*``'s, literal and prefixed, and
the bench principal's own on other topics (DENYs among them), so that a decision has neighbours
to skip in every index it looks at.
"""

from __future__ import annotations

import re
import time

from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from .brokers import OURS_READY, Running, Target, ours
from .report import ACL_PEER

NAME = ACL_PEER
ACL_COUNT = 1_000
ADMIN, ADMIN_PASSWORD = "admin", "admin-secret"
BENCH_PRINCIPAL = "User:ANONYMOUS"  # the workloads' clients, on the PLAINTEXT listener
PREFIX = "bench-"
SASL_READY = re.compile(rb"listener SASL_PLAINTEXT \(SASL_PLAINTEXT\) listening on [\d.]+:(\d+)")
TIMEOUT_S = 60

LITERAL, PREFIXED = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


def properties() -> str:
    jaas = f'org.apache.kafka.common.security.plain.PlainLoginModule required user_{ADMIN}="{ADMIN_PASSWORD}";'
    return (
        "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0\n"
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
        f"super.users=User:{ADMIN}\n"
        f"sasl.enabled.mechanisms=PLAIN\nsasl.jaas.config={jaas}\n"
    )


def target() -> Target:
    plain = ours()
    return Target(NAME, plain.command, OURS_READY, config_text=properties(), after_start=load,
                  shares=True)


def _acl(principal: str, kind: ResourceType, name: str, operation: AclOperation,
         pattern: ResourcePatternType = LITERAL, permission: AclPermissionType = ALLOW) -> AclBinding:
    return AclBinding(kind, name, pattern, principal, "*", operation, permission)


def bindings(count: int = ACL_COUNT) -> list[AclBinding]:
    """The bench principal's prefixed ALLOWs (what the workloads need), then fillers up to ``count``."""
    topic, group, txn = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID
    needed = [
        *(_acl(BENCH_PRINCIPAL, topic, PREFIX, op, PREFIXED)
          for op in (AclOperation.WRITE, AclOperation.READ, AclOperation.DESCRIBE, AclOperation.CREATE)),
        *(_acl(BENCH_PRINCIPAL, group, PREFIX, op, PREFIXED) for op in (AclOperation.READ, AclOperation.DESCRIBE)),
        *(_acl(BENCH_PRINCIPAL, txn, PREFIX, op, PREFIXED) for op in (AclOperation.WRITE, AclOperation.DESCRIBE)),
    ]
    fillers: list[AclBinding] = []
    i = 0
    while len(needed) + len(fillers) < count:
        kind = i % 10
        if kind < 3:  # other applications' topics, literal
            fillers.append(_acl(f"User:app-{i % 97}", topic, f"app-{i}-events", AclOperation.WRITE))
        elif kind < 5:  # their prefixes
            fillers.append(_acl(f"User:app-{i % 97}", topic, f"app-{i}-", AclOperation.READ, PREFIXED))
        elif kind == 5:  # the bench principal's own, on topics it does not use: literal, and prefixes under "bench-"
            fillers.append(_acl(BENCH_PRINCIPAL, topic, f"{PREFIX}archive-{i}", AclOperation.READ))
        elif kind == 6:
            fillers.append(_acl(BENCH_PRINCIPAL, topic, f"{PREFIX}secret-{i}-", AclOperation.ALL, PREFIXED, DENY))
        elif kind == 7:  # everyone's: looked up for every principal
            fillers.append(_acl("User:*", topic, f"public-{i}", AclOperation.DESCRIBE))
        elif kind == 8:
            fillers.append(_acl("User:*", topic, f"shared-{i}-", AclOperation.READ, PREFIXED))
        else:  # groups and transactional ids of others
            fillers.append(_acl(f"User:app-{i % 97}", group if i % 20 == 9 else txn, f"app-{i}", AclOperation.ALL))
        i += 1
    return needed + fillers


def sasl_config(running: Running) -> dict[str, str | int | float | bool]:
    """AdminClient settings for the super user, through the broker's SASL_PLAINTEXT listener."""
    deadline = time.monotonic() + TIMEOUT_S
    while (found := SASL_READY.search(running.log_path.read_bytes())) is None:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{running.target.name} did not open its SASL_PLAINTEXT listener")
        time.sleep(0.05)
    return {"bootstrap.servers": f"127.0.0.1:{int(found.group(1))}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": ADMIN, "sasl.password": ADMIN_PASSWORD}


def load(running: Running) -> dict[str, int]:
    """Create the ACLs (in a few requests) and check that the broker holds all of them."""
    admin = AdminClient(sasl_config(running))
    wanted = bindings()
    for start in range(0, len(wanted), 250):
        for future in admin.create_acls(wanted[start:start + 250]).values():
            future.result(TIMEOUT_S)
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,  # type: ignore[arg-type]
                                  AclOperation.ANY, AclPermissionType.ANY)
    held = len(admin.describe_acls(everything).result(TIMEOUT_S))
    if held != len(wanted):
        raise RuntimeError(f"{running.target.name} holds {held} ACLs, not {len(wanted)}")
    return {"acls": held}

