"""IO backends a storage reads through (``read_interface=``).

* :class:`SeekIO` (default): seek + read, portable.
* :class:`PosixPreadIO`: positioned reads (``pread``), no shared file offset.
* :class:`MmapIO`: memory-mapped shards; raw records are slices of the mapping.
* :class:`HttpIO`: HTTP range requests below a base URL (the storage's directory).

Each has ``is_supported()``, true when it works on this platform.
"""

from __future__ import annotations

from guideloom._guideloom import HttpIO, MmapIO, PosixPreadIO, SeekIO

__all__ = ["HttpIO", "MmapIO", "PosixPreadIO", "SeekIO"]
