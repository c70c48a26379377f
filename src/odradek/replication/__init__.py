"""Partitions as replicas: leadership, high watermark, delayed produce and fetch."""
