"""PyInstaller entry point: the same as the ``livecap`` console script (``app.main:main``)."""

import sys

from app.main import main

if __name__ == "__main__":
    sys.exit(main())
