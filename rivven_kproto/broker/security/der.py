"""The little DER a certificate's subject name needs: tag-length-value elements and object
identifiers. Strict and bounds-checked (a malformed input is a ``MalformedDer``, never an
IndexError), so that a client's certificate cannot crash the connection task."""

from __future__ import annotations

from dataclasses import dataclass

SEQUENCE = 0x30
SET = 0x31
OBJECT_IDENTIFIER = 0x06
MAX_LENGTH_OCTETS = 4


class MalformedDer(ValueError):
    """Bytes that are not the DER element the caller expected."""


@dataclass(frozen=True)
class Element:
    """One DER element of a buffer: its tag and where its contents lie."""

    tag: int
    data: bytes
    start: int  # first content octet
    end: int  # one past the last content octet

    @property
    def contents(self) -> bytes:
        return self.data[self.start:self.end]

    def encoded(self) -> bytes:
        """The element re-encoded with a minimal length (what Java's ``DerValue.toByteArray`` gives)."""
        return bytes([self.tag]) + encode_length(self.end - self.start) + self.contents

    def children(self) -> list[Element]:
        """The elements inside a constructed element, in their encoded order."""
        if not self.tag & 0x20:
            raise MalformedDer(f"element with tag 0x{self.tag:02x} is not constructed")
        return read_all(self.data, self.start, self.end)

    def expect(self, tag: int) -> Element:
        if self.tag != tag:
            raise MalformedDer(f"expected tag 0x{tag:02x}, found 0x{self.tag:02x}")
        return self


def read_element(data: bytes, offset: int, limit: int) -> Element:
    """The element starting at ``offset``, which must end by ``limit``."""
    if offset + 2 > limit:
        raise MalformedDer("truncated element")
    tag = data[offset]
    if tag & 0x1F == 0x1F:
        raise MalformedDer("high tag numbers are not used in names")
    first = data[offset + 1]
    position = offset + 2
    if first < 0x80:
        length = first
    else:
        count = first & 0x7F
        if count == 0 or count > MAX_LENGTH_OCTETS:
            raise MalformedDer("indefinite or oversized length")
        if position + count > limit:
            raise MalformedDer("truncated length")
        length = int.from_bytes(data[position:position + count], "big")
        position += count
    if position + length > limit:
        raise MalformedDer("truncated contents")
    return Element(tag, data, position, position + length)


def read_all(data: bytes, start: int, end: int) -> list[Element]:
    elements: list[Element] = []
    position = start
    while position < end:
        element = read_element(data, position, end)
        elements.append(element)
        position = element.end
    return elements


def parse(data: bytes) -> Element:
    """The one element ``data`` holds (trailing bytes are refused)."""
    element = read_element(data, 0, len(data))
    if element.end != len(data):
        raise MalformedDer("trailing bytes after the element")
    return element


def encode_length(length: int) -> bytes:
    if length < 0x80:
        return bytes([length])
    octets = length.to_bytes((length.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(octets)]) + octets


def oid_string(contents: bytes) -> str:
    """The dotted form of an OBJECT IDENTIFIER's contents (X.690 8.19)."""
    if not contents or contents[-1] & 0x80:
        raise MalformedDer("empty or truncated object identifier")
    arcs: list[int] = []
    value = 0
    for octet in contents:
        value = (value << 7) | (octet & 0x7F)
        if not octet & 0x80:
            arcs.append(value)
            value = 0
    first = arcs[0]
    head = [0, first] if first < 40 else [1, first - 40] if first < 80 else [2, first - 80]
    return ".".join(str(arc) for arc in head + arcs[1:])
