"""Compiler passes and the per-transformer pipeline."""

from .linearize import linearize
from .pipeline import CompiledGraph, compile_graph

__all__ = ["CompiledGraph", "compile_graph", "linearize"]
