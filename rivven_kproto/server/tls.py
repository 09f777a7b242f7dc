"""The TLS server context from Kafka's PEM settings (KIP-651), built once at start."""

from __future__ import annotations

import ssl

from rivven_kproto.auth.pem import load_inline_chain
from rivven_kproto.broker.config import ConfigError, SecurityConfig
from rivven_kproto.broker.security.x500 import subject_dn

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


def server_context(security: SecurityConfig) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    versions = [_VERSIONS[v] for v in security.enabled_protocols if v in _VERSIONS]
    if not versions:
        raise ConfigError(f"ssl.enabled.protocols {','.join(security.enabled_protocols)}: none of TLSv1.2, TLSv1.3")
    context.minimum_version, context.maximum_version = min(versions), max(versions)
    try:
        if security.keystore_location is not None:
            context.load_cert_chain(security.keystore_location, password=security.key_password)
        elif security.keystore_certificate_chain and security.keystore_key:
            load_inline_chain(context, security.keystore_key, security.keystore_certificate_chain, security.key_password)
        else:
            raise ConfigError("a TLS listener needs ssl.keystore.location or ssl.keystore.certificate.chain + ssl.keystore.key")
        if security.truststore_location is not None:
            context.load_verify_locations(cafile=str(security.truststore_location))
        elif security.truststore_certificates:
            context.load_verify_locations(cadata=security.truststore_certificates)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot load the TLS key or certificates: {exc}") from None
    context.verify_mode = {
        "none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED,
    }[security.client_auth]
    return context


def peer_dn(stream_ssl_object: ssl.SSLObject | None) -> str | None:
    """The subject DN of an mTLS client's certificate as Kafka reads it (Java's RFC 2253 spelling),
    or None without one; MalformedCertificate when it cannot be read."""
    if stream_ssl_object is None:
        return None
    certificate = stream_ssl_object.getpeercert(binary_form=True)
    return None if not certificate else subject_dn(certificate)


def client_context(security: SecurityConfig) -> ssl.SSLContext:
    """The TLS context this broker connects to the other brokers with: their certificates verified
    against the listener's trust store (the system's CAs without one) and, unless
    ``ssl.endpoint.identification.algorithm`` is empty, their host name (Kafka's default, https);
    its own key store presented as its client certificate (for ``ssl.client.auth=required``)."""
    try:
        context = ssl.create_default_context(
            cafile=str(security.truststore_location) if security.truststore_location is not None else None,
            cadata=security.truststore_certificates or None,
        )
        versions = [_VERSIONS[v] for v in security.enabled_protocols if v in _VERSIONS]
        if versions:
            context.minimum_version, context.maximum_version = min(versions), max(versions)
        if security.keystore_location is not None:
            context.load_cert_chain(security.keystore_location, password=security.key_password)
        elif security.keystore_certificate_chain and security.keystore_key:
            load_inline_chain(context, security.keystore_key, security.keystore_certificate_chain, security.key_password)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot load the inter-broker TLS trust or key store: {exc}") from None
    context.check_hostname = security.endpoint_identification
    return context
