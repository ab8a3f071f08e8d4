"""The Rust loader's epoch plan, its weighted mixtures and the packing of token streams into
training windows (the Rust classes; typed in ``_plan.pyi``)."""

from guideloom._guideloom import EpochPlan, Mixture, Packing

__all__ = ["EpochPlan", "Mixture", "Packing"]
