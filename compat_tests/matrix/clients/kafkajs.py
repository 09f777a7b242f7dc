"""kafkajs (Node), driven through ``compat_tests/node/matrix.js``: one ``node`` run per step.

kafkajs has no assign-only consumer: every read joins a consumer group (a fresh group id per read,
``fromBeginning``), so without consumer groups no kafkajs row that reads can pass.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

from rivven_kproto.broker.topics import ConfigSource

from ..data import Profile, Rec
from ..model import Client, ClientError, Ctx

NODE_DIR = Path(__file__).resolve().parents[2] / "node"
SCRIPT = NODE_DIR / "matrix.js"
_ACKS = {"0": 0, "1": 1, "all": -1}


def _records(data: list[dict[str, Any]]) -> list[Rec]:
    return [Rec.from_json(r) for r in data]


class Adapter:
    # kafkajs takes headers as an object (one entry per name, repeated values as an array) and
    # cannot encode a null header value (Buffer.from(null) throws).
    profile = Profile(interleaved_header_names=False, null_header_values=False)

    def _node(self, ctx: Ctx, mode: str, **request: Any) -> dict[str, Any]:
        executable = shutil.which("node")
        if not executable:
            raise RuntimeError("node is not on PATH")
        if not (NODE_DIR / "node_modules" / "kafkajs" / "package.json").exists():
            raise RuntimeError("kafkajs is not installed: npm install --prefix compat_tests/node")
        budget = ctx.remaining(margin=2.0)
        request = {
            "mode": mode,
            "bootstrap": ctx.bootstrap,
            "security": ctx.security,
            "timeoutMs": int(budget * 1000),
            "waitMs": int(ctx.wait() * 1000),
            **request,
        }
        try:
            done = subprocess.run(
                [executable, str(SCRIPT)],
                input=json.dumps(request).encode(),
                cwd=NODE_DIR,
                capture_output=True,
                timeout=budget + 1,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise AssertionError(f"node {mode} timed out; stderr: {(exc.stderr or b'')[-300:]!r}") from exc
        lines = done.stdout.decode(errors="replace").strip().splitlines()
        answer = json.loads(lines[-1]) if lines else {}
        if done.returncode or "error" in answer:
            stderr = done.stderr.decode(errors="replace").strip().splitlines()
            raise ClientError(
                answer.get("error") or f"node exited {done.returncode}: {' | '.join(stderr[-3:])}"
            )
        return answer

    def api_versions(self, ctx: Ctx) -> dict[int, tuple[int, int]]:
        return {key: (low, high) for key, low, high in self._node(ctx, "apiversions")["versions"]}

    def metadata(self, ctx: Ctx, topic: str) -> dict:
        answer = self._node(ctx, "metadata", topic=topic)
        [described] = answer["metadata"]["topics"]
        return {
            "brokers": {b["nodeId"]: f"{b['host']}:{b['port']}" for b in answer["cluster"]["brokers"]},
            "partitions": {p["partitionId"]: p["leader"] for p in described["partitions"]},
        }

    def produce(
        self, ctx: Ctx, topic: str, records: list[Rec], *, codec: str, acks: str, idempotent: bool
    ) -> None:
        self._node(
            ctx,
            "produce",
            topic=topic,
            codec=codec,
            acks=_ACKS[acks],
            idempotent=idempotent,
            records=[r.as_json() for r in records],
        )

    def read(
        self,
        ctx: Ctx,
        topic: str,
        partitions: list[int],
        count: int,
        *,
        read_committed: bool = False,
        settle_s: float = 0.0,
    ) -> list[Rec]:
        answer = self._node(
            ctx,
            "read",
            topic=topic,
            partitions=partitions,
            count=count,
            readCommitted=read_committed,
            settleMs=int(settle_s * 1000),
            groupId=ctx.name(f"read-{uuid.uuid4().hex[:6]}"),
        )
        return sorted(_records(answer["records"]), key=lambda r: (r.partition, r.offset or 0))

    def txn_produce(
        self, ctx: Ctx, topic: str, txn_id: str, transactions: list[tuple[list[Rec], str]]
    ) -> None:
        self._node(
            ctx,
            "txn",
            topic=topic,
            transactionalId=txn_id,
            transactions=[
                {"records": [r.as_json() for r in records], "end": end} for records, end in transactions
            ],
        )

    def fence(self, ctx: Ctx, topic: str, txn_id: str) -> str:
        try:
            return self._node(ctx, "fence", topic=topic, transactionalId=txn_id)["error"]
        except ClientError as exc:  # the zombie's error comes back as the answer's "error"
            if "the fenced producer committed" in str(exc):
                raise AssertionError(str(exc)) from exc
            return str(exc)

    def group_rebalance(self, ctx: Ctx, topic: str, group: str, phase1: list[Rec], phase2: list[Rec]) -> dict:
        answer = self._node(
            ctx,
            "rebalance",
            topic=topic,
            groupId=group,
            waitMs=int(ctx.remaining(5.0) * 1000),
            phase1=[r.as_json() for r in phase1],
            phase2=[r.as_json() for r in phase2],
        )
        return {
            **answer,
            "a_records": _records(answer["a_records"]),
            "b_records": _records(answer["b_records"]),
        }

    def commit_fetch(self, ctx: Ctx, topic: str, group: str) -> dict:
        answer = self._node(ctx, "commit", topic=topic, groupId=group)
        committed = {p: int(o) for p, o, _meta in answer["committed"]}
        metadata = {p: meta for p, _o, meta in answer["committed"]}
        return {
            "consumed": _records(answer["consumed"]),
            "committed": committed.get(0),
            "metadata": metadata.get(0),
            "resumed": _records(answer["resumed"]),
            "how": "group member commitOffsets, admin.fetchOffsets",
        }

    def send_offsets(self, ctx: Ctx, in_topic: str, out_topic: str, group: str, txn_id: str) -> str:
        self._node(
            ctx, "send-offsets", inTopic=in_topic, outTopic=out_topic, groupId=group, transactionalId=txn_id
        )
        return "group member consumed; kafkajs sends the group id only"

    def committed(self, ctx: Ctx, group: str, topic: str, partitions: list[int]) -> dict[int, int | None]:
        answer = self._node(ctx, "committed", topic=topic, groupId=group)
        offsets = {p: int(o) for p, o, _meta in answer["offsets"]}
        return {p: (offsets[p] if offsets.get(p, -1) >= 0 else None) for p in partitions}

    def admin_topics(self, ctx: Ctx, name: str) -> dict:
        return self._node(ctx, "admin-topics", name=name)

    def admin_configs(self, ctx: Ctx, topic: str) -> dict:
        return self._node(ctx, "admin-configs", topic=topic)

    def broker_ids(self, ctx: Ctx) -> list[int]:
        return [int(node) for node in self._node(ctx, "broker-ids")["brokers"]]

    def assign_replicas(self, ctx: Ctx, name: str, created: list[list[int]], added: list[list[int]]
                        ) -> list[tuple[int, list[int]]]:
        answer = self._node(ctx, "assign-replicas", name=name, created=created, added=added)
        return [(int(leader), [int(n) for n in replicas]) for leader, replicas in answer["described"]]

    def config_sources(self, ctx: Ctx, topic: str) -> dict[str, tuple[str, str]]:
        """kafkajs reports each entry's source as DescribeConfigs' number (v1+)."""
        answer = self._node(ctx, "config-sources", topic=topic)
        return {name: (value, ConfigSource(int(source)).name) for name, value, source in answer["sources"]}

    def offsets_for_times(
        self, ctx: Ctx, topic: str, partition: int, timestamps: list[int]
    ) -> dict[int, int | None]:
        """kafkajs answers "no record at or after this time" with the high watermark (where Kafka's
        ListOffsets says -1); an offset equal to the high watermark holds no record, so it maps back to None."""
        answer = self._node(ctx, "offsets-by-time", topic=topic, partition=partition, timestamps=timestamps)
        high = int(answer["high"])
        return {int(ts): (None if int(offset) == high else int(offset)) for ts, offset in answer["offsets"]}


def version() -> dict[str, str]:
    package = json.loads((NODE_DIR / "node_modules" / "kafkajs" / "package.json").read_text())
    node = (
        subprocess.run(["node", "--version"], capture_output=True, timeout=10, check=False)
        .stdout.decode()
        .strip()
    )
    return {"version": package["version"], "node": node}


_CORE_CODECS = "kafkajs core ships GZIP only; {} needs a codec package (not installed)"

_NO_KIP848 = "kafkajs implements only the classic group protocol (JoinGroup/SyncGroup), not group.protocol=consumer (KIP-848)"
_NO_UPGRADE = (
    "kafkajs speaks only the classic group protocol, so none of its members can join with group.protocol=consumer "
    "and upgrade the group (KIP-848); the row's classic side is covered by confluent-kafka's classic member"
)


CLIENT = Client(
    name="kafkajs",
    adapter=Adapter(),
    version=version,
    not_offered={
        "codec-snappy": _CORE_CODECS.format("Snappy (kafkajs-snappy)"),
        "codec-lz4": _CORE_CODECS.format("LZ4 (kafkajs-lz4)"),
        "codec-zstd": _CORE_CODECS.format("ZSTD (@kafkajs/zstd)"),
        **dict.fromkeys(("group-rebalance-kip848", "send-offsets-txn-kip848"), _NO_KIP848),
        "group-upgrade-kip848": _NO_UPGRADE,
        "list-describe-txn": "kafkajs' admin client has no ListTransactions/DescribeTransactions",
        "list-config-resources": "kafkajs' admin client has no ListConfigResources",
        "share-group": "kafkajs has no share consumer (KIP-932)",
    },
)
