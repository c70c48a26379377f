"""The web console: a Kafka client web app to see and operate a cluster, its groups and
the lake. It speaks only the Kafka protocol (confluent-kafka's AdminClient and consumers),
the Prometheus endpoints it discovers and the Iceberg catalog, so it works against any
Kafka cluster; it never imports odradek.server.
"""
