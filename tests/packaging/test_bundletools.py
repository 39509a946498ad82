"""packaging/bundletools.py: what the bundle keeps of what PyInstaller collects (no build needed)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("bundletools", REPO / "packaging" / "bundletools.py")
bundletools = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bundletools)

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ELF shared libraries")


@pytest.mark.parametrize(
    ("dest", "kept"),
    [
        ("PySide6/Qt/plugins/platforms/libqxcb.so", True),
        ("PySide6/Qt/plugins/platforms/libqoffscreen.so", True),
        ("PySide6/Qt/plugins/platforms/libqwayland.so", True),
        ("PySide6/Qt/plugins/platforms/libqminimal.so", True),
        ("PySide6/Qt/plugins/platforms/libqminimalegl.so", False),
        ("PySide6/Qt/plugins/platforms/libqeglfs.so", False),
        ("PySide6/Qt/plugins/platforms/libqcocoa.dylib", True),
        ("PySide6/Qt/plugins/imageformats/libqsvg.so", True),
        ("PySide6/Qt/plugins/imageformats/libqjpeg.so", False),
        ("PySide6/Qt/plugins/platformthemes/libqgtk3.so", False),
        ("PySide6/Qt/plugins/platformthemes/libqxdgdesktopportal.so", True),
        ("PySide6/Qt/plugins/tls/libqopensslbackend.so", False),
        ("PySide6/Qt/plugins/xcbglintegrations/libqxcb-glx-integration.so", False),
        ("PySide6/Qt/translations/qtbase_de.qm", False),
        ("PySide6/Qt/lib/libQt6Core.so.6", True),
        ("libasound.so.2", False),  # must match the host's ALSA plugins
        ("libstdc++.so.6", False),
        ("libxcb-cursor.so.0", True),  # not on every desktop, and Qt's xcb plugin needs it
        ("resources/selftest/expected.json", True),
    ],
)
def test_keep_on_linux(dest, kept):
    assert bundletools.keep(dest, linux=True) is kept


def test_host_libraries_are_only_a_linux_rule():
    assert bundletools.keep("libz.so.1", linux=False)
    assert not bundletools.keep("libz.so.1", linux=True)


def test_elf_needed_of_a_non_elf_file_is_empty(tmp_path):
    (tmp_path / "x.so").write_bytes(b"#!/bin/sh\n")
    assert bundletools.elf_needed(str(tmp_path / "x.so")) == []


@linux_only
def test_elf_needed_matches_readelf():
    import numpy._core._multiarray_umath as umath

    for path in (umath.__file__, sys.executable):
        needed = bundletools.elf_needed(path)
        assert "libc.so.6" in needed or any(n.startswith("libpython") for n in needed), needed
        if shutil.which("readelf"):
            out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True).stdout
            expected = [line.split("[", 1)[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line]
            assert needed == expected


@linux_only
def test_prune_orphans_keeps_what_the_roots_link():
    import numpy._core._multiarray_umath as umath

    blas = [n for n in bundletools.elf_needed(umath.__file__) if "openblas" in n]
    libs = Path(umath.__file__).parents[2] / "numpy.libs"
    if not blas or not (libs / blas[0]).exists():
        pytest.skip("this numpy does not carry its own OpenBLAS")
    toc = [
        ("numpy/_core/_multiarray_umath.so", umath.__file__, "EXTENSION"),
        (f"numpy.libs/{blas[0]}", str(libs / blas[0]), "BINARY"),
        ("libunused.so.1", sys.executable, "BINARY"),  # collected, but linked by no root
        ("PySide6/Qt/plugins/platforms/libqxcb.so", sys.executable, "BINARY"),  # plugins are roots (dlopen)
        ("onnxruntime/capi/libonnxruntime_providers_shared.so", sys.executable, "BINARY"),  # dlopen'ed too
        (blas[0], f"numpy.libs/{blas[0]}", "SYMLINK"),
    ]
    kept = [e[0] for e in bundletools.prune_orphans(toc)]
    assert kept == [e[0] for e in toc if e[0] != "libunused.so.1"]


def test_drop_dangling_links():
    toc = [("liba.so", "sub/liba.so", "SYMLINK"), ("libb.so", "sub/libb.so", "SYMLINK"), ("x", "/src/x", "DATA")]
    kept = bundletools.drop_dangling_links(toc, {"sub/liba.so", "x"})
    assert [e[0] for e in kept] == ["liba.so", "x"]
