"""`python -m emulator serve ...`: the same command line as `ptc-emulator`.

This module is the process entry point, so it may reach up to `api` (the composition root); the
import-linter contract names it as the one exception to the layers.
"""

from api.cli import main

if __name__ == "__main__":
    main()
