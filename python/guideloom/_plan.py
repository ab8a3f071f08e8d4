"""The Rust loader's epoch plan and its weighted mixtures (the Rust classes; typed in
``_plan.pyi``)."""

from guideloom._guideloom import EpochPlan, Mixture

__all__ = ["EpochPlan", "Mixture"]
