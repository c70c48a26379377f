"""Sans-IO Kafka protocol: frames, headers, message schemas, record batches, errors."""
