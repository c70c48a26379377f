"""The settings each goal wants, as data: seed 004's review of Confluent's
"Optimizing Your Apache Kafka Deployment".

Four goals trade against each other — throughput, latency, durability, availability —
and for each the paper lists producer, consumer, broker and topic settings. One `Rule`
per (goal, scope, property): what the goal wants (`Want`: the text we print and the
test a user's value must pass), the concrete value `--format properties` writes, Kafka's
default, and why, in one line. A rule whose `want` has no test is advice only: printed,
never flagged (the seed says "raise it when …", which no single value contradicts).

Defaults are Apache Kafka 4's (Java client and broker). Where the seed quotes an older
default (acks=1, retries=0, linger.ms=0) the `why` says so.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

LONG_MAX = "9223372036854775807"
INT_MAX = "2147483647"


class Goal(enum.StrEnum):
    THROUGHPUT = "throughput"
    LATENCY = "latency"
    DURABILITY = "durability"
    AVAILABILITY = "availability"


class Scope(enum.StrEnum):
    PRODUCER = "producer"
    CONSUMER = "consumer"
    BROKER = "broker"
    TOPIC = "topic"


class Lookup:
    """One scope's settings as a test sees them: effective values (set, else the
    default), and which of them were set explicitly."""

    def __init__(self, values: Mapping[str, str | None],
                 explicit: Collection[str] | None = None) -> None:
        self._values = values
        self._explicit = set(values if explicit is None else explicit)

    def get(self, name: str) -> str | None:
        return self._values.get(name)

    def explicit(self, *names: str) -> bool:
        """True when any of `names` was set (a client refuses only what it was told)."""
        return any(n in self._explicit for n in names)

    def flag(self, name: str) -> bool:
        return is_true(self.get(name))

    def number(self, name: str, default: float = 0) -> float:
        value = as_number(self.get(name))
        return default if value is None else value


Test = Callable[[str, Lookup], bool]


@dataclass(frozen=True)
class Want:
    """What a goal wants of one property: the text printed, and the test (None: advice)."""

    text: str
    test: Test | None = None


@dataclass(frozen=True)
class Rule:
    scope: Scope
    name: str
    want: Want
    pick: str | None  # the value `--format properties` writes; None: a comment only
    default: str  # Kafka's
    why: str
    settable: bool = True  # False: not a config (a topic's replication factor)

    @property
    def checked(self) -> bool:
        return self.want.test is not None


# ---- values as properties files and DescribeConfigs spell them ------------------------

def is_true(value: str | None) -> bool:
    return value is not None and value.strip().lower() == "true"


def as_number(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return float(value.strip())
    except ValueError:
        return None


def normal(name: str, value: str) -> str:
    """One spelling per meaning: acks -1 is all, the topic's 'uncompressed' is 'none'."""
    v = value.strip().lower()
    if name == "acks" and v == "-1":
        return "all"
    if name == "compression.type" and v == "uncompressed":
        return "none"
    return v


def exactly(value: str, *also: str, text: str | None = None) -> Want:
    accepted = {value.lower(), *(a.lower() for a in also)}

    def test(v: str, _: Lookup) -> bool:
        return v.strip().lower() in accepted

    return Want(text or value, test)


def between(lo: float, hi: float, text: str | None = None) -> Want:
    def test(v: str, _: Lookup) -> bool:
        n = as_number(v)
        return n is not None and lo <= n <= hi

    return Want(text or f"{lo:g}-{hi:g}", test)


def at_least(lo: float, text: str | None = None) -> Want:
    def test(v: str, _: Lookup) -> bool:
        n = as_number(v)
        return n is not None and n >= lo

    return Want(text or f">= {lo:g}", test)


def at_most(hi: float, text: str | None = None) -> Want:
    def test(v: str, _: Lookup) -> bool:
        n = as_number(v)
        return n is not None and n <= hi

    return Want(text or f"<= {hi:g}", test)


def advice(text: str) -> Want:
    return Want(text)


def _acks(*accepted: str) -> Want:
    def test(v: str, _: Lookup) -> bool:
        return normal("acks", v) in accepted

    return Want(accepted[0], test)  # the first is the seed's; the others pass too


def _compressed(v: str, _: Lookup) -> bool:
    return normal("compression.type", v) in ("lz4", "snappy", "zstd", "gzip")


