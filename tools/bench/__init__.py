"""Broker benchmarks: our broker side by side with a peer and with the null-broker limit.

``python -m tools.bench --help``; the workloads, the figures and the goals are in docs/benchmarks.rst.
"""
