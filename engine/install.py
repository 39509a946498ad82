"""Installing a model from the hub: what is on disk (``local_state``), whether a folder is a usable model
(``snapshot_problem``), and ``install_model`` / ``fetch_model``, which download through ``engine.hub``.

How an install works (``install_model``):
1. the plan (``hub.plan_download``): the file list with sizes, filtered by the catalog's ``allow_patterns``,
   pinned to one commit; a repo id the hub does not know is retried under its aliases, and a pinned revision the
   hub does not have (never checked, or a rewritten history) falls back to the default branch with a warning in
   the log, so a pin never makes a first download fail;
2. the free disk space is checked before anything is written;
3. ``hub.transfer`` fetches what is missing (resuming kept partial bytes), the files that mark a folder as a
   model last, so an unfinished download never looks like a model;
4. the snapshot is checked (``engine.formats.detect``, the weight headers, the tokenizer); one that fails is
   removed again and the sentence raised.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from . import hub
from .errors import ModelError
from .formats import detect
from .weights import open_checkpoint

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------------------
# Local state


def check_files(folder: str | os.PathLike) -> tuple[str, str]:
    """``(family, dialect)`` when ``folder`` holds a complete model on disk; else ModelError with one sentence.

    Checks the config (``engine.formats.detect``), the safetensors headers against the file sizes (a truncated
    download fails here) and the tokenizer file; it does not build the model (``engine.loader.check_folder``).
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise ModelError(f"The model folder {folder} does not exist.")
    family, dialect, _ = detect(folder)
    open_checkpoint(folder, "consolidated" if dialect == "mistral" else "model")
    tokenizer = "tokenizer.json" if family == "moonshine_streaming" else "tekken.json"
    if not (folder / tokenizer).is_file():
        raise ModelError(f"The model folder {folder} has no {tokenizer}.")
    return family, dialect


def snapshot_problem(folder: Path, required: Sequence[str] = ()) -> str:
    """``""`` when ``folder`` holds every required file and passes ``check_files``; else one sentence."""
    missing = [name for name in required if not (folder / name).is_file()]
    if missing:
        return f"The file {missing[0]} is missing from the downloaded model."
    try:
        check_files(folder)
    except ModelError as e:
        return str(e)
    return ""


@dataclass(frozen=True)
class LocalModel:
    """The local state of a model (under its id or one of its aliases).

    ``complete``: ``path`` is a snapshot the loader accepts. Otherwise ``problem`` says why not, and
    ``partial_bytes`` tells how much of it is on disk for a download to continue from."""

    repo_id: str
    commit: str | None
    path: Path | None
    size_on_disk: int
    partial_bytes: int
    complete: bool
    problem: str = ""


def local_state(
    repo_ids: str | Sequence[str],
    revision: str | None = None,
    required: Sequence[str] = (),
    scans: dict[str, hub.RepoScan] | None = None,
) -> LocalModel | None:
    """What is on disk for a model; None when nothing of it is cached. No network.

    Among the cached snapshots the pinned ``revision`` wins, then ``refs/main``, then the newest; a copy at
    another revision (downloaded by another tool, say) still counts as installed when the loader accepts it.
    """
    ids = [repo_ids] if isinstance(repo_ids, str) else list(repo_ids)
    scans = hub.scan_models() if scans is None else scans
    best: LocalModel | None = None
    for rid in ids:
        s = scans.get(rid.lower())
        if s is None:
            continue
        order: list[str] = []
        if revision and revision in s.revisions:
            order.append(revision)
        if "main" in s.refs and s.refs["main"] in s.revisions:
            order.append(s.refs["main"])
        order += sorted(s.revisions, key=lambda c: -s.last_modified.get(c, 0.0))
        first_problem = ""
        for commit in dict.fromkeys(order):
            path = s.revisions[commit]
            problem = snapshot_problem(path, required)
            if not problem:
                return LocalModel(s.repo_id, commit, path, s.size_on_disk, s.partial_bytes, True)
            first_problem = first_problem or problem
        if best is None:
            commit = order[0] if order else None
            # nothing usable: the finished files of an unfinished download count as partial too
            best = LocalModel(
                s.repo_id,
                commit,
                s.revisions.get(commit) if commit else None,
                s.size_on_disk,
                s.partial_bytes + s.size_on_disk,
                False,
                first_problem or "The download is not finished.",
            )
    return best


# ---------------------------------------------------------------------------------------------------------
# Installing


def _plan(
    repo_id: str,
    aliases: Sequence[str],
    revision: str | None,
    allow_patterns: Sequence[str] | None,
    token: str | None,
    pin_fallback: bool,
) -> hub.Plan:
    ids = [repo_id, *aliases]
    for i, rid in enumerate(ids):
        try:
            try:
                return hub.plan_download(rid, revision=revision, allow_patterns=allow_patterns, token=token)
            except hub.RevisionMissingError:
                if not (pin_fallback and revision):
                    raise
                log.warning(
                    "The pinned revision %s of %s is not on the hub; downloading its default branch instead.",
                    revision,
                    rid,
                )
                return hub.plan_download(rid, revision=None, allow_patterns=allow_patterns, token=token)
        except hub.ModelNotFoundError:
            if i == len(ids) - 1:
                raise
    raise AssertionError("unreachable")


