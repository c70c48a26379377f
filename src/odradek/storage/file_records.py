"""`FileRecords`: whole batches of a fetch left where they are, in the segment file.

Kafka answers a Fetch with slices of its `.log` files and sends them with sendfile: a
consumer reading 50 MB costs the broker no 50 MB of heap, and a client that never
reads its socket costs one response. A `FileRecords` is such a slice — the file, a
position and a size — handed up through the replica manager to the connection, which
sends it with `os.sendfile` on a plaintext socket or copies it in bounded chunks under
TLS. Nothing here touches a socket.

The slice names the segment's `PooledFile`: a sender leases it for each sendfile call
(the descriptor budget may close it between calls; it reopens by name, and follows a
rename to `.deleted`), or holds a duplicate of its descriptor with `open()` while it
copies (the bytes stay readable even if the file is unlinked meanwhile). A file gone
for good (a deleted partition) or cut short (a truncation) makes the send fail, and
the connection is closed, as Kafka's FileRecords.writeTo throws.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from odradek.storage.file_handles import PooledFile

CHUNK = 256 * 1024  # what `chunks` reads at a time (a TLS listener's copy)


class FileRecords:
    """`size` bytes of whole batches at `position` of a `.log` file."""

    __slots__ = ("_next_offset", "file", "position", "size")

    def __init__(self, file: PooledFile, position: int, size: int,
                 next_offset: Callable[[], int | None]) -> None:
        self.file = file
        self.position = position
        self.size = size
        self._next_offset = next_offset

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"FileRecords({self.file.path}, position={self.position}, size={self.size})"

    def next_offset(self) -> int | None:
        """The offset after the last batch of the slice (read_committed fetches ask it,
        to know which aborted transactions the slice overlaps)."""
        return self._next_offset()

    def open(self) -> int:
        """A descriptor of the file of its own (close it when done)."""
        with self.file as fd:
            return os.dup(fd)

    def read(self) -> bytes:
        """The bytes, read whole (for tests and tools, never on a fetch's path)."""
        return b"".join(self.chunks(self.size))

    def chunks(self, chunk: int = CHUNK) -> ChunkReader:
        return ChunkReader(self, chunk)


class ChunkReader:
    """Iterate over a slice's bytes `chunk` at a time from a descriptor of its own."""

    def __init__(self, records: FileRecords, chunk: int) -> None:
        self._records = records
        self._chunk = chunk
        self._done = 0
        self._fd = -1

    def __iter__(self) -> ChunkReader:
        return self

    def __next__(self) -> bytes:
        records = self._records
        if self._done >= records.size:
            self.close()
            raise StopIteration
        if self._fd < 0:
            self._fd = records.open()
        want = min(self._chunk, records.size - self._done)
        data = os.pread(self._fd, want, records.position + self._done)
        if not data:
            self.close()
            raise EOFError(f"{records.file.path} was cut short while it was read: "
                           f"{records.size - self._done} bytes of the slice are gone")
        self._done += len(data)
        return data

    def close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)

    def __del__(self) -> None:
        self.close()
