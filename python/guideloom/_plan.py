"""The Rust loader's epoch plan (the Rust class; typed in ``_plan.pyi``)."""

from guideloom._guideloom import EpochPlan

__all__ = ["EpochPlan"]
