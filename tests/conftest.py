"""Suite-wide settings: every compile in the tests verifies the graph after every pass (DESIGN §5)."""

import os

os.environ.setdefault("NG_CHECK", "1")
