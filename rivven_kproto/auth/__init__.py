"""Authentication both ends of a connection speak: the client's side of SASL, SCRAM's mechanism
codes and salting, inline PEM loading.

Below ``broker/`` and above ``codec/`` (setup.cfg's layers), so the broker, the server and the
client (``client/``, and the connection driver it shares with the server's requests to its
peers, ``net/``) share one definition without the client depending on the broker. Sans-IO:
no sockets, trio or asyncio.
"""
