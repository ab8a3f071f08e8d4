"""What the far-store benchmarks share: the `far_link` example's binary."""

from __future__ import annotations

import os
from pathlib import Path


def far_link() -> str:
    """The far_link example's binary (GUIDELOOM_FAR_LINK, else the release build's path)."""
    given = os.environ.get("GUIDELOOM_FAR_LINK")
    if given:
        return given
    root = Path(__file__).resolve().parents[2]
    target = Path(os.environ.get("CARGO_TARGET_DIR", root / "target"))
    return str(target / "release" / "examples" / "far_link")
