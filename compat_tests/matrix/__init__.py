"""The compatibility matrix: every client x every capability against one broker, as a table.

``model`` (rows, columns, outcomes), ``scenarios`` (one client-neutral scenario per row, with the
assertions), ``clients/`` (one adapter per column), ``fixtures`` (neutral set-up and raw log
inspection), ``runner`` (one subprocess per cell, bounded in time), ``render`` (reST and JSON),
``baseline`` (the CI gate's list of passing cells). Entry points: ``python -m compat_tests.report``
and ``compat_tests/test_matrix.py``.
"""
