"""A GitOps reconciler for PaletteAI compute."""

__version__ = "0.1.0"
