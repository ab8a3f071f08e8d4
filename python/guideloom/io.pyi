# Stubs of the IO backends (Rust: crates/guideloom-python/src/io.rs). The seed names (`SeekIO`,
# ...) are the classes; the Rust names (`SeekIo`, ...) are aliases of them (docs/python.md).

from typing import Self, TypeAlias, final

@final
class SeekIO:
    def __new__(cls) -> Self: ...
    @staticmethod
    def is_supported() -> bool: ...

@final
class PosixPreadIO:
    def __new__(cls) -> Self: ...
    @staticmethod
    def is_supported() -> bool: ...

@final
class MmapIO:
    def __new__(cls) -> Self: ...
    @staticmethod
    def is_supported() -> bool: ...

@final
class HttpIO:
    def __new__(cls) -> Self: ...
    @staticmethod
    def is_supported() -> bool: ...

_ReadInterface: TypeAlias = SeekIO | PosixPreadIO | MmapIO | HttpIO

SeekIo = SeekIO
PreadIo = PosixPreadIO
MmapIo = MmapIO
HttpIo = HttpIO

__all__ = ["HttpIO", "HttpIo", "MmapIO", "MmapIo", "PosixPreadIO", "PreadIo", "SeekIO", "SeekIo"]
