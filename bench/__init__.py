"""The benchmark harness of issue 7 (see run.py); not part of the odradek package."""
