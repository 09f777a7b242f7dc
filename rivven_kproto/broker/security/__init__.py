"""Authentication: listeners and their security protocols, SASL PLAIN and SCRAM (no sockets here)."""
