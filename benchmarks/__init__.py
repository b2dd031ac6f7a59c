"""Benchmarks (ISSUE 8): every speed target as a ratio against a baseline measured in the same run.

Run ``python -m benchmarks`` (``make bench``) for the full table, ``python -m benchmarks --quick`` for
the smoke-sized one. JSON goes to ``benchmarks/results/`` (gitignored). See ``docs/benchmarks.md``.
"""
