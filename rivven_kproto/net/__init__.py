"""One Kafka connection driver, on trio: the client's (``client/``) and the broker's own requests
to the other brokers of its cluster (``server/peers.py``) both go through it.

:mod:`.protocol` is the sans-IO part (framing, correlation ids, response decoding);
:mod:`.connection` one trio connection (TLS, SASL, ApiVersions negotiated or fixed, pipelining);
:mod:`.versions` what a connection may send; :mod:`.errors` what it raises. It sits under both
``server`` and ``client`` (which stay siblings) and over ``auth`` and ``codec``; it knows no
broker internals.
"""
