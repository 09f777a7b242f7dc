"""The subject DN of an mTLS client's certificate, spelled exactly as Kafka sees it: Java's
``X500Principal.getName()`` (RFC 2253). That string is the input of ``ssl.principal.mapping.rules``
and, under ``DEFAULT``, the principal itself, so every difference is a different user: a CN of
``admin,O=corp`` must read ``CN=admin\\,O=corp``, never ``CN=admin,O=corp``.

Java's rules (sun.security.x509 X500Name, RDN, AVA, AVAKeyword): the RDNs in reverse encoded
order joined by ``,``; the attributes of a multi-valued RDN in their encoded order joined by
``+``; the RFC 2253 keywords CN C L ST O OU STREET DC UID, every other type as its dotted OID;
a value of a dotted type, or not one of Java's string types, as ``#`` and the lower-case hex of
its DER encoding; a string value with ``, = + < > # ; " \\`` escaped by a backslash wherever they
are, NUL as ``\\00``, leading and trailing spaces and carriage returns escaped.
"""

from __future__ import annotations

from .der import OBJECT_IDENTIFIER, SEQUENCE, SET, Element, MalformedDer, oid_string, parse

# AVAKeyword entries Java marks RFC 2253 compliant; every other type prints as its OID.
KEYWORDS = {
    "2.5.4.3": "CN",
    "2.5.4.6": "C",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.9": "STREET",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
# The value types Java prints as text (AVA.isDerString, not canonical) and how it decodes them.
STRING_CHARSETS = {
    0x0C: "utf-8",  # UTF8String
    0x13: "latin-1",  # PrintableString
    0x14: "latin-1",  # T61String
    0x16: "latin-1",  # IA5String
    0x1B: "latin-1",  # GeneralString
    0x1E: "utf-16-be",  # BMPString
}
ESCAPED = frozenset(',=+<>#;"\\')
EDGE_WHITESPACE = " \r"
_CONTEXT_0 = 0xA0  # [0] EXPLICIT version


class MalformedCertificate(ValueError):
    """A peer certificate whose subject cannot be read: the connection is refused."""


def subject_dn(certificate_der: bytes) -> str:
    """The RFC 2253 subject DN (as Java prints it) of a DER X.509 certificate."""
    try:
        fields = parse(certificate_der).expect(SEQUENCE).children()[0].expect(SEQUENCE).children()
        if fields and fields[0].tag == _CONTEXT_0:
            fields = fields[1:]
        # serialNumber, signature, issuer, validity, subject
        if len(fields) < 5:
            raise MalformedDer("the certificate has no subject")
        return _name(fields[4])
    except (MalformedDer, IndexError) as exc:
        raise MalformedCertificate(f"unreadable client certificate: {exc}") from None


def rfc2253(name_der: bytes) -> str:
    """The RFC 2253 string (as Java prints it) of a DER X.501 Name."""
    try:
        return _name(parse(name_der))
    except MalformedDer as exc:
        raise MalformedCertificate(f"unreadable name: {exc}") from None


def _name(name: Element) -> str:
    rdns = [_rdn(rdn.expect(SET)) for rdn in name.expect(SEQUENCE).children()]
    return ",".join(reversed(rdns))


def _rdn(rdn: Element) -> str:
    attributes = rdn.children()
    if not attributes:
        raise MalformedDer("empty relative distinguished name")
    return "+".join(_attribute(attribute.expect(SEQUENCE)) for attribute in attributes)


def _attribute(attribute: Element) -> str:
    parts = attribute.children()
    if len(parts) != 2:
        raise MalformedDer("an attribute is not a type and a value")
    oid = oid_string(parts[0].expect(OBJECT_IDENTIFIER).contents)
    keyword = KEYWORDS.get(oid)
    value = parts[1]
    charset = STRING_CHARSETS.get(value.tag)
    if keyword is None or charset is None:
        return f"{keyword or oid}=#{value.encoded().hex()}"
    try:
        text = value.contents.decode(charset, errors="strict" if charset == "utf-16-be" else "replace")
    except UnicodeDecodeError:
        raise MalformedDer("invalid BMPString") from None
    return f"{keyword}={escape_value(text)}"


def escape_value(text: str) -> str:
    """A string value as Java's ``AVA.toRFC2253String`` escapes it."""
    escaped = "".join("\\" + c if c in ESCAPED else "\\00" if c == "\0" else c for c in text)
    lead = len(escaped) - len(escaped.lstrip(EDGE_WHITESPACE))
    trail = len(escaped.rstrip(EDGE_WHITESPACE))  # index of the first trailing whitespace
    return "".join("\\" + c if i < lead or i >= trail else c for i, c in enumerate(escaped))