def _in_flight_keeps_order(v: str, s: Lookup) -> bool:
    n = as_number(v)
    # with idempotence the broker reorders nothing up to 5 in flight; without, only 1 is safe
    return n is not None and n <= (5 if s.flag("enable.idempotence") else 1)


def _no_auto_create_or_rf3(v: str, s: Lookup) -> bool:
    return not is_true(v) or s.number("default.replication.factor", 1) >= 3


P, C, B, T = Scope.PRODUCER, Scope.CONSUMER, Scope.BROKER, Scope.TOPIC

_THROUGHPUT = (
    Rule(P, "batch.size", between(100_000, 200_000), "131072", "16384",
         "Records for one partition leave as one batch: fewer, larger requests cut producer "
         "load and broker CPU; costs latency while a batch fills."),
    Rule(P, "linger.ms", between(10, 100), "20", "5",
         "Wait this long for a batch to fill instead of sending at once (the seed's default "
         "was 0); adds up to linger.ms of latency."),
    Rule(P, "compression.type", Want("lz4", _compressed), "lz4", "none",
         "Compression works per batch, so bigger batches compress better: less network and "
         "disk per record (lz4, snappy, zstd, gzip all pass; none is flagged)."),
    Rule(P, "acks", _acks("1", "0"), "1", "all",
         "The sooner the leader acknowledges, the sooner the next batch goes; trade-off: "
         "durability (Kafka's default was 1 in the seed, all since 3.0)."),
    Rule(P, "retries", advice("0 (the seed)"), None, INT_MAX,
         "The seed sets 0: a failed send is dropped, not retried — data loss; modern "
         "clients retry within delivery.timeout.ms, keep that unless loss is acceptable."),
    Rule(P, "buffer.memory", advice("raise with many partitions"), None, "33554432",
         "Unsent batches wait in this buffer; with many partitions it fills and send() "
         "blocks, so raise it together with batch.size and linger.ms."),
    Rule(P, "max.block.ms", advice("bounds the block when buffer.memory is full"), None,
         "60000",
         "How long send() blocks once buffer.memory is full before it fails."),
    Rule(C, "fetch.min.bytes", at_least(50_000, "~100000"), "100000", "1",
         "The broker answers a fetch once this much data is there: fewer fetch requests and "
         "less broker CPU (flagged below 50000)."),
    Rule(C, "fetch.max.wait.ms", advice("the cap on the wait fetch.min.bytes causes"), None,
         "500",
         "A fetch is answered after this long even if fetch.min.bytes has not arrived."),
)

_LATENCY = (
    Rule(P, "linger.ms", exactly("0"), "0", "5",
         "Send each record at once; any linger is added to every record's latency."),
    Rule(P, "compression.type", exactly("none", "uncompressed", text="none"), "none", "none",
         "Compressing and decompressing take time on both ends of every batch."),
    Rule(P, "acks", _acks("1", "0"), "1", "all",
         "Wait for the leader only, not for the followers to copy the write."),
    Rule(C, "fetch.min.bytes", at_most(1, "1"), "1", "1",
         "Answer a fetch as soon as any data is there, never wait for more."),
    Rule(B, "num.replica.fetchers", advice("> 1, raised one at a time"), None, "1",
         "Followers copy with this many threads; with many partitions per broker one "
         "thread delays commits (acks=all) — raise while followers lag."),
)

