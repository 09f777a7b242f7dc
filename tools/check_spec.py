"""Compare every message declaration in rivven_kproto.codec with Kafka's JSON message schemas.

Usage: ``python tools/check_spec.py [--spec-dir DIR]`` (default ``../shared/kafka-protocol/messages``
next to the repository, or ``$KPROTO_SPEC_DIR``). Without that directory (a plain clone) it skips
with a notice and exits 0, unless ``RIVVEN_REQUIRE_SPEC=1`` (CI) makes it exit 2. Exits 1 listing every difference: API key,
version ranges, flexible versions, and per field its name, type, versions, nullable versions, tag,
tagged versions, ignorable flag, field-level flexible versions and default. Versions are compared
only inside the range we declare, since we deliberately serve a subset of each API's versions.
A declaration whose versions the 3.9 schema does not all cover (KIP-848's ConsumerGroupHeartbeat
v1, ...) is compared with the Kafka 4.x schema of the ``messages-4x`` directory beside it: the
versions the 3.9 schema has against it, the newer ones against the 4.x schema (Produce v0-2, gone
from the 4.x schema but still served, and v12, new in 4.0). The ``ignorable`` flag is compared only
for fields absent from some compared version (it says what encoding does where the field is
missing, so it changes nothing on the wire elsewhere; Kafka 4.x marks Produce's topic ``Name``
ignorable because v13 drops it).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from rivven_kproto.codec import headers
from rivven_kproto.codec.messages import ALL_MESSAGES
from rivven_kproto.codec.schema import Message, Versions
from rivven_kproto.codec.schema.fields import ArrayType, FieldSpec, StructType

DEFAULT_SPEC_DIR = Path(__file__).resolve().parents[2] / "shared" / "kafka-protocol" / "messages"
REQUIRE_ENV = "RIVVEN_REQUIRE_SPEC"  # set by CI (.ci/run), which has the schemas: absent ones fail there
_INT_TYPES = {"int8", "int16", "int32", "int64", "uint16", "uint32"}


def load_spec(path: Path) -> dict[str, Any]:
    """Kafka's schema files are JSON with ``//`` comment lines."""
    lines = [line for line in path.read_text().splitlines() if not line.lstrip().startswith("//")]
    return json.loads("\n".join(lines))  # type: ignore[no-any-return]


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def within(versions: Versions, scope: Versions) -> set[int]:
    return {v for v in scope if v in versions}


def expected_default(field: dict[str, Any]) -> Any:
    ftype = field["type"]
    raw = field.get("default")
    if ftype.startswith("[]") or ftype[:1].isupper():
        return NotImplemented  # arrays and structs: always their empty form
    if raw is not None:
        raw = str(raw).lower() if isinstance(raw, bool) else str(raw)
    if raw is None:
        return {"bool": False, "string": "", "bytes": b"", "records": None, "float64": 0.0}.get(
            ftype, "ZERO_UUID" if ftype == "uuid" else 0
        )
    if raw == "null":
        return None
    if ftype in _INT_TYPES:
        return int(raw, 0)
    if ftype == "bool":
        return raw == "true"
    if ftype == "float64":
        return float(raw)
    return raw


