"""Reverse-mode autodiff: the rule table, the reverse walk and its entry points.

``custom_gradient`` is defined with the API (``api/custom.py``: it builds an op) and
re-exported here, where users look for it; autodiff reads its registry, never the reverse.
"""

from ..api.custom import custom_gradient
from .gradient import deriv, gradients
from .rules import RULES

__all__ = ["RULES", "custom_gradient", "deriv", "gradients"]