def install_model(
    repo_id: str,
    *,
    revision: str | None = None,
    allow_patterns: Sequence[str] | None = None,
    token: str | None = None,
    progress: hub.ProgressCallback | None = None,
    cancel: hub.CancelToken | None = None,
    aliases: Sequence[str] = (),
    required: Sequence[str] = (),
    validate: bool = True,
    pin_fallback: bool = True,
) -> Path:
    """Download what is missing of ``repo_id`` and return its snapshot folder (see the module docstring).

    ``progress`` gets ``hub.Progress`` reports on this thread (bytes never go backwards within one call);
    ``cancel`` stops it at once with ``hub.DownloadCancelled``. Offline, an installed copy is returned and a
    missing one raises ``hub.OfflineError`` without any network access. Raises HubError/ModelError with one
    sentence; a download that fails validation is removed again.
    """
    tok = hub.get_token(token)
    if hub.offline():
        state = local_state([repo_id, *aliases], revision, required)
        if state is not None and state.complete and state.path is not None:
            return state.path
        raise hub.OfflineError(hub.offline_message(repo_id))
    plan = _plan(repo_id, aliases, revision, allow_patterns, tok, pin_fallback)
    snapshot = hub.cache_dir() / hub.repo_folder(plan.repo_id) / "snapshots" / plan.commit
    if not all((snapshot / f.name).is_file() for f in plan.files):
        # A resumed file is written again beside its kept bytes until the kept part is replayed.
        partial = hub.partial_dir(plan.repo_id)
        kept = sum(p.stat().st_size for p in partial.iterdir() if p.is_file()) if partial.is_dir() else 0
        hub.check_free_space(plan.remaining + kept, hub.cache_dir(), plan.repo_id)
        if cancel is not None and cancel.cancelled:
            raise hub.cancelled_error(plan.repo_id)
        snapshot = hub.transfer(plan, token=tok, progress=progress, cancel=cancel)
    elif progress is not None:
        progress(
            hub.Progress(
                plan.repo_id,
                plan.total,
                plan.total,
                plan.files[-1].name,
                len(plan.files),
                len(plan.files),
                finished=True,
            )
        )
    if validate:
        problem = snapshot_problem(snapshot, required)
        if problem:
            try:
                hub.remove_revision(plan.repo_id, plan.commit)
            except Exception:  # noqa: BLE001 - the sentence below matters more than the clean-up
                log.warning("could not remove the unusable download %s", snapshot, exc_info=True)
            raise ModelError(problem)
    return snapshot


# ---------------------------------------------------------------------------------------------------------
# The CLI path


class _TerminalBar:
    """A tqdm byte bar on stderr when it is a terminal (and HF_HUB_DISABLE_PROGRESS_BARS is not set)."""

    def __init__(self, repo_id: str) -> None:
        self.repo_id = repo_id
        self.bar = None
        stream = sys.stderr
        self.enabled = (
            stream is not None
            and hasattr(stream, "isatty")
            and stream.isatty()
            and (os.environ.get("HF_HUB_DISABLE_PROGRESS_BARS") or "").strip().upper() not in {"1", "ON", "YES", "TRUE"}
        )
        self.announced = False

    def __call__(self, p: hub.Progress) -> None:
        if not self.enabled:
            if not self.announced and sys.stderr is not None:
                print(f"Downloading {self.repo_id} ({hub.format_bytes(p.total)})...", file=sys.stderr, flush=True)
                self.announced = True
            return
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(
                total=p.total,
                initial=p.done,
                unit="B",
                unit_scale=True,
                unit_divisor=1000,
                desc=self.repo_id,
                file=sys.stderr,
                dynamic_ncols=True,
            )
        self.bar.update(p.done - self.bar.n)
        self.bar.set_postfix_str(p.file, refresh=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def fetch_model(repo_id: str, revision: str | None = None) -> Path:
    """The local snapshot folder of ``repo_id``, downloading missing files into the HF cache.

    A model that is already complete on disk is used as is, without asking the hub (so it works offline).
    Repos in the catalog use its pinned revision, aliases and file list; others download ``hub.ALLOW_PATTERNS``.
    Shows a byte progress bar on stderr when it is a terminal. Raises ModelError with one sentence.
    """
    from .catalog import find_entry

    entry = find_entry(repo_id)
    ids = [repo_id] + ([r for r in entry.repo_ids if r.lower() != repo_id.lower()] if entry else [])
    rev = revision or (entry.revision if entry else None)
    patterns = list(entry.allow_patterns) if entry and entry.allow_patterns else None
    required = list(entry.required_files) if entry else []
    state = local_state(ids, rev, required)
    if state is not None and state.complete and state.path is not None:
        return state.path
    if hub.offline():
        raise hub.OfflineError(hub.offline_message(repo_id))
    bar = _TerminalBar(repo_id)
    try:
        return install_model(
            ids[0], revision=rev, allow_patterns=patterns, aliases=ids[1:], required=required, progress=bar
        )
    finally:
        bar.close()
