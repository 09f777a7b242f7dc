"""Transaction coordinator: state per transactional id, its durable log, two-phase commit."""
