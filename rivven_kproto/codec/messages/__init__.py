"""Every Kafka message we serve, one module per API; importing this package registers them all."""

import importlib
import pkgutil

from ..schema import REQUESTS, RESPONSES, Message

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

ALL_MESSAGES: list[type[Message]] = [
    *sorted(REQUESTS.values(), key=lambda c: c.API_KEY),
    *sorted(RESPONSES.values(), key=lambda c: c.API_KEY),
]
