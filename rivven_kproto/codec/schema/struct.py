"""Structs and messages: one dataclass declaration drives the construct structure of every version.

``@kafka_struct`` / ``@kafka_message`` turn a class whose fields come from :func:`.fields.kf` into a
keyword-only dataclass. For each (version, flexible) pair the layer builds — once, cached — a
:class:`StructCon`, a ``construct.Construct`` that parses straight into the dataclass and builds
from it. Tagged fields are read into their fields; unknown tags are kept in
``unknown_tagged_fields`` and written back on encode.
"""

from __future__ import annotations

import dataclasses
import io
import struct
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar, dataclass_transform

from construct import (
    Construct,
    ConstructError,
    Flag,
    Float64b,
    Int8sb,
    Int16sb,
    Int16ub,
    Int32sb,
    Int32ub,
    Int64sb,
    SizeofError,
    StreamError,
    ValidationError,
)

from .fields import FieldSpec
from .primitives import UVarInt, remaining
from .versions import Versions

S = TypeVar("S", bound="Struct")
M = TypeVar("M", bound="Message")
T = TypeVar("T")

_UVARINT = UVarInt(5)
# Fixed-size primitives and their struct codes: consecutive ones are read and written with one
# struct call (a run), which is what construct does for each of them one at a time.
_FIXED: dict[int, str] = {
    id(Int8sb): "b", id(Int16sb): "h", id(Int32sb): "i", id(Int64sb): "q", id(Int16ub): "H", id(Int32ub): "I",
    id(Float64b): "d", id(Flag): "?",
}

# One step of a struct's regular fields: (name, construct, None) for a single field, or
# (names, ((name, construct), ...), struct.Struct) for a run of two or more fixed-size ones.
Step = tuple[Any, Any, "struct.Struct | None"]


def _steps(regular: list[tuple[str, Construct]]) -> list[Step]:
    steps: list[Step] = []
    run: list[tuple[str, Construct]] = []

    def close_run() -> None:
        if len(run) >= 2:
            codes = "".join(_FIXED[id(con)] for _, con in run)
            steps.append((tuple(name for name, _ in run), tuple(run), struct.Struct(">" + codes)))
        else:
            steps.extend((name, con, None) for name, con in run)
        run.clear()

    for name, con in regular:
        if id(con) in _FIXED:
            run.append((name, con))
        else:
            close_run()
            steps.append((name, con, None))
    close_run()
    return steps


class DecodeError(ValueError):
    """Bytes that are not a valid encoding of the message at that version."""


class EncodeError(ValueError):
    """A value that cannot be encoded at the requested version (wrong type, field absent, ...)."""


class UnsupportedVersionError(ValueError):
    """A version outside the message's declared ``validVersions``."""


@dataclasses.dataclass(kw_only=True)
class Struct:
    """Base of every declared struct; holds tagged fields we do not know, to write them back."""

    unknown_tagged_fields: dict[int, bytes] = dataclasses.field(default_factory=dict, repr=False)

    _kafka_name: ClassVar[str | None] = None
    _cons: ClassVar[dict[tuple[int, bool], StructCon]]

    @classmethod
    def kafka_name(cls) -> str:
        return cls._kafka_name or cls.__name__

    @classmethod
    def kafka_fields(cls) -> list[FieldSpec]:
        """Declared Kafka fields in declaration order (the wire order)."""
        return [f.metadata["kafka"] for f in dataclasses.fields(cls) if "kafka" in f.metadata]

    @classmethod
    def construct_for(cls, version: int, flexible: bool) -> StructCon:
        key = (version, flexible)
        con = cls.__dict__.get("_cons", {}).get(key)
        if con is None:
            if "_cons" not in cls.__dict__:
                cls._cons = {}
            con = StructCon(cls, version, flexible)
            cls._cons[key] = con
        return con

    @classmethod
    def may_encode_empty(cls, version: int, flexible: bool) -> bool:
        """True when some instance encodes to zero bytes (bounds array counts differently)."""
        return not flexible and not any(
            f.present_in(version) and not f.is_tagged_in(version) for f in cls.kafka_fields()
        )


def _field_flexible(spec: FieldSpec, version: int, flexible: bool) -> bool:
    if spec.flexible is not None:
        return version in spec.flexible
    return flexible


