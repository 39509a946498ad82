"""The livecap desktop application (PySide6): windows, dialogs, audio capture, the engine worker thread.

Nothing here does model math; everything that turns audio into captions lives in ``engine``.
"""

from app.qtcompat import pin_singletons

APP_NAME = "livecap"
APP_ORG = "livecap"

SINGLETONS_PINNED = pin_singletons()  # PySide6 6.12.0 on CPython 3.11 refcount defect: app/qtcompat.py
