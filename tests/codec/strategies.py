"""Hypothesis strategies derived from our own message declarations (test-only)."""

from __future__ import annotations

import dataclasses
import typing
import uuid
from typing import Any

from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from rivven_kproto.codec.schema import Struct
from rivven_kproto.codec.schema.fields import (
    ArrayType,
    BytesType,
    FieldSpec,
    FixedType,
    KafkaType,
    StringType,
    StructType,
)

_INTS = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
}
_ERROR_CODES = sorted(int(code) for code in ErrorCode)


# kio maps some integers to semantic Python types and rejects values outside their domain.
_KIO_DOMAINS = {
    "error_code": st.sampled_from(_ERROR_CODES),
    "datetime_i64": st.integers(0, 2**40),
    "timedelta_i32": st.integers(0, 2**31 - 1),
    "timedelta_i64": st.integers(0, 2**40),
}


def _kio_field_info(kio_cls: Any, name: str) -> tuple[str | None, Any]:
    """(kio's kafka_type for the field, kio's nested entity class) or (None, None)."""
    if kio_cls is None:
        return None, None
    for f in dataclasses.fields(kio_cls):
        if f.name in (name, name.removesuffix("_ms")):
            hint = typing.get_type_hints(kio_cls).get(f.name)
            nested = None
            for arg in (*typing.get_args(hint), hint):
                for inner in (*typing.get_args(arg), arg):
                    if dataclasses.is_dataclass(inner):
                        nested = inner
            return f.metadata.get("kafka_type"), nested
    return None, None


def _type_strategy(ktype: KafkaType, version: int, name: str, kio_cls: Any = None) -> st.SearchStrategy[Any]:
    kio_type, kio_nested = _kio_field_info(kio_cls, name)
    if isinstance(ktype, FixedType):
        if ktype.spec_name in _INTS:
            if kio_type in _KIO_DOMAINS:
                return _KIO_DOMAINS[kio_type]
            low, high = _INTS[ktype.spec_name]
            return st.integers(low, high)
        if ktype.spec_name == "bool":
            return st.booleans()
        if ktype.spec_name == "float64":
            return st.floats(allow_nan=False)
        if ktype.spec_name == "uuid":
            return st.builds(uuid.UUID, int=st.integers(0, 2**128 - 1))
    if isinstance(ktype, StringType):
        return st.text(max_size=8)
    if isinstance(ktype, BytesType):
        return st.binary(max_size=16)
    if isinstance(ktype, ArrayType):
        if isinstance(ktype.element, StructType):
            return st.lists(struct_strategy(ktype.element.cls, version, kio_nested), max_size=3)
        return st.lists(_type_strategy(ktype.element, version, name, kio_cls), max_size=3)
    if isinstance(ktype, StructType):
        return struct_strategy(ktype.cls, version, kio_nested)
    raise TypeError(f"no strategy for {ktype!r}")


def _field_strategy(spec: FieldSpec, version: int, kio_cls: Any) -> st.SearchStrategy[Any]:
    base = _type_strategy(spec.type, version, spec.name, kio_cls)
    if version in spec.nullable:
        return st.one_of(st.none(), base)
    return base


def struct_strategy(cls: type[Struct], version: int, kio_cls: Any = None) -> st.SearchStrategy[Any]:
    """Random instances of ``cls`` holding values only in fields that exist at ``version``.

    ``kio_cls`` (the oracle's class for the same struct) narrows integers kio gives a meaning to.
    """
    fields = {
        spec.name: st.deferred(lambda spec=spec: _field_strategy(spec, version, kio_cls))
        for spec in cls.kafka_fields()
        if spec.present_in(version)
    }
    return st.builds(cls, **fields)
