"""The PostgreSQL storage engine (``kproto serve --storage postgresql://...``)."""
