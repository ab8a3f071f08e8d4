"""Record formats and the zero-copy record buffer (the Rust classes; typed in ``_records.pyi``)."""

from guideloom._guideloom import Bytes, CborFormat, DocumentPickleFormat, RawFormat

__all__ = ["Bytes", "CborFormat", "DocumentPickleFormat", "RawFormat"]
