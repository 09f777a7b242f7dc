"""Field declarations: the per-field facts Kafka's JSON schemas carry, attached to dataclass fields.

A message is declared once as a dataclass whose fields are created by :func:`kf`::

    acks: int = kf(INT16)
    transactional_id: str | None = kf(STRING, "3+", nullable="3+", default=None)

The layer in :mod:`.struct` reads this metadata to build one construct structure per version.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from construct import Construct

from . import primitives as p
from .versions import NONE, Versions

if TYPE_CHECKING:
    from .struct import Struct

ZERO_UUID = uuid.UUID(int=0)


class KafkaType:
    """A field type as the spec names it (``int32``, ``string``, ``[]Topic``, ``Topic``)."""

    spec_name: str

    def construct(self, version: int, flexible: bool, nullable: bool) -> Construct:
        raise NotImplementedError

    def implicit_default(self) -> Any:
        """Kafka's default when the schema gives none (a value or a zero-arg factory)."""
        raise NotImplementedError

    def may_encode_empty(self, version: int, flexible: bool) -> bool:
        return False


class FixedType(KafkaType):
    def __init__(self, spec_name: str, con: Construct, default: Any) -> None:
        self.spec_name = spec_name
        self.con = con
        self.default = default

    def construct(self, version: int, flexible: bool, nullable: bool) -> Construct:
        return self.con

    def implicit_default(self) -> Any:
        return self.default


class StringType(KafkaType):
    spec_name = "string"

    def construct(self, version: int, flexible: bool, nullable: bool) -> Construct:
        return p.StringCon(flexible, nullable)

    def implicit_default(self) -> Any:
        return ""


class BytesType(KafkaType):
    def __init__(self, spec_name: str, default: bytes | None) -> None:
        self.spec_name = spec_name
        self.default = default

    def construct(self, version: int, flexible: bool, nullable: bool) -> Construct:
        return p.BytesCon(flexible, nullable)

    def implicit_default(self) -> Any:
        return self.default


class StructType(KafkaType):
    """A nested struct field (not an array): its construct depends on version and flexibility."""

    def __init__(self, cls: type[Struct]) -> None:
        self.cls = cls
        self.spec_name = cls.kafka_name()

    def construct(self, version: int, flexible: bool, nullable: bool) -> Construct:
        struct = self.cls.construct_for(version, flexible)
        return p.NullableStructCon(struct) if nullable else struct

    def implicit_default(self) -> Any:
        return self.cls

    def may_encode_empty(self, version: int, flexible: bool) -> bool:
        return self.cls.may_encode_empty(version, flexible)


class ArrayType(KafkaType):
    def __init__(self, element: KafkaType) -> None:
        self.element = element
        self.spec_name = "[]" + element.spec_name

    def construct(self, version: int, flexible: bool, nullable: bool) -> Construct:
        element_con = self.element.construct(version, flexible, False)
        return p.ArrayCon(element_con, flexible, nullable, self.element.may_encode_empty(version, flexible))

    def implicit_default(self) -> Any:
        return list


INT8 = FixedType("int8", p.Int8sb, 0)
INT16 = FixedType("int16", p.Int16sb, 0)
INT32 = FixedType("int32", p.Int32sb, 0)
INT64 = FixedType("int64", p.Int64sb, 0)
UINT16 = FixedType("uint16", p.Int16ub, 0)
UINT32 = FixedType("uint32", p.Int32ub, 0)
FLOAT64 = FixedType("float64", p.Float64b, 0.0)
BOOL = FixedType("bool", p.Flag, False)
UUID = FixedType("uuid", p.UuidCon(), ZERO_UUID)
STRING = StringType()
BYTES = BytesType("bytes", b"")
RECORDS = BytesType("records", None)


def as_type(value: KafkaType | type[Struct]) -> KafkaType:
    if isinstance(value, KafkaType):
        return value
    return StructType(value)


def Array(element: KafkaType | type[Struct]) -> ArrayType:  # noqa: N802 - reads like a type
    return ArrayType(as_type(element))


@dataclass(frozen=True)
class FieldSpec:
    """What the spec says about one field; ``name`` is filled in when the struct is declared."""

    type: KafkaType
    versions: Versions
    nullable: Versions
    tag: int | None
    tagged: Versions
    ignorable: bool
    flexible: Versions | None
    default: Any
    name: str = ""

    def present_in(self, version: int) -> bool:
        return version in self.versions

    def is_tagged_in(self, version: int) -> bool:
        return self.tag is not None and version in self.tagged

    def default_value(self) -> Any:
        default = self.default
        return default() if callable(default) else default


_IMPLICIT: Any = object()


def kf(
    kafka_type: KafkaType | type[Struct],
    versions: str = "0+",
    *,
    nullable: str = "none",
    default: Any = _IMPLICIT,
    tag: int | None = None,
    tagged: str = "none",
    ignorable: bool = False,
    flexible: str | None = None,
) -> Any:
    """Declare a Kafka field (see the module docstring); returns a ``dataclasses.field``."""
    ktype = as_type(kafka_type)
    value = ktype.implicit_default() if default is _IMPLICIT else default
    spec = FieldSpec(
        type=ktype,
        versions=Versions.parse(versions),
        nullable=Versions.parse(nullable),
        tag=tag,
        tagged=Versions.parse(tagged) if tag is not None else NONE,
        ignorable=ignorable,
        flexible=Versions.parse(flexible) if flexible is not None else None,
        default=value,
    )
    metadata = {"kafka": spec}
    if callable(value):
        factory: Callable[[], Any] = value
        return dataclasses.field(default_factory=factory, metadata=metadata)
    return dataclasses.field(default=value, metadata=metadata)
