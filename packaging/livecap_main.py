"""PyInstaller entry point: the same as the ``livecap`` console script (``app.main:main``).

A frozen app has no separate Python to run ``python -m engine.hub_worker``, so the model download child process is
this same executable started with ``engine.hub.WORKER_FLAG`` (``engine.hub._worker_command``); it runs the
worker and never loads Qt. A started CPU twin (``engine.backends.twin_child``, where there is no fork) comes the
same way, with its own flag.
"""

import sys

if __name__ == "__main__":
    if sys.argv[1:2] == ["--livecap-hub-worker"]:  # engine.hub.WORKER_FLAG
        from engine.hub_worker import main as hub_worker

        sys.exit(hub_worker())
    if sys.argv[1:2] == ["--livecap-cpu-twin"]:  # engine.backends.twin_spawn.FLAG
        from engine.backends.twin_child import main as cpu_twin

        sys.exit(cpu_twin())
    from app.main import main

    sys.exit(main())
