"""Benchmarks of safe-uninstall against uv and pip, on synthetic environments built offline.

Run ``python bench/run.py [--quick]``; see README.md, "Benchmarks".
"""
