"""Pictures of graphs and computations: ``render``/``to_dot`` (Graphviz) and ``memory_plot`` (matplotlib)."""

from .memory import memory_plot
from .render import FORMATS, GROUPINGS, HIGHLIGHT_COLOR, VizError, render, to_dot

__all__ = ["memory_plot", "render", "to_dot", "VizError", "FORMATS", "GROUPINGS", "HIGHLIGHT_COLOR"]
