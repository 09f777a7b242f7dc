"""SCRAM credentials (RFC 5802/7677) kept as Kafka keeps them: salt, stored key, server key,
iterations, never the password; durable in ``<data_dir>/meta/scram.json`` (written atomically)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from dataclasses import dataclass
from pathlib import Path

from scramp import ScramMechanism

from rivven_kproto.auth.scram import HASHES, MECHANISMS
from rivven_kproto.broker.durable.work import BlockingWork, Document

DEFAULT_ITERATIONS = 4096
MIN_ITERATIONS = 4096  # Kafka's minimum
MAX_ITERATIONS = 16384  # Kafka's maximum
FILE_NAME = "scram.json"


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def as_auth_info(self) -> tuple[bytes, bytes, bytes, int]:
        return self.salt, self.stored_key, self.server_key, self.iterations


def make_credential(mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS) -> ScramCredential:
    if mechanism not in MECHANISMS:
        raise ValueError(f"unknown SCRAM mechanism {mechanism}; use one of {', '.join(MECHANISMS)}")
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}")
    salt, stored_key, server_key, count = ScramMechanism(mechanism).make_auth_info(password, iteration_count=iterations)
    return ScramCredential(salt, stored_key, server_key, count)


def credential_from_salted_password(mechanism: str, salt: bytes, salted: bytes, iterations: int) -> ScramCredential:
    """The stored and server keys of RFC 5802 from a salted password, as Kafka's controller derives them."""
    digest = HASHES[mechanism]
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    stored_key = hashlib.new(digest, client_key).digest()
    server_key = hmac.new(salted, b"Server Key", digest).digest()
    return ScramCredential(salt, stored_key, server_key, iterations)


class ScramStore:
    """Credentials by mechanism and user name."""

    def __init__(self, meta_dir: Path | Document, work: BlockingWork | None = None) -> None:
        self.document = meta_dir if isinstance(meta_dir, Document) else Document(meta_dir / FILE_NAME)
        self.path = self.document.path
        self.work = work
        self.credentials: dict[str, dict[str, ScramCredential]] = {m: {} for m in MECHANISMS}
        self.reload(self.document.read())

    def reload(self, stored: bytes | None) -> None:
        """Take the credentials as stored (at start, and on a broker following the controller,
        which changed them): a user deleted there cannot log in here any more."""
        credentials: dict[str, dict[str, ScramCredential]] = {m: {} for m in MECHANISMS}
        if stored is not None:
            raw = json.loads(stored)
            for mechanism, users in raw.items():
                credentials[mechanism] = {
                    user: ScramCredential(
                        base64.b64decode(c["salt"]), base64.b64decode(c["stored_key"]),
                        base64.b64decode(c["server_key"]), int(c["iterations"]),
                    )
                    for user, c in users.items()
                }
        self.credentials = credentials

    def get(self, mechanism: str, user: str) -> ScramCredential | None:
        return self.credentials.get(mechanism, {}).get(user)

    def upsert(self, mechanism: str, user: str, credential: ScramCredential) -> None:
        self.alter([], [(user, mechanism, credential)])

    def alter(
        self, deletions: list[tuple[str, str]], upsertions: list[tuple[str, str, ScramCredential]]
    ) -> None:
        """Delete (user, mechanism) pairs and upsert credentials, durable in one write."""
        for user, mechanism in deletions:
            self.credentials[mechanism].pop(user, None)
        for user, mechanism, credential in upsertions:
            self.credentials[mechanism][user] = credential
        self._save()

    def users(self) -> dict[str, list[tuple[str, int]]]:
        """Each user with a credential: its (mechanism, iterations) pairs."""
        found: dict[str, list[tuple[str, int]]] = {}
        for mechanism in MECHANISMS:
            for user, credential in self.credentials.get(mechanism, {}).items():
                found.setdefault(user, []).append((mechanism, credential.iterations))
        return found

    def delete(self, mechanism: str, user: str) -> bool:
        found = self.credentials.get(mechanism, {}).pop(user, None) is not None
        if found:
            self._save()
        return found

    def _save(self) -> None:
        data = {
            mechanism: {
                user: {
                    "salt": base64.b64encode(c.salt).decode(),
                    "stored_key": base64.b64encode(c.stored_key).decode(),
                    "server_key": base64.b64encode(c.server_key).decode(),
                    "iterations": c.iterations,
                }
                for user, c in sorted(users.items())
            }
            for mechanism, users in self.credentials.items()
        }
        self.document.save(self.work, json.dumps(data, indent=1, sort_keys=True).encode())
