"""CSS-like selectors over graphs (docs/selectors.md): ``select(source, "Conv > Pool variable")`` -> ``Selection``."""

from .checks import UNKNOWN_TYPES, check_layer_types
from .match import GROUPS, GraphIndex
from .parser import AttrTest, Complex, Compound, LabelTest, NameTest, Pseudo, SelectorList, parse
from .selection import TAP_ATTR, ScopeMatch, Selection, TapHandle, select, tap_value

__all__ = [
    "GROUPS", "GraphIndex", "AttrTest", "Complex", "Compound", "LabelTest", "NameTest", "Pseudo", "SelectorList",
    "parse", "TAP_ATTR", "ScopeMatch", "Selection", "TapHandle", "select", "tap_value", "UNKNOWN_TYPES",
    "check_layer_types",
]
