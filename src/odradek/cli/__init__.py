"""The `odradek` command: Kafka's tools as subcommands."""
