"""A broker for the matrix's security rows: our broker with TLS, mTLS and SASL_SSL listeners and ACLs.

Listeners: PLAINTEXT (the primary, used for set-up and raw inspection; its anonymous clients are
super users, so every other row runs as before), SSL (server certificate only), MTLS (SSL with
required client certificates, mapped to a name by ``ssl.principal.mapping.rules``) and SASL_SSL
(PLAIN users from the JAAS line, SCRAM users added offline). Users: super users for the
authentication rows; ``matrix-denied`` without any ACL; ``matrix-acl`` with Read and Write on
``matrix-`` topics and Read on ``matrix-`` groups; ``matrix-txn`` with only Write on ``matrix-``
transactional ids and topics.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from ..broker_process import BrokerProcess, server_certificate

LISTENER = re.compile(r"listener (\w+) \(\w+\) listening on [\d.]+:(\d+)")
PASSWORD = "matrix-secret"
PLAIN_USERS = ("matrix-plain", "matrix-denied", "matrix-acl", "matrix-txn")
SCRAM_USERS = {"matrix-scram256": "SCRAM-SHA-256", "matrix-scram512": "SCRAM-SHA-512"}
SUPER_USERS = ("User:ANONYMOUS", "User:matrix-mtls", "User:matrix-plain", "User:matrix-scram256", "User:matrix-scram512")
TIMEOUT_S = 60


def start(base: Path) -> tuple[BrokerProcess, dict[str, dict[str, str]]]:
    """Start the broker; return it and the client properties of every secured profile."""
    ca, server_pem, ca_pem = server_certificate(base)
    client = ca.issue_cert("matrix-client.example", common_name="matrix-mtls", organization_name="Matrix")
    client_key, client_cert = base / "client.key", base / "client.pem"
    client.private_key_pem.write_to_path(str(client_key))
    client.cert_chain_pems[0].write_to_path(str(client_cert))
    data_dir = base / "data"
    for user, mechanism in SCRAM_USERS.items():
        subprocess.run([sys.executable, "-m", "rivven_kproto", "users", "add", user, "--mechanism", mechanism,
                        "--data-dir", str(data_dir)], input=PASSWORD + "\n", text=True, check=True,
                       capture_output=True, timeout=TIMEOUT_S)
    users = " ".join(f'user_{name}="{PASSWORD}"' for name in PLAIN_USERS)
    config = base / "server.properties"
    config.write_text(
        "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,MTLS://127.0.0.1:0,SASL_SSL://127.0.0.1:0\n"
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,SASL_SSL:SASL_SSL\n"
        f"ssl.keystore.type=PEM\nssl.keystore.location={server_pem}\n"
        f"listener.name.mtls.ssl.truststore.type=PEM\nlistener.name.mtls.ssl.truststore.location={ca_pem}\n"
        "listener.name.mtls.ssl.client.auth=required\n"
        "listener.name.mtls.ssl.principal.mapping.rules=RULE:^CN=([^,]*),.*$/$1/\n"
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512\n"
        f"sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required {users};\n"
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
        f"super.users={';'.join(SUPER_USERS)}\n"
        # Each cell's group is new: Kafka's 3 s wait for more members before its first rebalance
        # only adds 3 s to every group cell (Kafka's own integration tests set it to 0 as well).
        "group.initial.rebalance.delay.ms=0\n"
    )
    broker = BrokerProcess(data_dir, base / "broker.log", ["--config", str(config)]).start()
    try:
        ports = {name: int(port) for name, port in LISTENER.findall(broker.log_text())}
        _grant(broker.bootstrap)
    except BaseException:
        broker.stop()
        raise
    tls = {"security.protocol": "SSL", "ssl.ca.location": str(ca_pem)}

    def sasl(mechanism: str, user: str) -> dict[str, str]:
        return {"bootstrap.servers": f"127.0.0.1:{ports['SASL_SSL']}", **tls, "security.protocol": "SASL_SSL",
                "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": PASSWORD}

    profiles = {
        "tls": {"bootstrap.servers": f"127.0.0.1:{ports['SSL']}", **tls},
        "mtls": {"bootstrap.servers": f"127.0.0.1:{ports['MTLS']}", **tls,
                 "ssl.certificate.location": str(client_cert), "ssl.key.location": str(client_key)},
        "plain": sasl("PLAIN", "matrix-plain"),
        "scram-256": sasl("SCRAM-SHA-256", "matrix-scram256"),
        "scram-512": sasl("SCRAM-SHA-512", "matrix-scram512"),
        "denied": sasl("PLAIN", "matrix-denied"),
        "allowed": sasl("PLAIN", "matrix-acl"),
        "txn-writer": sasl("PLAIN", "matrix-txn"),
    }
    return broker, profiles


def _grant(bootstrap: str) -> None:
    def acl(user: str, resource: ResourceType, operation: AclOperation) -> AclBinding:
        return AclBinding(resource, "matrix-", ResourcePatternType.PREFIXED, f"User:{user}", "*", operation,
                          AclPermissionType.ALLOW)

    admin = AdminClient({"bootstrap.servers": bootstrap})  # anonymous on PLAINTEXT: a super user here
    bindings = [
        acl("matrix-acl", ResourceType.TOPIC, AclOperation.READ),
        acl("matrix-acl", ResourceType.TOPIC, AclOperation.WRITE),
        acl("matrix-acl", ResourceType.GROUP, AclOperation.READ),
        acl("matrix-txn", ResourceType.TRANSACTIONAL_ID, AclOperation.WRITE),
        acl("matrix-txn", ResourceType.TOPIC, AclOperation.WRITE),
    ]
    for future in admin.create_acls(bindings).values():
        future.result(TIMEOUT_S)
