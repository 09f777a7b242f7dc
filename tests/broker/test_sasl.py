"""The SASL exchange of one connection, sans-IO: PLAIN, SCRAM and re-authentication (KIP-368)."""

from __future__ import annotations

import base64
import hashlib
import hmac

from scramp import ScramClient

from rivven_kproto.broker.security.sasl import SaslExchange
from rivven_kproto.broker.security.scram import ScramCredential, make_credential
from rivven_kproto.codec.errors import Errors

USERS = {"alice": "alice-pw", "bob": "bob-pw"}
SCRAM = {("SCRAM-SHA-256", "carol"): make_credential("SCRAM-SHA-256", "carol-pw")}


def exchange() -> SaslExchange:
    def lookup(mechanism: str, user: str) -> ScramCredential | None:
        return SCRAM.get((mechanism, user))

    return SaslExchange(("PLAIN", "SCRAM-SHA-256"), USERS, lookup)


def plain(user: str, password: str) -> bytes:
    return f"\x00{user}\x00{password}".encode()


def scram_login(sasl: SaslExchange, user: str, password: str) -> tuple[Errors, str | None]:
    client = ScramClient(["SCRAM-SHA-256"], user, password)
    error, message, server_first = sasl.authenticate(client.get_client_first().encode())
    if error != Errors.NONE:
        return error, message
    client.set_server_first(server_first.decode())
    error, message, server_final = sasl.authenticate(client.get_client_final().encode())
    if error == Errors.NONE:
        client.set_server_final(server_final.decode())  # the client checks the server's signature
    return error, message


def test_plain_and_scram() -> None:
    sasl = exchange()
    assert sasl.handshake("PLAIN") == Errors.NONE
    assert sasl.authenticate(plain("alice", "alice-pw")) == (Errors.NONE, None, b"")
    assert sasl.principal == "User:alice"
    wrong = exchange()
    wrong.handshake("PLAIN")
    assert wrong.authenticate(plain("alice", "nope"))[0] == Errors.SASL_AUTHENTICATION_FAILED
    assert not wrong.authenticated
    scram = exchange()
    assert scram.handshake("SCRAM-SHA-256") == Errors.NONE
    assert scram_login(scram, "carol", "carol-pw") == (Errors.NONE, None)
    assert scram.principal == "User:carol"
    assert exchange().handshake("GSSAPI") == Errors.UNSUPPORTED_SASL_MECHANISM


def test_a_second_handshake_before_authenticating_is_illegal() -> None:
    sasl = exchange()
    sasl.handshake("PLAIN")
    assert sasl.handshake("PLAIN") == Errors.ILLEGAL_SASL_STATE


def test_reauthentication_keeps_the_principal_and_the_mechanism() -> None:
    sasl = exchange()
    sasl.handshake("PLAIN")
    sasl.authenticate(plain("alice", "alice-pw"))
    # Re-authenticating as the same user works, and the connection stays authenticated after.
    assert sasl.handshake("PLAIN") == Errors.NONE
    assert sasl.reauthenticating and not sasl.authenticated
    assert sasl.authenticate(plain("alice", "alice-pw")) == (Errors.NONE, None, b"")
    assert sasl.authenticated and not sasl.reauthenticating and sasl.principal == "User:alice"
    # Another principal is refused with Kafka's message.
    assert sasl.handshake("PLAIN") == Errors.NONE
    error, message, _ = sasl.authenticate(plain("bob", "bob-pw"))
    assert (error, message) == (
        Errors.SASL_AUTHENTICATION_FAILED, "Cannot change principals during re-authentication from User.alice: User.bob"
    )
    assert not sasl.authenticated


