"""PyInstaller entry point: the same as the ``livecap`` console script (``app.main:main``).

A frozen app has no separate Python to run ``python -m engine.hub_worker``, so the model download child process is
this same executable started with ``engine.hub.WORKER_FLAG`` (``engine.hub._worker_command``); it runs the
worker and never loads Qt.
"""

import sys

if __name__ == "__main__":
    if sys.argv[1:2] == ["--livecap-hub-worker"]:  # engine.hub.WORKER_FLAG
        from engine.hub_worker import main as hub_worker

        sys.exit(hub_worker())
    from app.main import main

    sys.exit(main())
