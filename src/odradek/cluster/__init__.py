"""Cluster metadata (brokers, topics, partitions, configs) and the controller that changes it."""
