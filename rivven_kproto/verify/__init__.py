"""``kproto verify-eos``: an exactly-once checker for any Kafka-compatible broker.

:mod:`.workload` drives real transactional producers and read_committed consumers (confluent-kafka)
under faults from :mod:`.faults`, recording a :class:`~.history.History`; :mod:`.checker` judges it.
With ``--cluster``, :mod:`.cluster` starts our brokers on one PostgreSQL database and :mod:`.nemesis`
injects the seed's faults into it; :mod:`.idempotent` adds an idempotent producer.
"""
