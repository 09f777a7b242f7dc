"""SCRAM credentials (RFC 5802/7677) kept as Kafka keeps them: salt, stored key, server key,
iterations, never the password; durable in ``<data_dir>/meta/scram.json`` (written atomically)."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path

from scramp import ScramMechanism

from rivven_kproto.broker.log.checkpoint import write_atomic

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
DEFAULT_ITERATIONS = 4096
MIN_ITERATIONS = 4096  # Kafka's minimum
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
    if iterations < MIN_ITERATIONS:
        raise ValueError(f"iterations must be at least {MIN_ITERATIONS}")
    salt, stored_key, server_key, count = ScramMechanism(mechanism).make_auth_info(password, iteration_count=iterations)
    return ScramCredential(salt, stored_key, server_key, count)


class ScramStore:
    """Credentials by mechanism and user name."""

    def __init__(self, meta_dir: Path) -> None:
        self.path = meta_dir / FILE_NAME
        self.credentials: dict[str, dict[str, ScramCredential]] = {m: {} for m in MECHANISMS}
        if self.path.exists():
            raw = json.loads(self.path.read_text())
            for mechanism, users in raw.items():
                self.credentials[mechanism] = {
                    user: ScramCredential(
                        base64.b64decode(c["salt"]), base64.b64decode(c["stored_key"]),
                        base64.b64decode(c["server_key"]), int(c["iterations"]),
                    )
                    for user, c in users.items()
                }

    def get(self, mechanism: str, user: str) -> ScramCredential | None:
        return self.credentials.get(mechanism, {}).get(user)

    def upsert(self, mechanism: str, user: str, credential: ScramCredential) -> None:
        self.credentials[mechanism][user] = credential
        self._save()

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
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(self.path, json.dumps(data, indent=1, sort_keys=True).encode())
