"""``python -m neon``: the ``neon`` command (``neon.cli.neon_main``)."""

import sys

from neon.cli.neon_main import main

if __name__ == "__main__":
    sys.exit(main())
