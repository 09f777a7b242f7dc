"""Transaction markers: written here on the partitions and group shards this broker serves
(``writer``), asked of the other brokers for the rest (``remote``, sent by the server)."""
