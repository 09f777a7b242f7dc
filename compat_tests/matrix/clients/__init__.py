"""The matrix's columns, in table order: one module per client, each exposing ``CLIENT``.

Adding a column: write ``clients/<name>.py`` with an adapter and a ``CLIENT =
Client(...)`` (see :mod:`..model` and an existing module), then append ``"<name>"`` to
``COLUMNS``; or, without editing this file, name extra modules in the environment variable
``COMPAT_MATRIX_EXTRA_CLIENTS`` (comma-separated module paths, absolute or relative to this
package). Every capability must be served or declared n/a with a reason.
"""

from __future__ import annotations

import importlib
import os

from ..model import Client, check_client

COLUMNS = ["confluent", "kafka_python", "aiokafka_client", "kafkajs", "kcat", "pyspark"]


def column_modules() -> list[str]:
    extra = [m.strip() for m in os.environ.get("COMPAT_MATRIX_EXTRA_CLIENTS", "").split(",") if m.strip()]
    return COLUMNS + [m for m in extra if m not in COLUMNS]


def load(module: str) -> Client:
    name = module if "." in module else f"{__name__}.{module}"
    client: Client = importlib.import_module(name).CLIENT
    check_client(client)
    return client
