"""DocumentStorage and its readers and writers (the Rust classes; typed in ``_documents.pyi``)."""

from guideloom._guideloom import (
    AsyncDocumentReader,
    AsyncDocumentReaderContext,
    DocumentIter,
    DocumentReader,
    DocumentStorage,
    DocumentWriter,
)

__all__ = [
    "AsyncDocumentReader",
    "AsyncDocumentReaderContext",
    "DocumentIter",
    "DocumentReader",
    "DocumentStorage",
    "DocumentWriter",
]