class StructCon(Construct):  # type: ignore[misc]
    """construct structure of one struct at one version; parses into / builds from the dataclass."""

    def __init__(self, cls: type[Struct], version: int, flexible: bool) -> None:
        super().__init__()
        self.cls = cls
        self.version = version
        self.flexible = flexible
        self.name = cls.__name__
        regular: list[tuple[str, Construct]] = []
        tagged: dict[int, tuple[str, Construct, Any]] = {}
        absent: list[tuple[str, Any, bool]] = []
        for spec in cls.kafka_fields():
            if not spec.present_in(version):
                absent.append((spec.name, spec.default_value(), spec.ignorable))
                continue
            con = spec.type.construct(version, _field_flexible(spec, version, flexible), version in spec.nullable)
            if flexible and spec.is_tagged_in(version):
                assert spec.tag is not None
                tagged[spec.tag] = (spec.name, con, spec.default_value())
            else:
                regular.append((spec.name, con))
        self.steps = _steps(regular)  # the regular fields, fixed-size runs joined
        self.tagged = tagged
        self.absent = absent

    def _parse(self, stream: io.BytesIO, context: Any, path: str) -> Struct:
        values: dict[str, Any] = {}
        for name, con, run in self.steps:
            if run is None:
                values[name] = con._parse(stream, context, path)
                continue
            data = stream.read(run.size)
            if len(data) == run.size:
                values.update(zip(name, run.unpack(data), strict=True))
            else:  # short: field by field, for construct's own error at the field that is cut
                stream.seek(-len(data), io.SEEK_CUR)
                for field_name, field_con in con:
                    values[field_name] = field_con._parse(stream, context, path)
        if self.flexible:
            self._parse_tagged(stream, values, path)
        return self.cls(**values)

    def _parse_tagged(self, stream: io.BytesIO, values: dict[str, Any], path: str) -> None:
        count = _UVARINT._parse(stream, None, path)
        if count > remaining(stream):
            raise StreamError(f"{count} tagged fields cannot fit in the frame", path=path)
        unknown: dict[int, bytes] = {}
        for _ in range(count):
            tag = _UVARINT._parse(stream, None, path)
            size = _UVARINT._parse(stream, None, path)
            if size > remaining(stream):
                raise StreamError(f"tagged field {tag} of {size} bytes runs past the frame", path=path)
            payload = stream.read(size)
            known = self.tagged.get(tag)
            if known is None:
                unknown[tag] = payload
            else:
                values[known[0]] = known[1]._parse(io.BytesIO(payload), None, path)
        if unknown:
            values["unknown_tagged_fields"] = unknown

    def _build(self, obj: Struct, stream: io.BytesIO, context: Any, path: str) -> Struct:
        if not isinstance(obj, self.cls):
            raise ValidationError(f"expected {self.name}, got {type(obj).__name__}", path=path)
        for name, default, ignorable in self.absent:
            if not ignorable and getattr(obj, name) != default:
                raise ValidationError(
                    f"{self.name}.{name} is set but does not exist in version {self.version}", path=path
                )
        for name, con, run in self.steps:
            if run is None:
                con._build(getattr(obj, name), stream, context, path)
                continue
            try:
                data = run.pack(*[getattr(obj, field_name) for field_name in name])
            except (struct.error, TypeError):  # field by field, for construct's own error
                for field_name, field_con in con:
                    field_con._build(getattr(obj, field_name), stream, context, path)
                continue
            stream.write(data)
        if self.flexible:
            self._build_tagged(obj, stream, path)
        return obj

    def _build_tagged(self, obj: Struct, stream: io.BytesIO, path: str) -> None:
        fields: dict[int, bytes] = dict(obj.unknown_tagged_fields)
        for tag, (name, con, default) in self.tagged.items():
            value = getattr(obj, name)
            if value != default:
                buf = io.BytesIO()
                con._build(value, buf, None, path)
                fields[tag] = buf.getvalue()
        _UVARINT._build(len(fields), stream, None, path)
        for tag in sorted(fields):
            payload = fields[tag]
            _UVARINT._build(tag, stream, None, path)
            _UVARINT._build(len(payload), stream, None, path)
            stream.write(payload)

    def _sizeof(self, context: Any, path: str) -> int:
        raise SizeofError("structs have no fixed size", path=path)


def _finish_struct(cls: type[T], name: str | None) -> type[T]:
    data_cls: Any = dataclasses.dataclass(kw_only=True, eq=True)(cls)
    for f in dataclasses.fields(data_cls):
        spec = f.metadata.get("kafka")
        if spec is not None and not spec.name:
            object.__setattr__(spec, "name", f.name)
    if name is not None:
        data_cls._kafka_name = name
    return data_cls  # type: ignore[no-any-return]


