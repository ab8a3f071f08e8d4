"""The Rust halves of the numpy-typed storages (``_streams.py``, ``_stream_meta.py``,
``_filesystem.py``); typed in ``_raw.pyi``. Not public: use the wrappers."""

from guideloom._guideloom import (
    RawAsyncStreamMetaReader,
    RawAsyncStreamReader,
    RawFileSystem,
    RawShard,
    RawShardWriter,
    RawStreamMetaReader,
    RawStreamMetaStorage,
    RawStreamMetaWriter,
    RawStreamReader,
    RawStreamStorage,
    RawStreamWriter,
)

__all__ = [
    "RawAsyncStreamMetaReader",
    "RawAsyncStreamReader",
    "RawFileSystem",
    "RawShard",
    "RawShardWriter",
    "RawStreamMetaReader",
    "RawStreamMetaStorage",
    "RawStreamMetaWriter",
    "RawStreamReader",
    "RawStreamStorage",
    "RawStreamWriter",
]
