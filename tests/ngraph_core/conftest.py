"""Make ``op_helper`` (and ``test_ops``' table) importable by plain name under any pytest import mode."""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
