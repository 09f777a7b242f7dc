"""rivven_kproto: a Kafka-compatible broker in Python."""
