"""Pattern matching over the IR: ``Pat``, ``PatternMatcher`` and ``graph_rewrite``."""

from .matcher import PatternMatcher, Rule, graph_rewrite
from .pat import Pat, scalar_value

__all__ = ["Pat", "PatternMatcher", "Rule", "graph_rewrite", "scalar_value"]