_DURABILITY = (
    Rule(T, "replication.factor", at_least(3, "3"), "3", "1",
         "Copies on three brokers: a committed write survives the loss of two.",
         settable=False),
    Rule(T, "min.insync.replicas", at_least(2, "2"), "2", "1",
         "An acks=all write is acknowledged only once two replicas have it."),
    Rule(T, "unclean.leader.election.enable", exactly("false"), "false", "false",
         "Never let an out-of-sync replica lead: it would drop committed writes."),
    Rule(P, "acks", _acks("all"), "all", "all",
         "Acknowledge only when every in-sync replica (at least min.insync.replicas) has "
         "the write."),
    Rule(P, "enable.idempotence", exactly("true"), "true", "true",
         "Retries cannot duplicate or reorder: the broker drops a batch it already has "
         "(Confluent's paper; the seed dedupes in the consumer instead)."),
    Rule(P, "retries", at_least(1, ">= 1"), INT_MAX, INT_MAX,
         "Retry a send that hit a transient error instead of losing it (the seed: 1); "
         "retries may duplicate unless enable.idempotence=true."),
    Rule(P, "max.in.flight.requests.per.connection",
         Want("1 (<= 5 with enable.idempotence=true)", _in_flight_keeps_order), "5", "5",
         "A retried request must not land after a later one: 1 in flight keeps order "
         "(the seed); idempotence keeps order up to 5."),
    Rule(C, "enable.auto.commit", exactly("false"), "false", "true",
         "Commit after processing (commitSync/commitAsync, and on revoke in a rebalance "
         "listener) so a crash re-reads records rather than skipping them."),
    Rule(B, "default.replication.factor", at_least(3, "3"), "3", "1",
         "Topics created without a replication factor (auto-created ones too) get 3 copies."),
    Rule(B, "auto.create.topics.enable",
         Want("false (or default.replication.factor=3)", _no_auto_create_or_rf3), "false",
         "true",
         "An auto-created topic gets default.replication.factor copies: turn it off, or "
         "make that 3."),
    Rule(B, "offsets.topic.replication.factor", at_least(3, "3"), "3", "3",
         "The consumer groups' committed offsets (__consumer_offsets) need copies too."),
    Rule(B, "min.insync.replicas", at_least(2, "2"), "2", "1",
         "The default for topics: acks=all waits for two replicas."),
    Rule(B, "unclean.leader.election.enable", exactly("false"), "false", "false",
         "Wait for an in-sync replica rather than lose committed writes; the partition is "
         "unavailable meanwhile."),
    Rule(B, "broker.rack", advice("the broker's rack id"), None, "null",
         "Replicas are spread across racks, so one rack's power loss keeps a copy."),
    Rule(B, "log.flush.interval.messages", advice("leave it; lower for a quiet topic"), None,
         LONG_MAX,
         "Durability comes from replication and the OS flushes the page cache; force fsync "
         "only where a topic is so quiet that the OS flushes it late."),
    Rule(B, "log.flush.interval.ms", advice("leave it; lower for a quiet topic"), None, "null",
         "As log.flush.interval.messages, by time."),
)

_AVAILABILITY = (
    Rule(T, "unclean.leader.election.enable", exactly("true"), "true", "false",
         "With no in-sync replica left, an out-of-sync one leads at once — serving now, "
         "losing what it missed (seed 003's rack-power story)."),
    Rule(T, "min.insync.replicas", at_most(1, "1"), "1", "1",
         "acks=all writes fail when fewer replicas are in sync; a high value turns one "
         "broker's loss into an outage of the partition."),
    Rule(B, "unclean.leader.election.enable", exactly("true"), "true", "false",
         "The cluster default: elect an out-of-sync replica rather than stay down."),
    Rule(B, "min.insync.replicas", at_most(1, "1"), "1", "1",
         "The cluster default: a shrunk ISR keeps taking acks=all writes."),
    Rule(B, "num.recovery.threads.per.data.dir", advice("raise, e.g. to the disks in a RAID"),
         None, "2",
         "A restarted broker scans its logs before serving; more threads per dir load "
         "faster on RAID."),
    Rule(C, "session.timeout.ms", at_most(10_000, "low, 6000-10000"), "10000", "45000",
         "A dead consumer (SIGKILL, hard failure) is noticed after this long; the sooner, "
         "the sooner its partitions move."),
    Rule(C, "max.poll.interval.ms", advice("as low as your processing allows"), None,
         "300000",
         "A consumer that stops polling (long processing, a GC pause: a soft failure) is "
         "removed after this long."),
)

RULES: dict[Goal, tuple[Rule, ...]] = {
    Goal.THROUGHPUT: _THROUGHPUT,
    Goal.LATENCY: _LATENCY,
    Goal.DURABILITY: _DURABILITY,
    Goal.AVAILABILITY: _AVAILABILITY,
}