@dataclass_transform(kw_only_default=True)
def kafka_struct(cls: type[T] | None = None, *, name: str | None = None) -> Any:
    """Declare a nested struct; ``name`` is the spec's struct name when it differs from the class."""
    if cls is None:
        return lambda c: _finish_struct(c, name)
    return _finish_struct(cls, name)


class Message(Struct):
    """A top-level request or response body."""

    API_KEY: ClassVar[int]
    VALID_VERSIONS: ClassVar[Versions]
    FLEXIBLE_VERSIONS: ClassVar[Versions]
    # A shared answer's body, encoded once (see :meth:`pin`): (version, bytes); None otherwise.
    _pinned: ClassVar[tuple[int, bytes] | None] = None

    @classmethod
    def is_flexible(cls, version: int) -> bool:
        return version in cls.FLEXIBLE_VERSIONS

    @classmethod
    def structure(cls, version: int) -> StructCon:
        """The cached construct structure for ``version``."""
        if version not in cls.VALID_VERSIONS:
            raise UnsupportedVersionError(f"{cls.__name__} has no version {version}")
        return cls.construct_for(version, version in cls.FLEXIBLE_VERSIONS)

    def encode(self, version: int) -> bytes:
        stream = io.BytesIO()
        self.encode_into(stream, version)
        return stream.getvalue()

    def pin(self: M, version: int) -> M:
        """Encode now, at ``version``: encoding at that version then writes these bytes.

        For answers that are the same for every request (ApiVersions): a handler keeps the object
        and returns it each time instead of building and encoding it again, so it must never be
        changed afterwards (``dataclasses.replace`` makes an unpinned copy).
        """
        vars(self)["_pinned"] = (version, self.encode(version))
        return self

    @property
    def pinned(self) -> bool:
        return self._pinned is not None

    def encode_into(self, stream: io.BytesIO, version: int) -> None:
        pinned = self._pinned
        if pinned is not None and pinned[0] == version:
            stream.write(pinned[1])
            return
        con = self.structure(version)
        try:
            con._build(self, stream, None, "")
        except ConstructError as exc:
            raise EncodeError(f"{type(self).__name__} v{version}: {exc}") from None

    @classmethod
    def decode(cls: type[M], data: bytes | bytearray | memoryview, version: int) -> M:
        """Decode a whole body; trailing bytes are an error."""
        stream = io.BytesIO(data)
        obj = cls.decode_from(stream, version)
        if stream.tell() != len(data):
            raise DecodeError(f"{cls.__name__} v{version}: {len(data) - stream.tell()} trailing bytes")
        return obj

    @classmethod
    def decode_from(cls: type[M], stream: io.BytesIO, version: int) -> M:
        con = cls.structure(version)
        try:
            return con._parse(stream, None, "")  # type: ignore[return-value]
        except (ConstructError, ValueError, TypeError, OverflowError) as exc:
            raise DecodeError(f"{cls.__name__} v{version}: {exc}") from None


class Request(Message):
    pass


class Response(Message):
    pass


class Header(Message):
    """Request and response headers: versioned like messages, but not registered as APIs."""


REQUESTS: dict[int, type[Request]] = {}
RESPONSES: dict[int, type[Response]] = {}


@dataclass_transform(kw_only_default=True)
def kafka_message(
    *, api_key: int, valid: str, flexible: str, name: str | None = None
) -> Callable[[type[T]], type[T]]:
    """Declare a top-level request or response with its API key and version ranges."""

    def wrap(cls: type[T]) -> type[T]:
        data_cls: Any = _finish_struct(cls, name)
        data_cls.API_KEY = api_key
        data_cls.VALID_VERSIONS = Versions.parse(valid)
        data_cls.FLEXIBLE_VERSIONS = Versions.parse(flexible)
        if issubclass(data_cls, Request | Response):
            registry: dict[int, Any] = REQUESTS if issubclass(data_cls, Request) else RESPONSES
            if api_key in registry and registry[api_key].__qualname__ != data_cls.__qualname__:
                raise TypeError(f"API key {api_key} declared twice: {registry[api_key]}, {data_cls}")
            registry[api_key] = data_cls
        return data_cls  # type: ignore[no-any-return]

    return wrap
