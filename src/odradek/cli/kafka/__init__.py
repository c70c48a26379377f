"""Kafka's own command-line tools, with Kafka's flags and output, over odradek's CLI."""
