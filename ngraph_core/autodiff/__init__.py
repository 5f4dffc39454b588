"""Reverse-mode autodiff: the rule table and the reverse walk."""

from .custom import custom_gradient
from .gradient import deriv, gradients
from .rules import RULES

__all__ = ["RULES", "custom_gradient", "deriv", "gradients"]
