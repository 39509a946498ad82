"""Where the app keeps its files (platformdirs): settings, session journals, logs, resources."""

from __future__ import annotations

from pathlib import Path

import platformdirs

from app import APP_NAME


def config_dir() -> Path:
    """The user's config folder for livecap (created when missing)."""
    return platformdirs.user_config_path(APP_NAME, appauthor=False, ensure_exists=True)


def settings_file() -> Path:
    """The INI file that backs ``app.settings.Settings``."""
    return config_dir() / "settings.ini"


def journal_dir() -> Path:
    """The folder of session journals (one JSONL file per session; created when missing)."""
    path = platformdirs.user_data_path(APP_NAME, appauthor=False, ensure_exists=True) / "sessions"
    path.mkdir(parents=True, exist_ok=True)
    return path


def log_dir() -> Path:
    """The folder of the app's log file (created when missing)."""
    return platformdirs.user_log_path(APP_NAME, appauthor=False, ensure_exists=True)


def documents_dir() -> Path:
    """The default export folder: the user's Documents folder, or home when it does not exist."""
    docs = platformdirs.user_documents_path()
    return docs if docs.is_dir() else Path.home()


def resources_dir() -> Path:
    """The ``resources/`` folder next to the ``app`` package (style sheets, icons)."""
    return Path(__file__).resolve().parent.parent / "resources"
