"""Keeping a root: ``gc`` (retention and garbage collection) as a module-level function, a
:class:`~guideloom.Root` of one call (``gl.gc(root, ...)`` is ``gl.Root(root).gc(...)``)."""

from __future__ import annotations

from os import PathLike
from typing import Any

from guideloom._roots import Root


def gc(
    root: str | PathLike[str],
    *,
    keep_last: int = 1,
    keep_younger_than: float | None = None,
    keep_annotated: bool = True,
    grace: float = 604800.0,
    dry_run: bool = False,
) -> dict[str, Any]:
    """Garbage-collects ``root`` under a retention policy (see :meth:`Root.gc`).

    Keeps the newest ``keep_last`` snapshots, those younger than ``keep_younger_than``
    seconds, every tagged one and (``keep_annotated``) every annotated one; the others
    expire, and what nothing kept references, at least ``grace`` seconds old, is deleted.
    ``dry_run=True`` writes nothing and reports what would go.
    """
    return Root(root).gc(
        keep_last=keep_last,
        keep_younger_than=keep_younger_than,
        keep_annotated=keep_annotated,
        grace=grace,
        dry_run=dry_run,
    )


__all__ = ["gc"]
