"""The plumbing the storage and shard wrappers share: context managers, Python index
arithmetic, slices and chunked iteration over documents or elements, and the numpy view of
element bytes. Each wrapper keeps its Rust half in ``self._raw``.
"""

from __future__ import annotations

import operator
from collections.abc import Awaitable, Callable, Iterable, Iterator
from types import TracebackType
from typing import (
    TYPE_CHECKING,
    Any,
    Generic,
    Literal,
    Protocol,
    Self,
    SupportsIndex,
    TypeVar,
    overload,
)

from guideloom.exceptions import IndexOutOfRangeError

if TYPE_CHECKING:
    import numpy as np

#: Documents (or records) read per batch while iterating.
ITER_CHUNK = 1024

#: Elements read per window while iterating a stream.
ELEMENT_CHUNK = 1 << 16

D = TypeVar("D")
R = TypeVar("R", bound="_Closable")


class _Closable(Protocol):
    def close(self) -> None: ...


class _RawWriter(Protocol):
    def finish(self) -> object: ...

    def abort(self) -> None: ...


def resolve(index: SupportsIndex, n: int, item: str = "document", sequence: str = "storage") -> int:
    """A Python index (any integer, numpy's included; negative from the end) as a position in
    ``0..n``, or ``IndexOutOfRangeError`` naming the ``item`` and the ``sequence`` it is
    missing from, however large the index. A non-integer is a ``TypeError``."""
    index = operator.index(index)
    resolved = index + n if index < 0 else index
    if not 0 <= resolved < n:
        raise IndexOutOfRangeError(
            f"{item} {index} is out of range for a {sequence} of {n} {item}s", index=index, len=n
        )
    return resolved


def check_range(
    offset: SupportsIndex, length: SupportsIndex, n: int, item: str = "element"
) -> tuple[int, int]:
    """``offset`` and ``length`` (any integers) as a range inside ``0..n``, or
    ``IndexOutOfRangeError`` (a negative offset or length, or a range past the end, however
    large)."""
    start, count = operator.index(offset), operator.index(length)
    if start < 0 or count < 0 or start + count > n:
        raise IndexOutOfRangeError(
            f"{item}s {start}..{start + count} are out of range for a stream of {n} {item}s",
            index=start,
            len=n,
        )
    return start, count


def as_array(data: Any, dtype: np.dtype[Any]) -> np.ndarray[Any, np.dtype[Any]]:
    """Element bytes as a read-only numpy view (no copy)."""
    import numpy as np

    return np.frombuffer(memoryview(data), dtype=dtype)


class FinishOnExit:
    """A writer as a context manager: leaving the block finishes it, leaving it by an
    exception aborts it (its unfinished shard is discarded)."""

    _raw: _RawWriter

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> Literal[False]:
        if kind is not None:
            self._raw.abort()
        else:
            self._raw.finish()
        return False


class CloseOnExit:
    """A reader with ``close()`` (releasing the shards; later reads raise) and, as a context
    manager, closed on leaving the block."""

    _raw: _Closable

    def close(self) -> None:
        """Releases the shards; later reads raise."""
        self._raw.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *args: object) -> Literal[False]:
        self.close()
        return False


class DocumentReads(Generic[D]):
    """``[i]``, ``[a:b]``, ``len()`` and in-order iteration in batches, over ``read(i)``,
    ``read_many(indices)`` and ``len()``."""

    def read(self, index: SupportsIndex) -> D:
        raise NotImplementedError

    def read_many(self, indices: Iterable[SupportsIndex]) -> list[D]:
        raise NotImplementedError

    def len(self) -> int:
        raise NotImplementedError

    def __len__(self) -> int:
        return self.len()

    @overload
    def __getitem__(self, key: SupportsIndex) -> D: ...

    @overload
    def __getitem__(self, key: slice) -> list[D]: ...

    def __getitem__(self, key: SupportsIndex | slice) -> D | list[D]:
        if isinstance(key, slice):
            return self.read_many(range(*key.indices(self.len())))
        return self.read(key)

    def __iter__(self) -> Iterator[D]:
        n = self.len()
        for start in range(0, n, ITER_CHUNK):
            yield from self.read_many(range(start, min(n, start + ITER_CHUNK)))


class ElementReads:
    """``[i]``, ``[a:b]`` (one read of the window a slice spans, then a strided view),
    ``len()`` and iteration in windows, over ``read(offset, length)`` and ``len()``."""

    def read(self, offset: SupportsIndex, length: SupportsIndex) -> np.ndarray[Any, np.dtype[Any]]:
        raise NotImplementedError

    def len(self) -> int:
        raise NotImplementedError

    def __len__(self) -> int:
        return self.len()

    def _position(self, key: SupportsIndex, n: int) -> int:
        """Element ``key`` (negative from the end) as a position in ``0..n``."""
        return resolve(key, n, "element", "stream")

    def __getitem__(self, key: slice | SupportsIndex) -> Any:
        n = self.len()
        if isinstance(key, slice):
            wanted = range(*key.indices(n))
            if not wanted:
                return self.read(0, 0)
            lo, hi = min(wanted[0], wanted[-1]), max(wanted[0], wanted[-1]) + 1
            window = self.read(lo, hi - lo)
            return window if wanted.step == 1 else window[wanted[0] - lo :: wanted.step]
        return self.read(self._position(key, n), 1)[0]

    def __iter__(self) -> Iterator[Any]:
        n = self.len()
        for start in range(0, n, ELEMENT_CHUNK):
            yield from self.read(start, min(ELEMENT_CHUNK, n - start))


class AsyncReaderContext(Generic[R]):
    """``async with storage.async_reader() as reader``: opened on entry, closed on exit."""

    def __init__(self, opening: Callable[[], Awaitable[R]]) -> None:
        self._opening = opening
        self._reader: R | None = None

    async def __aenter__(self) -> R:
        self._reader = await self._opening()
        return self._reader

    async def __aexit__(self, *args: object) -> Literal[False]:
        if self._reader is not None:
            self._reader.close()
        return False
