"""Kafka's security protocols, as ``listeners`` and a client's ``security.protocol`` name them: the
broker's listener parser and our client's property parser accept the same four."""

from __future__ import annotations

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
