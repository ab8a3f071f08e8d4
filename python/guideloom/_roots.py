"""Dataset roots: :class:`Root` (the store resolved once, the root's operations as methods),
the module-level functions that are a :class:`Root` of one call, :class:`Dataset`, and what
publishing returns. The Rust classes; typed in ``_roots.pyi``."""

from guideloom._guideloom import (
    Dataset,
    DatasetIter,
    PublicationOptions,
    ReadAheadIter,
    RecordHtml,
    Root,
    ShardRef,
    Snapshot,
    adopt_array_record,
    convert_stream_storage,
    open,
    publish,
    publish_annotations,
    write_shard,
)

__all__ = [
    "Dataset",
    "DatasetIter",
    "PublicationOptions",
    "ReadAheadIter",
    "RecordHtml",
    "Root",
    "ShardRef",
    "Snapshot",
    "adopt_array_record",
    "convert_stream_storage",
    "open",
    "publish",
    "publish_annotations",
    "write_shard",
]
