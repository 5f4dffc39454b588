"""Pattern matching over the IR: ``Pat``, ``PatternMatcher``, ``graph_rewrite`` and rule sugar."""

from .helpers import pat, type_preserving
from .matcher import PatternMatcher, Rule, graph_rewrite
from .pat import Pat, scalar_value

__all__ = ["Pat", "PatternMatcher", "Rule", "graph_rewrite", "pat", "scalar_value", "type_preserving"]
