"""Cost of registry ACLs: `python bench/registry_acls.py`.

What authorization adds to a request, in-process (no HTTP, no Kafka): one check (a
subject request) and a `GET /subjects` listing, which checks every subject, at 1, 1,000
and 10,000 subjects with as many ACLs for the asking user (literal, one per subject: the
worst case, since each check scans the user's ACLs) and 10 for others.
"""

from __future__ import annotations

import time

from odradek.registry.acls import SUBJECT, AclState, RegistryAcl, RegistryAuthorizer


def build(subjects: int) -> tuple[RegistryAuthorizer, list[str]]:
    state = AclState()
    names = [f"topic-{n}-value" for n in range(subjects)]
    acls = [RegistryAcl("User:alice", SUBJECT, s, "READ") for s in names]
    acls += [RegistryAcl(f"User:other{n}", SUBJECT, "*", "READ") for n in range(10)]
    for acl in acls:
        state.put(acl, True)
    return RegistryAuthorizer(state), names


def measure(n: int) -> tuple[float, float]:
    """Seconds for one check (of the last subject) and for one filtered listing."""
    authz, names = build(n)
    last = names[-1]
    repeat = max(1, 20_000 // n)
    start = time.perf_counter()
    for _ in range(repeat):
        authz.allowed("alice", "DESCRIBE", SUBJECT, last)
    check = (time.perf_counter() - start) / repeat
    repeat = max(5, 1_000 // n)
    start = time.perf_counter()
    for _ in range(repeat):
        shown = [s for s in names if authz.allowed("alice", "DESCRIBE", SUBJECT, s)]
    listing = (time.perf_counter() - start) / repeat
    assert len(shown) == n
    return check, listing


def main() -> None:
    print(f"{'subjects=ACLs':>14} {'one check (us)':>15} {'listing (ms)':>13}")
    for n in (1, 1_000, 10_000):
        check, listing = measure(n)
        print(f"{n:>14,} {check * 1e6:>15.1f} {listing * 1e3:>13.2f}")


if __name__ == "__main__":
    main()
