"""IO backends a storage reads through (``read_interface=``).

* :class:`SeekIO` (default): seek + read, portable.
* :class:`PosixPreadIO`: positioned reads (``pread``), no shared file offset.
* :class:`MmapIO`: memory-mapped shards; raw records are slices of the mapping.
* :class:`HttpIO`: HTTP range requests below a base URL (the storage's directory).

Each has ``is_supported()``, true when it works on this platform. The Rust crate's names are
aliases of the same classes: ``SeekIo``, ``PreadIo``, ``MmapIo``, ``HttpIo`` (the table of
names is in ``docs/python.md``).
"""

from __future__ import annotations

from guideloom._guideloom import HttpIO, MmapIO, PosixPreadIO, SeekIO

SeekIo = SeekIO
PreadIo = PosixPreadIO
MmapIo = MmapIO
HttpIo = HttpIO

__all__ = ["HttpIO", "HttpIo", "MmapIO", "MmapIo", "PosixPreadIO", "PreadIo", "SeekIO", "SeekIo"]
