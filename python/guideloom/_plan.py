"""The Rust loader's epoch plan and the packing of token streams into training windows (the
Rust classes; typed in ``_plan.pyi``)."""

from guideloom._guideloom import EpochPlan, Packing

__all__ = ["EpochPlan", "Packing"]
