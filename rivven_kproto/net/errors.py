"""Typed client errors, each carrying the Kafka error name the CLI prints.

Every failure a client operation can meet (a broker error code, an unreachable broker, a timeout,
an API the broker does not serve, bytes we cannot decode) is a :class:`ClientError` with an
:class:`~rivven_kproto.codec.errors.Errors` member, so callers need one ``except`` and can still
tell retriable errors apart.
"""

from __future__ import annotations

from rivven_kproto.codec.errors import Errors


class ClientError(Exception):
    """Base of every client failure: a Kafka error name plus a one-line explanation."""

    def __init__(self, error: Errors, message: str | None = None) -> None:
        self.error = error
        text = message if message else error.message
        self.message = " ".join(text.split())  # always one line
        super().__init__(f"{error.name}: {self.message}")

    @property
    def name(self) -> str:
        return self.error.name

    @property
    def retriable(self) -> bool:
        return self.error.retriable


class KafkaResponseError(ClientError):
    """The broker answered with a non-zero error code."""

    def __init__(self, code: int, message: str | None = None, *, context: str = "") -> None:
        error = Errors.for_code(code)
        text = message or error.message
        if error is Errors.UNKNOWN_SERVER_ERROR and code != -1:
            text = f"unknown error code {code}: {text}"
        if context:
            text = f"{context}: {text}"
        super().__init__(error, text)
        self.code = code


class BrokerUnreachableError(ClientError):
    """No connection could be made (refused, no route, name not resolved)."""

    def __init__(self, message: str) -> None:
        super().__init__(Errors.NETWORK_EXCEPTION, message)


class ConnectionLostError(ClientError):
    """The broker closed the connection before answering."""

    def __init__(self, message: str) -> None:
        super().__init__(Errors.NETWORK_EXCEPTION, message)


class RequestTimeoutError(ClientError):
    """An operation did not finish within the client's timeout."""

    def __init__(self, message: str) -> None:
        super().__init__(Errors.REQUEST_TIMED_OUT, message)


class UnsupportedApiError(ClientError):
    """The broker serves no version of an API that both sides can speak."""

    def __init__(self, message: str) -> None:
        super().__init__(Errors.UNSUPPORTED_VERSION, message)


class ProtocolViolationError(ClientError):
    """The broker sent bytes that are not a response we can match or decode."""

    def __init__(self, message: str) -> None:
        super().__init__(Errors.UNKNOWN_SERVER_ERROR, message)


def check(code: int, message: str | None = None, *, context: str = "") -> None:
    """Raise :class:`KafkaResponseError` unless ``code`` is 0 (NONE)."""
    if code != 0:
        raise KafkaResponseError(code, message, context=context)
