"""The server side of one SCRAM exchange (RFC 5802/7677), as Kafka 3.9's ScramSaslServer runs it.

Written here rather than taken from scramp's server because Kafka accepts a client-final nonce
that *ends with* the server's nonce (Kafka 3.8.1+, for librdkafka before 2.6.1, which sends the
client nonce twice, confluentinc/librdkafka#4895): scramp, strictly RFC 5802, refuses those
clients, among them the kcat of Debian and Ubuntu. The proof is checked over the bytes the client
really sent, so the leniency does not weaken it. Clients keep using scramp.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable

from rivven_kproto.auth.scram import HASHES

from .scram import ScramCredential


class ScramError(ValueError):
    """The exchange failed: bad syntax, unknown user or a wrong proof."""


class ScramServerExchange:
    """client-first in, server-first out; client-final in, server-final out."""

    def __init__(self, mechanism: str, lookup: Callable[[str], ScramCredential | None]) -> None:
        self.digest = HASHES[mechanism]
        self._lookup = lookup
        self.user: str | None = None
        self._credential: ScramCredential | None = None
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""

    def client_first(self, message: str) -> str:
        if not message.startswith(("n,", "y,")):
            raise ScramError("channel binding is not supported")
        gs2_flag, authzid, bare = message.split(",", 2)
        attributes = _attributes(bare)
        if "n" not in attributes or "r" not in attributes or not attributes["r"]:
            raise ScramError("client-first-message needs n= and r=")
        self.user = attributes["n"].replace("=2C", ",").replace("=3D", "=")
        if authzid and authzid[2:] != self.user:  # "a=<authzid>" must name the same user
            raise ScramError("authorization id differs from the user")
        self._credential = self._lookup(self.user)
        if self._credential is None:
            raise ScramError("unknown user")
        self._gs2_header = f"{gs2_flag},{authzid},"
        self._client_first_bare = bare
        self._nonce = attributes["r"] + secrets.token_hex(16)
        salt = base64.b64encode(self._credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={self._credential.iterations}"
        return self._server_first

    def client_final(self, message: str) -> str:
        credential = self._credential
        if credential is None:
            raise ScramError("client-final-message before client-first-message")
        without_proof, separator, proof_text = message.rpartition(",p=")
        if not separator:
            raise ScramError("client-final-message without a proof")
        attributes = _attributes(without_proof)
        if attributes.get("c") != base64.b64encode(self._gs2_header.encode()).decode():
            raise ScramError("channel binding does not match the client-first-message")
        if not attributes.get("r", "").endswith(self._nonce):  # Kafka 3.9: endsWith, see above
            raise ScramError("nonce does not match")
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        try:
            proof = base64.b64decode(proof_text, validate=True)
        except ValueError:
            raise ScramError("proof is not base64") from None
        signature = hmac.new(credential.stored_key, auth_message, self.digest).digest()
        if len(proof) != len(signature):
            raise ScramError("invalid proof")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self.digest, client_key).digest(), credential.stored_key):
            raise ScramError("invalid proof")
        server_signature = hmac.new(credential.server_key, auth_message, self.digest).digest()
        return "v=" + base64.b64encode(server_signature).decode()


def _attributes(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in text.split(","):
        key, separator, value = part.partition("=")
        if not separator or len(key) != 1:
            raise ScramError(f"malformed attribute {part[:20]!r}")
        out[key] = value
    return out