class Checker:
    def __init__(self) -> None:
        self.problems: list[str] = []

    def problem(self, where: str, text: str) -> None:
        self.problems.append(f"{where}: {text}")

    def check_message(self, cls: type[Message], spec: dict[str, Any], scope: Versions | None = None) -> None:
        where = cls.__name__
        scope = cls.VALID_VERSIONS if scope is None else scope
        spec_valid = Versions.parse(spec["validVersions"])
        if getattr(cls, "API_KEY", -1) != spec.get("apiKey", -1):
            self.problem(where, f"api key {cls.API_KEY} != spec {spec.get('apiKey')}")
        if not within(scope, scope) <= within(spec_valid, scope):
            self.problem(where, f"declares versions {scope} outside spec {spec_valid}")
        flexible = Versions.parse(spec["flexibleVersions"])
        if within(cls.FLEXIBLE_VERSIONS, scope) != within(flexible, scope):
            self.problem(where, f"flexible {cls.FLEXIBLE_VERSIONS} != spec {flexible}")
        common = {s["name"]: s for s in spec.get("commonStructs", [])}
        self.check_fields(where, cls.kafka_fields(), spec["fields"], scope, common)

    def check_fields(
        self,
        where: str,
        ours: list[FieldSpec],
        theirs: list[dict[str, Any]],
        scope: Versions,
        common: dict[str, Any],
    ) -> None:
        theirs = [f for f in theirs if within(Versions.parse(f["versions"]), scope)]
        ours = [f for f in ours if within(f.versions, scope)]
        our_names = [f.name for f in ours]
        their_names = [snake(f["name"]) for f in theirs]
        if our_names != their_names:
            self.problem(where, f"fields {our_names} != spec {their_names}")
            return
        for mine, spec in zip(ours, theirs, strict=True):
            self.check_field(f"{where}.{mine.name}", mine, spec, scope, common)

    def check_field(
        self, where: str, mine: FieldSpec, spec: dict[str, Any], scope: Versions, common: dict[str, Any]
    ) -> None:
        versions = Versions.parse(spec["versions"])
        present = within(versions, scope)
        if within(mine.versions, scope) != present:
            self.problem(where, f"versions {mine.versions} != spec {versions}")
        nullable = Versions.parse(spec.get("nullableVersions", "none"))
        if within(mine.nullable, scope) & present != within(nullable, scope) & present:
            self.problem(where, f"nullable {mine.nullable} != spec {nullable}")
        if mine.tag != spec.get("tag"):
            self.problem(where, f"tag {mine.tag} != spec {spec.get('tag')}")
        tagged = Versions.parse(spec.get("taggedVersions", "none"))
        if within(mine.tagged, scope) != within(tagged, scope):
            self.problem(where, f"tagged versions {mine.tagged} != spec {tagged}")
        if present != set(scope) and mine.ignorable != bool(spec.get("ignorable", False)):
            self.problem(where, f"ignorable {mine.ignorable} != spec {spec.get('ignorable', False)}")
        field_flexible = spec.get("flexibleVersions")
        ours_flexible = str(mine.flexible) if mine.flexible is not None else None
        if ours_flexible != field_flexible:
            self.problem(where, f"field flexibleVersions {ours_flexible} != spec {field_flexible}")
        self.check_type(where, mine, spec, scope, common)

    def check_type(
        self, where: str, mine: FieldSpec, spec: dict[str, Any], scope: Versions, common: dict[str, Any]
    ) -> None:
        spec_type: str = spec["type"]
        ktype = mine.type
        if ktype.spec_name != spec_type:
            self.problem(where, f"type {ktype.spec_name} != spec {spec_type}")
            return
        struct_type = ktype.element if isinstance(ktype, ArrayType) else ktype
        if isinstance(struct_type, StructType):
            name = spec_type.removeprefix("[]")
            sub_fields = spec.get("fields") or common.get(name, {}).get("fields")
            if sub_fields is None:
                self.problem(where, f"spec has no fields for struct {name}")
                return
            self.check_fields(where, struct_type.cls.kafka_fields(), sub_fields, scope, common)
            return
        expected = expected_default(spec)
        if expected is NotImplemented:
            return
        actual = mine.default_value()
        if expected == "ZERO_UUID":
            expected = actual if getattr(actual, "int", 1) == 0 else "zero uuid"
        if actual != expected or type(actual) is not type(expected):
            self.problem(where, f"default {actual!r} != spec {expected!r}")


def spec_paths(spec_dir: Path, cls: type[Message]) -> list[tuple[Path, Versions]]:
    """Which schema each declared version is compared with: the 3.9 one for the versions it has
    (all of them when there is no 4.x file), the 4.x one for the rest."""
    name = f"{cls.kafka_name()}.json"
    newer = spec_dir.parent / f"{spec_dir.name}-4x" / name
    path = spec_dir / name
    declared = cls.VALID_VERSIONS
    if not path.exists():
        return [(newer, declared)] if newer.exists() else []
    valid = Versions.parse(load_spec(path)["validVersions"])
    if not newer.exists() or within(declared, declared) <= within(valid, declared):
        return [(path, declared)]
    if valid.high < declared.low or valid.low > declared.low:
        return [(newer, declared)]
    old = Versions(declared.low, min(valid.high, declared.high))
    return [(path, old), (newer, Versions(old.high + 1, declared.high))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec-dir", type=Path, default=Path(os.environ.get("KPROTO_SPEC_DIR", DEFAULT_SPEC_DIR)))
    args = parser.parse_args(argv)
    if not args.spec_dir.is_dir():
        if os.environ.get(REQUIRE_ENV, "") in ("", "0"):
            print(
                f"spec check skipped: Kafka's JSON schemas are not at {args.spec_dir} (a plain clone has"
                f" no ../shared/kafka-protocol; pass --spec-dir or KPROTO_SPEC_DIR to run it;"
                f" CI sets {REQUIRE_ENV}=1 and fails here instead)",
                file=sys.stderr,
            )
            return 0
        print(f"spec directory not found: {args.spec_dir} ({REQUIRE_ENV} is set)", file=sys.stderr)
        return 2
    checker = Checker()
    classes: list[type[Message]] = [*ALL_MESSAGES, headers.RequestHeader, headers.ResponseHeader]
    for cls in classes:
        paths = spec_paths(args.spec_dir, cls)
        if not paths:
            checker.problem(cls.__name__, f"no spec file {cls.kafka_name()}.json")
        for path, scope in paths:
            checker.check_message(cls, load_spec(path), scope)
    for line in checker.problems:
        print(line)
    print(f"checked {len(classes)} declarations against {args.spec_dir}: {len(checker.problems)} differences")
    return 1 if checker.problems else 0


if __name__ == "__main__":
    sys.exit(main())
