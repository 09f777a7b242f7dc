"""The SASL exchange of one connection, sans-IO: PLAIN, SCRAM and re-authentication (KIP-368)."""

from __future__ import annotations

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