def test_reauthentication_with_another_mechanism_fails_at_the_token() -> None:
    sasl = exchange()
    sasl.handshake("SCRAM-SHA-256")
    assert scram_login(sasl, "carol", "carol-pw") == (Errors.NONE, None)
    assert sasl.handshake("PLAIN") == Errors.NONE  # Kafka answers the handshake ...
    error, message, _ = sasl.authenticate(plain("alice", "alice-pw"))  # ... and fails the token
    assert error == Errors.SASL_AUTHENTICATION_FAILED
    assert message == "SASL mechanism 'PLAIN' requested by client is not supported for re-authentication of mechanism 'SCRAM-SHA-256'"
    again = exchange()
    again.handshake("SCRAM-SHA-256")
    scram_login(again, "carol", "carol-pw")
    assert again.handshake("SCRAM-SHA-256") == Errors.NONE
    assert scram_login(again, "carol", "wrong")[0] == Errors.SASL_AUTHENTICATION_FAILED


def client_final(credential_password: str, client_first_bare: str, server_first: str, nonce: str,
                 channel: str = "biws") -> str:
    """A client-final-message with the proof computed over exactly what is sent (RFC 5802)."""
    attributes = dict(part.split("=", 1) for part in server_first.split(","))
    salted = hashlib.pbkdf2_hmac("sha256", credential_password.encode(), base64.b64decode(attributes["s"]),
                                 int(attributes["i"]))
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    stored_key = hashlib.sha256(client_key).digest()
    without_proof = f"c={channel},r={nonce}"
    auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(stored_key, auth_message, "sha256").digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return f"{without_proof},p={base64.b64encode(proof).decode()}"


def test_scram_nonces_as_kafka_3_9_accepts_them() -> None:
    """librdkafka before 2.6.1 sends the client nonce twice; Kafka 3.8.1+ accepts a nonce that ends
    with the server's, over the bytes sent. Anything else fails."""
    cases = [
        (lambda cnonce, full: full, "biws", Errors.NONE),
        (lambda cnonce, full: cnonce + full, "biws", Errors.NONE),  # librdkafka < 2.6.1
        (lambda cnonce, full: cnonce, "biws", Errors.SASL_AUTHENTICATION_FAILED),
        (lambda cnonce, full: full[:-1], "biws", Errors.SASL_AUTHENTICATION_FAILED),
        (lambda cnonce, full: full, "eSws", Errors.SASL_AUTHENTICATION_FAILED),  # channel binding changed
    ]
    for make_nonce, channel, expected in cases:
        sasl = exchange()
        sasl.handshake("SCRAM-SHA-256")
        bare = "n=carol,r=client-nonce-123"
        error, _message, server_first = sasl.authenticate(f"n,,{bare}".encode())
        assert error == Errors.NONE
        full = dict(part.split("=", 1) for part in server_first.decode().split(","))["r"]
        assert full.startswith("client-nonce-123") and len(full) > len("client-nonce-123")
        final = client_final("carol-pw", bare, server_first.decode(), make_nonce("client-nonce-123", full), channel)
        assert sasl.authenticate(final.encode())[0] == expected, (make_nonce, channel)
    wrong_password = exchange()
    wrong_password.handshake("SCRAM-SHA-256")
    _e, _m, server_first = wrong_password.authenticate(b"n,,n=carol,r=abc")
    full = dict(part.split("=", 1) for part in server_first.decode().split(","))["r"]
    final = client_final("not-it", "n=carol,r=abc", server_first.decode(), full)
    assert wrong_password.authenticate(final.encode())[0] == Errors.SASL_AUTHENTICATION_FAILED
    unknown = exchange()
    unknown.handshake("SCRAM-SHA-256")
    assert unknown.authenticate(b"n,,n=nobody,r=abc")[0] == Errors.SASL_AUTHENTICATION_FAILED
    assert unknown.user == "nobody"


def test_a_reauthentication_name_not_enabled_is_never_kept() -> None:
    """Issue #37 item 10: the mechanism is log text and a metrics label; a client's own name
    (with a newline, or new on every attempt) must not become either."""
    sasl = exchange()
    sasl.handshake("PLAIN")
    assert sasl.authenticate(plain("alice", "alice-pw"))[0] == Errors.NONE
    assert sasl.handshake("PLAIN\nforged line") == Errors.NONE
    assert sasl.mechanism == "PLAIN"
    error, message, _ = sasl.authenticate(plain("alice", "alice-pw"))
    assert error == Errors.SASL_AUTHENTICATION_FAILED and message is not None and "not supported" in message
