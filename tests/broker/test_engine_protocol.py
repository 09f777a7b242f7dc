"""A partition holds its storage engine through ``EngineLog`` and is never subclassed (#38): both
engines are ``EngineLog``s, every engine member the partition's rules use is in the protocol (so a
new engine is written against the protocol alone), and no class of ours inherits the rules."""

from __future__ import annotations

import ast
import inspect
import uuid
from pathlib import Path

import rivven_kproto
from rivven_kproto.broker.log import partition as partition_module
from rivven_kproto.broker.log.engine import EngineLog
from rivven_kproto.broker.log.native_engine import NativeEngineLog
from rivven_kproto.broker.log.partition import Partition
from rivven_kproto.broker.storage.postgres.partition import PgEngineLog
from rivven_kproto.broker.storage.postgres.partition import open_partition as open_pg_partition
from rivven_kproto.broker.storage.postgres.store import PostgresStorage

from .log_helpers import NOW, config, open_log

PACKAGE = Path(rivven_kproto.__file__).parent


def protocol_members() -> set[str]:
    return {name for name in [*vars(EngineLog), *EngineLog.__annotations__] if not name.startswith("_")}


def engine_members_used(source: str) -> set[str]:
    """Attributes read through ``self.engine`` or a local named ``engine`` in ``source``."""
    used = set()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute):
            continue
        owner = node.value
        if (isinstance(owner, ast.Name) and owner.id == "engine") or (
            isinstance(owner, ast.Attribute) and owner.attr == "engine"
            and isinstance(owner.value, ast.Name) and owner.value.id == "self"
        ):
            used.add(node.attr)
    return used


def test_the_partition_reaches_its_engine_only_through_the_protocol() -> None:
    used = engine_members_used(inspect.getsource(partition_module))
    assert {"write_batches", "read", "log_end_offset", "log_start_offset"} <= used  # the walk sees them
    assert used <= protocol_members()


def test_the_walk_sees_a_member_outside_the_protocol() -> None:
    assert engine_members_used("def f(self):\n    return self.engine.truncate_to(3)\n") == {"truncate_to"}
    assert not engine_members_used("def f(self):\n    return self.engine.truncate_to(3)\n") <= protocol_members()


def test_the_partition_is_one_concrete_class_and_engines_inherit_nothing_of_ours() -> None:
    assert not inspect.isabstract(Partition)
    assert [cls.__name__ for cls in Partition.__mro__] == ["Partition", "object"]
    assert Partition.__subclasses__() == []
    for engine in (NativeEngineLog, PgEngineLog):
        assert engine.__mro__ == (engine, object)


def subclasses_of_partition(source: str) -> list[str]:
    """Classes in ``source`` naming ``Partition`` (or the old ``PartitionLogBase``) as a base."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                name = base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else ""
                if name in ("Partition", "PartitionLogBase"):
                    found.append(node.name)
    return found


def test_no_class_in_the_package_subclasses_the_partition() -> None:
    found = {
        str(path.relative_to(PACKAGE)): names
        for path in sorted(PACKAGE.rglob("*.py"))
        if (names := subclasses_of_partition(path.read_text()))
    }
    assert found == {}


def test_the_source_check_finds_a_subclass() -> None:
    assert subclasses_of_partition("class PgLog(Partition):\n    pass\n") == ["PgLog"]
    assert subclasses_of_partition("class L(partition.Partition):\n    pass\n") == ["L"]


def test_the_native_log_is_an_engine_log(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    assert isinstance(log, Partition) and isinstance(log.engine, NativeEngineLog)
    assert isinstance(log.engine, EngineLog)
    log.close()


def test_the_postgresql_log_is_an_engine_log(postgres_url: str) -> None:
    storage = PostgresStorage(postgres_url)
    try:
        log = open_pg_partition(storage, uuid.uuid4(), "t", 0, config(), NOW, None, new=True)
        assert isinstance(log, Partition) and isinstance(log.engine, PgEngineLog)
        assert isinstance(log.engine, EngineLog)
        log.close()
    finally:
        storage.close()
