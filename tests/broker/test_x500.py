"""Certificate subject DNs spelled as Java's X500Principal.getName() (RFC 2253) spells them: the
string Kafka's principal mapping and ACLs see (#37 item 3)."""

from __future__ import annotations

import datetime

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.name import _ASN1Type
from cryptography.x509.oid import NameOID

from rivven_kproto.broker.security.x500 import MalformedCertificate, escape_value, rfc2253, subject_dn


def name(*rdns: list[x509.NameAttribute]) -> bytes:
    """The DER of a Name, its RDNs in encoded (most significant first) order."""
    return x509.Name([x509.RelativeDistinguishedName(rdn) for rdn in rdns]).public_bytes()


def cn(value: str, kind: _ASN1Type = _ASN1Type.UTF8String) -> list[x509.NameAttribute]:
    return [x509.NameAttribute(NameOID.COMMON_NAME, value, kind)]


@pytest.mark.parametrize(
    ("value", "printed"),
    [
        ("admin,O=corp", "CN=admin\\,O\\=corp"),  # the escalation: one CN, not two RDNs (Java escapes '=' too)
        ("a+b", "CN=a\\+b"),
        ("#lead", "CN=\\#lead"),
        ("mid#dle=x", "CN=mid\\#dle\\=x"),  # Java escapes '#' and '=' anywhere
        ('<>;"\\', 'CN=\\<\\>\\;\\"\\\\'),
        (" two  spaces ", "CN=\\ two  spaces\\ "),
        ("\rx\r", "CN=\\\rx\\\r"),
        ("   ", "CN=\\ \\ \\ "),
        ("nul\0byte", "CN=nul\\00byte"),
        ("Jürgen_Ωmega@x", "CN=Jürgen_Ωmega@x"),  # other characters as they are
    ],
)
def test_string_values_are_escaped_as_java_does(value: str, printed: str) -> None:
    assert rfc2253(name(cn(value))) == printed


def test_rdns_are_reversed_and_multi_valued_rdns_joined_with_plus() -> None:
    der = name(
        [x509.NameAttribute(NameOID.COUNTRY_NAME, "US")],
        [x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Acme, Inc.")],
        [x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "eng"), x509.NameAttribute(NameOID.COMMON_NAME, "bob")],
    )
    assert rfc2253(der) == "CN=bob+OU=eng,O=Acme\\, Inc.,C=US"  # cryptography DER-sorts a SET OF


def test_the_attributes_of_an_rdn_keep_their_encoded_order() -> None:
    # SET { OU=eng, CN=bob }: not DER-sorted (CN's encoding sorts first); Java prints what it read.
    ou, common = bytes.fromhex("300a060355040b0c03656e67"), bytes.fromhex("300a06035504030c03626f62")
    rdn = bytes([0x31, len(ou + common)]) + ou + common
    assert rfc2253(bytes([0x30, len(rdn)]) + rdn) == "OU=eng+CN=bob"
    rdn = bytes([0x31, len(ou + common)]) + common + ou
    assert rfc2253(bytes([0x30, len(rdn)]) + rdn) == "CN=bob+OU=eng"


def test_an_empty_value() -> None:
    assert rfc2253(bytes.fromhex("300b3109300706035504030c00")) == "CN="


def test_java_keywords_and_dotted_oids() -> None:
    der = name(
        [x509.NameAttribute(NameOID.DOMAIN_COMPONENT, "com")],
        [x509.NameAttribute(NameOID.DOMAIN_COMPONENT, "example")],
        [x509.NameAttribute(NameOID.STATE_OR_PROVINCE_NAME, "IDF")],
        [x509.NameAttribute(NameOID.LOCALITY_NAME, "Paris")],
        [x509.NameAttribute(NameOID.STREET_ADDRESS, "1 rue X")],
        [x509.NameAttribute(NameOID.USER_ID, "jdoe")],
        [x509.NameAttribute(NameOID.EMAIL_ADDRESS, "x@y")],  # IA5String, no RFC 2253 keyword
        [x509.NameAttribute(NameOID.SERIAL_NUMBER, "42")],  # PrintableString, no RFC 2253 keyword
        [x509.NameAttribute(NameOID.TITLE, "Dr")],
    )
    assert rfc2253(der) == (
        "2.5.4.12=#0c024472,2.5.4.5=#13023432,1.2.840.113549.1.9.1=#1603784079,"
        "UID=jdoe,STREET=1 rue X,L=Paris,ST=IDF,DC=example,DC=com"
    )


def test_value_types_java_does_not_print_as_text_are_hex() -> None:
    assert rfc2253(name(cn("ab", _ASN1Type.UniversalString))) == "CN=#1c080000006100000062"
    assert rfc2253(name(cn("ab", _ASN1Type.VisibleString))) == "CN=#1a026162"
    assert rfc2253(name(cn("a,b", _ASN1Type.BMPString))) == "CN=a\\,b"
    assert rfc2253(name(cn("a b", _ASN1Type.PrintableString))) == "CN=a b"
    assert rfc2253(name(cn("a@b", _ASN1Type.IA5String))) == "CN=a@b"


def test_escape_value_directly() -> None:
    assert escape_value(" #a, ") == "\\ \\#a\\,\\ "


def certificate(subject: x509.Name, issuer: str = "Issuer, CA") -> bytes:
    """A self-made certificate whose issuer differs from its subject (the subject must be picked)."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    built = (
        x509.CertificateBuilder().subject_name(subject)
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
        .public_key(key.public_key()).serial_number(7)
        .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    return built.public_bytes(serialization.Encoding.DER)


def test_subject_dn_of_a_certificate() -> None:
    subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "corp"),
                         x509.NameAttribute(NameOID.COMMON_NAME, "admin,O=corp")])
    assert subject_dn(certificate(subject)) == "CN=admin\\,O\\=corp,O=corp"


@pytest.mark.parametrize("der", [b"", b"\x30", b"\x30\x00", b"\x30\x03\x30\x01\x02", b"\x04\x00", b"\x30\x80\x00\x00"])
def test_malformed_certificates_are_refused(der: bytes) -> None:
    with pytest.raises(MalformedCertificate):
        subject_dn(der)


def test_a_truncated_certificate_is_refused() -> None:
    der = certificate(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "x")]))
    for cut in range(0, len(der), 17):
        with pytest.raises(MalformedCertificate):
            subject_dn(der[:cut])
