"""Compiler passes and the per-transformer pipeline."""

from .linearize import linearize
from .memory import MemoryPlan, MemoryReport
from .pipeline import CompiledGraph, compile_graph

__all__ = ["CompiledGraph", "MemoryPlan", "MemoryReport", "compile_graph", "linearize"]
