"""Resolving the asyncio futures of the Rust core (called on the loop's thread)."""

from __future__ import annotations

import asyncio
from typing import Any


def resolve(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    """Sets `future`'s result (`ok`) or exception, unless it was cancelled meanwhile."""
    if future.done():
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)
