"""Client-side TLS and SASL from Kafka's client properties (``--command-config`` files).

Keys: ``security.protocol`` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), ``sasl.mechanism`` (PLAIN,
SCRAM-SHA-256, SCRAM-SHA-512), ``sasl.username``/``sasl.password`` or ``sasl.jaas.config``,
``ssl.ca.location``, ``ssl.certificate.location``/``ssl.key.location``/``ssl.key.password`` (mTLS)
and ``ssl.endpoint.identification.algorithm`` (``https``, the default, or empty to skip the
host-name check).
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_JAAS_OPTION = re.compile(r'(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    mechanism: str | None = None
    username: str | None = None
    password: str | None = None

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")


def from_properties(props: Mapping[str, str]) -> ClientSecurity:
    """A ClientSecurity from Kafka client properties; ValueError names a bad or missing key."""
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in PROTOCOLS:
        raise ValueError(f"security.protocol must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    context = None
    if protocol in ("SSL", "SASL_SSL"):
        context = ssl.create_default_context(cafile=props.get("ssl.ca.location") or None)
        if props.get("ssl.certificate.location"):
            context.load_cert_chain(
                props["ssl.certificate.location"], props.get("ssl.key.location") or None, props.get("ssl.key.password")
            )
        if not props.get("ssl.endpoint.identification.algorithm", "https").strip():
            context.check_hostname = False
    mechanism = username = password = None
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        mechanism = props.get("sasl.mechanism", "PLAIN").strip().upper()
        if mechanism not in MECHANISMS:
            raise ValueError(f"sasl.mechanism must be one of {', '.join(MECHANISMS)}, got {mechanism!r}")
        jaas = dict(_JAAS_OPTION.findall(props.get("sasl.jaas.config", "")))
        username = props.get("sasl.username", jaas.get("username"))
        password = props.get("sasl.password", jaas.get("password"))
        if not username or password is None:
            raise ValueError("SASL needs sasl.username and sasl.password (or sasl.jaas.config)")
    return ClientSecurity(protocol, context, mechanism, username, password)