# What the seed says that no property expresses.
NOTES: dict[Goal, tuple[str, ...]] = {
    Goal.THROUGHPUT: (
        "Partitions are the unit of parallelism: more partitions, more throughput — but "
        "choose the count from the producers' and consumers' throughput, it never shrinks.",
        "More consumers in the group (up to the partition count) fetch in parallel.",
        "JVM clients: tune the garbage collector.",
    ),
    Goal.LATENCY: (
        "Each follower thread replicates many partitions; fewer partitions per broker "
        "(fewer partitions, or more brokers) commit sooner.",
    ),
    Goal.DURABILITY: (
        "With retries and no idempotence, the consumer must drop duplicates.",
    ),
    Goal.AVAILABILITY: (
        "More partitions recover more slowly: producers and consumers of a partition stop "
        "until its new leader is elected.",
    ),
}

# Kafka 4's defaults for the properties the rules and the cross-checks read.
DEFAULTS: dict[Scope, dict[str, str]] = {
    P: {"acks": "all", "enable.idempotence": "true", "batch.size": "16384",
        "linger.ms": "5", "compression.type": "none", "retries": INT_MAX,
        "max.in.flight.requests.per.connection": "5", "buffer.memory": "33554432",
        "max.block.ms": "60000", "delivery.timeout.ms": "120000",
        "request.timeout.ms": "30000"},
    C: {"fetch.min.bytes": "1", "fetch.max.wait.ms": "500", "fetch.max.bytes": "52428800",
        "enable.auto.commit": "true", "session.timeout.ms": "45000",
        "heartbeat.interval.ms": "3000", "max.poll.interval.ms": "300000"},
    B: {"num.replica.fetchers": "1", "default.replication.factor": "1",
        "auto.create.topics.enable": "true", "offsets.topic.replication.factor": "3",
        "min.insync.replicas": "1", "unclean.leader.election.enable": "false",
        "num.recovery.threads.per.data.dir": "2"},
    T: {"min.insync.replicas": "1", "unclean.leader.election.enable": "false",
        "compression.type": "producer"},
}


def rules_for(goal: Goal, scope: Scope | None = None) -> tuple[Rule, ...]:
    """A goal's rules, producer first, then consumer, broker, topic."""
    order = list(Scope)
    chosen = [r for r in RULES[goal] if scope is None or r.scope == scope]
    return tuple(sorted(chosen, key=lambda r: order.index(r.scope)))


# ---- settings that contradict each other, whatever the goal -------------------------

@dataclass(frozen=True)
class Conflict:
    """Settings of one scope (or, with `other`, of two) that cannot all hold."""

    scope: Scope
    names: tuple[str, ...]
    wanted: str
    why: str
    clash: Callable[[Lookup], bool] | None = None
    other: Scope | None = None  # a second scope: `clash2` sees both
    clash2: Callable[[Lookup, Lookup], bool] | None = None


def _n(s: Lookup, name: str) -> float | None:
    return as_number(s.get(name))


def _idempotent_not_all(s: Lookup) -> bool:
    return (s.explicit("enable.idempotence") and s.flag("enable.idempotence")
            and s.explicit("acks") and normal("acks", s.get("acks") or "all") != "all")


def _idempotent_too_many_in_flight(s: Lookup) -> bool:
    return (s.explicit("enable.idempotence") and s.flag("enable.idempotence")
            and s.explicit("max.in.flight.requests.per.connection")
            and s.number("max.in.flight.requests.per.connection") > 5)


def _idempotent_no_retries(s: Lookup) -> bool:
    return (s.explicit("enable.idempotence") and s.flag("enable.idempotence")
            and s.explicit("retries") and s.number("retries", 1) == 0)


def _retries_reorder(s: Lookup) -> bool:
    return (s.explicit("enable.idempotence") and not s.flag("enable.idempotence")
            and s.number("retries") > 0
            and s.number("max.in.flight.requests.per.connection", 5) > 1)


def _delivery_timeout_short(s: Lookup) -> bool:
    names = ("delivery.timeout.ms", "linger.ms", "request.timeout.ms")
    delivery, linger, request = (_n(s, n) for n in names)
    if not s.explicit(*names) or delivery is None or linger is None or request is None:
        return False
    return delivery < linger + request


def _heartbeat_slower_than_session(s: Lookup) -> bool:
    heartbeat, session = _n(s, "heartbeat.interval.ms"), _n(s, "session.timeout.ms")
    return (s.explicit("heartbeat.interval.ms", "session.timeout.ms")
            and heartbeat is not None and session is not None and heartbeat >= session)


