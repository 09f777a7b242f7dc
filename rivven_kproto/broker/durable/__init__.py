"""The broker's durability component: every fsync and every crash-safe file write lives here.

- ``files``: atomic small files (checkpoints, markers, metadata tables) and directory fsyncs.
- ``flush``: an fsync split in three so that the slow middle runs on a worker thread.
- ``log``: the coordinators' write-ahead log (checksummed entries, snapshots written off the loop).
- ``work``: blocking file work produced by state changes, handed to the server to run in order
  on a worker thread (a broker opened without one, e.g. by offline tools, runs it inline).

The server's ``Durability`` task is the only place that interprets the fsync policy; it drives
every flush here. ``tests/broker/test_durable_boundary.py`` checks that nothing else in the broker
calls ``os.fsync`` or writes files by other means.
"""
