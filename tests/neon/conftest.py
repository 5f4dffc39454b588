"""Make ``layer_helper`` importable by plain name from tests/neon and its subfolders."""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