def _fetch_min_above_max(s: Lookup) -> bool:
    lo, hi = _n(s, "fetch.min.bytes"), _n(s, "fetch.max.bytes")
    return (s.explicit("fetch.min.bytes", "fetch.max.bytes")
            and lo is not None and hi is not None and lo > hi)


def _min_isr_above(rf_name: str) -> Callable[[Lookup], bool]:
    def clash(s: Lookup) -> bool:
        min_isr, rf = _n(s, "min.insync.replicas"), _n(s, rf_name)
        return min_isr is not None and rf is not None and min_isr > rf

    return clash


def _min_isr_ignored(producer: Lookup, other: Lookup) -> bool:
    acks = normal("acks", producer.get("acks") or "all")
    return acks != "all" and other.number("min.insync.replicas", 1) > 1


def _recompressed(producer: Lookup, topic: Lookup) -> bool:
    wanted = normal("compression.type", topic.get("compression.type") or "producer")
    sent = normal("compression.type", producer.get("compression.type") or "none")
    return wanted not in ("producer", sent)


CONFLICTS: tuple[Conflict, ...] = (
    Conflict(P, ("enable.idempotence", "acks"), "acks=all",
             "Idempotence needs acks=all: the Java producer refuses to start, librdkafka "
             "fails.", _idempotent_not_all),
    Conflict(P, ("enable.idempotence", "max.in.flight.requests.per.connection"), "<= 5",
             "The broker remembers the last 5 batches per producer: more in flight can be "
             "neither deduplicated nor kept in order (the client refuses to start).",
             _idempotent_too_many_in_flight),
    Conflict(P, ("enable.idempotence", "retries"), "retries > 0",
             "An idempotent producer must retry; the Java producer refuses retries=0.",
             _idempotent_no_retries),
    Conflict(P, ("enable.idempotence", "retries", "max.in.flight.requests.per.connection"),
             "max.in.flight.requests.per.connection=1 or enable.idempotence=true",
             "Without idempotence a retried batch can land after a later one: records "
             "reorder within a partition.", _retries_reorder),
    Conflict(P, ("delivery.timeout.ms", "linger.ms", "request.timeout.ms"),
             "delivery.timeout.ms >= linger.ms + request.timeout.ms",
             "A batch must be allowed to linger and then wait for its request; the Java "
             "producer refuses to start.", _delivery_timeout_short),
    Conflict(C, ("heartbeat.interval.ms", "session.timeout.ms"),
             "heartbeat.interval.ms < session.timeout.ms (about a third)",
             "A member that heartbeats less often than its session timeout is declared dead "
             "between two heartbeats.", _heartbeat_slower_than_session),
    Conflict(C, ("fetch.min.bytes", "fetch.max.bytes"), "fetch.min.bytes <= fetch.max.bytes",
             "A fetch can never gather fetch.min.bytes, so every fetch waits "
             "fetch.max.wait.ms.", _fetch_min_above_max),
    Conflict(T, ("min.insync.replicas", "replication.factor"),
             "min.insync.replicas <= replication.factor",
             "acks=all writes need more in-sync replicas than the partition has: every one "
             "fails with NOT_ENOUGH_REPLICAS.", _min_isr_above("replication.factor")),
    Conflict(B, ("min.insync.replicas", "default.replication.factor"),
             "min.insync.replicas <= default.replication.factor",
             "Topics created with the default replication factor refuse every acks=all "
             "write (NOT_ENOUGH_REPLICAS).", _min_isr_above("default.replication.factor")),
    Conflict(P, ("acks", "min.insync.replicas"), "acks=all",
             "min.insync.replicas guards only acks=all writes; this producer's writes are "
             "acknowledged by the leader alone.", other=T, clash2=_min_isr_ignored),
    Conflict(P, ("acks", "min.insync.replicas"), "acks=all",
             "The brokers' min.insync.replicas guards only acks=all writes; this producer's "
             "writes are acknowledged by the leader alone.", other=B,
             clash2=_min_isr_ignored),
    Conflict(P, ("compression.type", "compression.type"),
             "the topic's compression.type=producer or the producer's codec",
             "The broker decompresses and recompresses every batch this producer sends: "
             "broker CPU spent for nothing.", other=T, clash2=_recompressed),
)
