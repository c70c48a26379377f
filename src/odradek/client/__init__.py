"""Client-side helpers the CLI and the web console share: Kafka clients of any cluster
(confluent-kafka where it has a binding, one raw request where it has none), with no
terminal or web code. A failure is a ClientError with a one-line message; each front end
shows it its own way (the CLI on stderr with a non-zero exit, the console on the page)."""


class ClientError(Exception):
    """A request the cluster refused or could not answer, in one line."""
