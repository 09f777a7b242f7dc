"""Every declared message decoder, fed garbage or truncated bytes, raises DecodeError and nothing else."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rivven_kproto.codec.messages  # noqa: F401
from rivven_kproto.codec.schema import REQUESTS, RESPONSES, DecodeError, Message

from .strategies import struct_strategy

CASES = [
    pytest.param(cls, version, id=f"{cls.__name__}-v{version}")
    for registry in (REQUESTS, RESPONSES)
    for cls in sorted(registry.values(), key=lambda c: c.API_KEY)
    for version in (cls.VALID_VERSIONS.low, cls.VALID_VERSIONS.high)
]


@pytest.mark.parametrize(("cls", "version"), CASES)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_garbage_and_truncation(cls: type[Message], version: int, data: st.DataObject) -> None:
    garbage = data.draw(st.binary(max_size=64))
    try:
        cls.decode(garbage, version)
    except DecodeError:
        pass
    valid = data.draw(struct_strategy(cls, version)).encode(version)
    cut = data.draw(st.integers(0, max(len(valid) - 1, 0)))
    if cut < len(valid):
        with pytest.raises(DecodeError):
            cls.decode(valid[:cut], version)


def test_specific_hostile_inputs() -> None:
    from rivven_kproto.codec.messages.metadata import MetadataRequest
    from rivven_kproto.codec.messages.produce import ProduceRequest

    # a topics array claiming 2**31-1 entries with nothing behind it
    with pytest.raises(DecodeError, match="cannot fit"):
        MetadataRequest.decode(b"\x7f\xff\xff\xff", 1)
    # negative array length other than -1 (null)
    with pytest.raises(DecodeError, match="negative"):
        MetadataRequest.decode(b"\xff\xff\xff\xfe", 1)
    # a compact array count as an unsigned varint longer than 5 bytes
    with pytest.raises(DecodeError, match="longer than 5"):
        MetadataRequest.decode(b"\xff\xff\xff\xff\xff\xff\x01", 9)
    # invalid UTF-8 in a string
    with pytest.raises(DecodeError, match="UTF-8"):
        MetadataRequest.decode(b"\x00\x00\x00\x01\x00\x02\xc3\x28", 1)
    # string length past the end
    with pytest.raises(DecodeError, match="past the end"):
        ProduceRequest.decode(b"\x00\x10abc", 3)
