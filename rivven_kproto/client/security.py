"""Client-side TLS and SASL from Kafka's client properties (``--command-config`` files, and the
Spark source's ``kafka.``-prefixed options).

Keys: ``security.protocol`` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), ``sasl.mechanism`` (PLAIN,
SCRAM-SHA-256, SCRAM-SHA-512), ``sasl.username``/``sasl.password`` or ``sasl.jaas.config``;
trust as librdkafka (``ssl.ca.location``) or as the Java client with PEM stores (KIP-651:
``ssl.truststore.type=PEM`` with ``ssl.truststore.location`` or ``ssl.truststore.certificates``);
a client certificate (mTLS) as librdkafka (``ssl.certificate.location``/``ssl.key.location``) or
as the Java client (``ssl.keystore.type=PEM`` with ``ssl.keystore.location``, or inline
``ssl.keystore.certificate.chain``/``ssl.keystore.key``), ``ssl.key.password``; and
``ssl.endpoint.identification.algorithm`` (``https``, the default, or empty to skip the host-name
check). The SASL exchange itself is :func:`sasl_conversation`, sans-IO, for the trio client and the
Spark source's blocking one alike.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Mapping

from rivven_kproto.auth.pem import load_inline_chain
from rivven_kproto.auth.protocols import SECURITY_PROTOCOLS as PROTOCOLS
from rivven_kproto.auth.sasl_client import ClientSecurity, sasl_conversation
from rivven_kproto.auth.scram import SASL_MECHANISMS as MECHANISMS

__all__ = ["ClientSecurity", "from_properties", "sasl_conversation"]

_JAAS_OPTION = re.compile(r'(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')


def from_properties(props: Mapping[str, str]) -> ClientSecurity:
    """A ClientSecurity from Kafka client properties; ValueError names a bad or missing key."""
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in PROTOCOLS:
        raise ValueError(f"security.protocol must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    context = _ssl_context(props) if protocol in ("SSL", "SASL_SSL") else None
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


def _ssl_context(props: Mapping[str, str]) -> ssl.SSLContext:
    for key in ("ssl.truststore.type", "ssl.keystore.type"):
        if props.get(key, "PEM").strip().upper() != "PEM":
            raise ValueError(f"{key}={props[key]}: only PEM stores are supported (KIP-651)")
    context = ssl.create_default_context(
        cafile=props.get("ssl.ca.location") or props.get("ssl.truststore.location") or None,
        cadata=props.get("ssl.truststore.certificates") or None,
    )
    password = props.get("ssl.key.password")
    if props.get("ssl.certificate.location"):
        context.load_cert_chain(props["ssl.certificate.location"], props.get("ssl.key.location") or None, password)
    elif props.get("ssl.keystore.location"):
        context.load_cert_chain(props["ssl.keystore.location"], password=password)
    elif props.get("ssl.keystore.certificate.chain") and props.get("ssl.keystore.key"):
        load_inline_chain(context, props["ssl.keystore.key"], props["ssl.keystore.certificate.chain"], password)
    if not props.get("ssl.endpoint.identification.algorithm", "https").strip():
        context.check_hostname = False
    return context
