"""SCRAM (RFC 5802/7677) as the KIP-554 APIs name and salt it: what a client sends and the broker
reads, so both take it from here."""

from __future__ import annotations

import hashlib

# Kafka's ScramMechanism type codes in the KIP-554 APIs (0 is UNKNOWN).
MECHANISM_TYPES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
TYPE_OF_MECHANISM = {name: code for code, name in MECHANISM_TYPES.items()}
# The hashlib name of each mechanism's hash.
HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MECHANISMS = tuple(HASHES)
# Every SASL mechanism a broker or our client speaks: PLAIN and the SCRAM ones.
SASL_MECHANISMS = ("PLAIN", *MECHANISMS)


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) of RFC 5802: what a client sends in AlterUserScramCredentials."""
    return hashlib.pbkdf2_hmac(HASHES[mechanism], password.encode(), salt, iterations)
