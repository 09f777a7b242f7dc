"""Loading Kafka's inline PEM settings (KIP-651) into an ``ssl.SSLContext``: the broker's keystore
and a client's, which both may come as text instead of a file."""

from __future__ import annotations

import os
import ssl
import tempfile


def load_inline_chain(context: ssl.SSLContext, key: str, chain: str, password: str | None) -> None:
    """ssl can only load a key and chain from a file: a private temporary one, removed at once."""
    descriptor, path = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(descriptor, "w") as handle:
            handle.write(f"{key}\n{chain}\n")
        context.load_cert_chain(path, password=password)
    finally:
        os.unlink(path)
