"""Hub access through huggingface_hub (HF_HOME, HF_ENDPOINT and HF_HUB_OFFLINE are honoured by it)."""

from __future__ import annotations

from pathlib import Path

from .errors import ModelError

# Files the engine reads; everything else in a repo (other weight formats, ONNX, images) is skipped.
ALLOW_PATTERNS = ["*.json", "*.safetensors", "tekken.json", "*.model"]


def fetch_model(repo_id: str, revision: str | None = None) -> Path:
    """The local snapshot folder of ``repo_id``, downloading missing files into the HF cache."""
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import (
            GatedRepoError,
            LocalEntryNotFoundError,
            RepositoryNotFoundError,
            RevisionNotFoundError,
        )
    except ImportError as e:  # pragma: no cover - a dependency
        raise ModelError("huggingface_hub is not installed; give a local model folder instead.") from e
    try:
        return Path(snapshot_download(repo_id, revision=revision, allow_patterns=ALLOW_PATTERNS))
    except GatedRepoError as e:
        raise ModelError(f"The model {repo_id} is gated: accept its terms on the hub and log in with a token.") from e
    except (RepositoryNotFoundError, RevisionNotFoundError) as e:
        raise ModelError(f"The model {repo_id} was not found on the hub (or needs a token).") from e
    except LocalEntryNotFoundError as e:
        raise ModelError(f"The model {repo_id} is not downloaded and the hub cannot be reached.") from e
    except OSError as e:
        raise ModelError(f"Downloading {repo_id} failed: {e}.") from e
