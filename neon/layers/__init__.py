"""neon layers (every one builds ngraph ops)."""

from .base import Layer, LayerError, is_training, training_mode

__all__ = ["Layer", "LayerError", "is_training", "training_mode"]
