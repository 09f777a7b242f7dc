"""How long other clients wait while one anonymous client asks Metadata for many topics, with
many ACLs loaded (issue #37 item 5; the bound: under 50 ms with 10,000 ACLs and 24,000 names).

    PYTHONPATH=$PWD python tools/acl_stall.py [--acls 10000] [--topics 24000]

Starts a broker (``authorizer.class.name`` set, ``allow.everyone.if.no.acl.found=false``) on a
fresh data directory whose ``meta/acls.json`` holds the ACLs: a mix an operator could have, over
1,000 users: LITERAL topics and groups, PREFIXED topics of assorted lengths, and ``*`` wildcards.
A probe connection sends ApiVersions every 10 ms; the hostile request is sent three times and the
probe's round trips during the run are reported, with the hostile request's own time.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import statistics
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from compat_tests.broker_process import BrokerProcess
from rivven_kproto.broker.security.acls import AclBinding, Operation, PatternType, Permission, ResourceType
from rivven_kproto.codec.connection import encode_request
from rivven_kproto.codec.headers import RequestHeader
from rivven_kproto.codec.messages.metadata import MetadataRequest, MetadataRequestTopic
from tools.hostile_latency import Probe, connect, read_frame

log = logging.getLogger(__name__)
ROUNDS = 3


def acls(count: int, seed: int = 37) -> list[AclBinding]:
    """``count`` ACLs over 1,000 users (a tenth of them DENY; some prefixes nested)."""
    rng = random.Random(seed)
    operations = [Operation.READ, Operation.WRITE, Operation.DESCRIBE, Operation.CREATE, Operation.ALL]
    result = []
    for i in range(count):
        user = f"User:user-{rng.randrange(1000)}"
        permission = Permission.DENY if rng.random() < 0.1 else Permission.ALLOW
        kind = rng.random()
        if kind < 0.5:
            binding = AclBinding(ResourceType.TOPIC, f"team-{rng.randrange(300)}-topic-{i}", PatternType.LITERAL,
                                 user, "*", rng.choice(operations), permission)
        elif kind < 0.8:
            prefix = f"team-{rng.randrange(300)}-" + "x" * rng.randrange(12)
            binding = AclBinding(ResourceType.TOPIC, prefix, PatternType.PREFIXED, user, "*", rng.choice(operations), permission)
        elif kind < 0.95:
            binding = AclBinding(ResourceType.GROUP, f"group-{i}", PatternType.LITERAL, user, "*", Operation.READ, permission)
        else:
            binding = AclBinding(ResourceType.TOPIC, "*", PatternType.LITERAL, user, f"10.0.{i % 256}.1",
                                 Operation.DESCRIBE, permission)
        result.append(binding)
    return result


def metadata_request(topics: int) -> bytes:
    names = [MetadataRequestTopic(name=f"team-{i % 300}-xxxx-{i}") for i in range(topics)]
    request = MetadataRequest(topics=names, allow_auto_topic_creation=False,
                              include_cluster_authorized_operations=False, include_topic_authorized_operations=False)
    header = RequestHeader(request_api_key=3, request_api_version=9, correlation_id=1, client_id="hostile")
    return encode_request(header, request)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--acls", type=int, default=10_000)
    parser.add_argument("--topics", type=int, default=24_000)
    parser.add_argument("--no-authorizer", action="store_true", help="the same request without an authorizer (the baseline)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    with tempfile.TemporaryDirectory(prefix="acl-stall-") as tmp:
        base = Path(tmp)
        (base / "data" / "meta").mkdir(parents=True)
        (base / "data" / "meta" / "acls.json").write_text(json.dumps([asdict(acl) for acl in acls(args.acls)]))
        config = base / "server.properties"
        config.write_text("" if args.no_authorizer else
                          "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
                          "super.users=User:admin\nallow.everyone.if.no.acl.found=false\n")
        broker = BrokerProcess(base / "data", base / "broker.log", ["--config", str(config)]).start()
        try:
            data = metadata_request(args.topics)
            probe = Probe(broker.bootstrap)
            probe.start()
            time.sleep(0.2)
            hostile = []
            for _ in range(ROUNDS):
                sock = connect(broker.bootstrap)
                started = time.perf_counter()
                sock.sendall(data)
                read_frame(sock)
                hostile.append(time.perf_counter() - started)
                sock.close()
            time.sleep(0.2)
            probe.running = False
            probe.join()
        finally:
            broker.stop()
    samples = sorted(s * 1000 for s in probe.samples)
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))]
    log.info("%s, Metadata naming %d topics (x%d): request %.0f ms median; probe p50 %.1f p99 %.1f max %.1f ms",
             "no authorizer" if args.no_authorizer else f"{args.acls} ACLs", args.topics, ROUNDS, statistics.median(hostile) * 1000, statistics.median(samples), p99,
             samples[-1])


if __name__ == "__main__":
    main()
