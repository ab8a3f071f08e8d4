"""`guideloom.torch` imports without PyTorch, and its classes then raise ImportError."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
sys.modules["torch"] = None  # as if torch were not installed
import guideloom.torch as gt
for make in (
    lambda: gt.Dataset("/nonexistent"),
    lambda: gt.IterableDataset("/nonexistent", batch_size=2),
    lambda: gt.PackedTokens("/nonexistent", seq_len=8, batch_size=2),
):
    try:
        make()
    except ImportError as error:
        assert "needs PyTorch" in str(error), error
    else:
        raise SystemExit("no ImportError")
print("ok")
"""


def test_without_torch_the_module_imports_and_its_classes_raise_import_error() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
