"""A connection's SASL exchange, sans-IO: SaslHandshake picks a mechanism, SaslAuthenticate tokens
go in, (error, message, reply) come out. PLAIN compares in constant time; SCRAM runs Kafka's server exchange (scram_server).

A SaslHandshake after a successful authentication starts a re-authentication (KIP-368): it must
use the same mechanism and end with the same principal, or it fails as Kafka's does.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Mapping

from rivven_kproto.codec.errors import Errors

from .scram import MECHANISMS as SCRAM_MECHANISMS
from .scram import ScramCredential
from .scram_server import ScramError, ScramServerExchange

AUTH_FAILED = "Authentication failed: Invalid username or password"
CredentialLookup = Callable[[str, str], ScramCredential | None]


class SaslExchange:
    """One connection's authentication state."""

    def __init__(self, enabled: tuple[str, ...], plain_users: Mapping[str, str], scram: CredentialLookup) -> None:
        self.enabled = enabled
        self._plain_users = plain_users
        self._scram = scram
        self.mechanism: str | None = None
        self.principal: str | None = None  # "User:<name>" once authenticated
        self.user: str | None = None  # the name a client claimed, for the log
        self._scram_server: ScramServerExchange | None = None
        self._previous: tuple[str, str] | None = None  # (mechanism, principal) while re-authenticating
        self._bad_mechanism: str | None = None

    @property
    def authenticated(self) -> bool:
        return self.principal is not None

    @property
    def reauthenticating(self) -> bool:
        return self._previous is not None

    def handshake(self, mechanism: str) -> Errors:
        if self.authenticated:
            assert self.mechanism is not None and self.principal is not None
            self._previous = (self.mechanism, self.principal)
            self.principal = self.user = self._scram_server = None
            if mechanism != self._previous[0]:
                # Kafka answers the handshake and fails the next SaslAuthenticate (the name goes
                # back to the client only, in this message).
                self._bad_mechanism = (
                    f"SASL mechanism '{mechanism}' requested by client is not supported for "
                    f"re-authentication of mechanism '{self._previous[0]}'"
                )
            # Only an enabled name is ever kept: it becomes log text and a metrics label, where a
            # client's own (a newline, a new series per attempt) must never go (issue #37 item 10).
            self.mechanism = mechanism if mechanism in self.enabled else self._previous[0]
            return Errors.NONE
        if self.mechanism is not None:
            return Errors.ILLEGAL_SASL_STATE
        if mechanism not in self.enabled:
            return Errors.UNSUPPORTED_SASL_MECHANISM
        self.mechanism = mechanism
        return Errors.NONE

    def authenticate(self, token: bytes) -> tuple[Errors, str | None, bytes]:
        """(error, message, bytes for the client). Any error ends the connection."""
        if self.mechanism is None or self.authenticated:
            return Errors.ILLEGAL_SASL_STATE, "SaslAuthenticate before a SaslHandshake", b""
        if self._bad_mechanism is not None:
            return Errors.SASL_AUTHENTICATION_FAILED, self._bad_mechanism, b""
        error, message, reply = self._plain(token) if self.mechanism == "PLAIN" else self._scram_step(token)
        if error == Errors.NONE and self.principal is not None and self._previous is not None:
            previous = self._previous[1]
            if previous != self.principal:
                changed = f"Cannot change principals during re-authentication from {_dotted(previous)}: {_dotted(self.principal)}"
                self.principal = None
                return Errors.SASL_AUTHENTICATION_FAILED, changed, b""
            self._previous = None
        return error, message, reply

    def _plain(self, token: bytes) -> tuple[Errors, str | None, bytes]:
        parts = token.split(b"\x00")
        if len(parts) != 3:
            return Errors.SASL_AUTHENTICATION_FAILED, "Invalid PLAIN token", b""
        authzid, user, password = (part.decode("utf-8", "replace") for part in parts)
        self.user = user
        expected = self._plain_users.get(user)
        # Compare even for an unknown user, so timing does not tell which names exist.
        ok = hmac.compare_digest(password.encode(), (expected if expected is not None else "\x00" + password).encode())
        if not ok or expected is None or (authzid and authzid != user):
            return Errors.SASL_AUTHENTICATION_FAILED, AUTH_FAILED, b""
        self.principal = f"User:{user}"
        return Errors.NONE, None, b""

    def _scram_step(self, token: bytes) -> tuple[Errors, str | None, bytes]:
        mechanism = self.mechanism
        assert mechanism in SCRAM_MECHANISMS
        try:
            if self._scram_server is None:
                server = ScramServerExchange(mechanism, lambda user: self._scram(mechanism, user))
                self._scram_server = server
                reply = server.client_first(token.decode("utf-8"))
                self.user = server.user
                return Errors.NONE, None, reply.encode()
            reply = self._scram_server.client_final(token.decode("utf-8"))
        except (ScramError, UnicodeDecodeError):
            if self._scram_server is not None:
                self.user = self._scram_server.user
            return Errors.SASL_AUTHENTICATION_FAILED, f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}", b""
        self.principal = f"User:{self.user}"
        return Errors.NONE, None, reply.encode()


def _dotted(principal: str) -> str:
    """``User:alice`` as Kafka writes it in this message: ``User.alice``."""
    kind, _, name = principal.partition(":")
    return f"{kind}.{name}"
