"""The packaging files are well-formed (the PyInstaller build itself is `make package`, not part of `make test`)."""

from __future__ import annotations

import configparser
import os
import plistlib
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGING = REPO / "packaging"
SCRIPTS = [PACKAGING / "macos" / "sign_and_notarize.sh", PACKAGING / "linux" / "install-desktop-entry.sh"]


def test_spec_and_scripts_compile():
    for path in (PACKAGING / "livecap.spec", PACKAGING / "build.py", PACKAGING / "render_icon.py"):
        compile(path.read_text(), str(path), "exec")


def test_info_plist():
    info = plistlib.loads((PACKAGING / "macos" / "Info.plist").read_bytes())
    assert info["NSMicrophoneUsageDescription"].strip()
    assert info["NSAudioCaptureUsageDescription"].strip()  # System audio: without it a tap records silence
    assert info["NSHighResolutionCapable"] is True
    assert info["CFBundleIdentifier"].count(".") >= 2
    assert info["LSArchitecturePriority"] == ["arm64"]


def test_spec_carries_the_system_audio_libraries():
    spec = (PACKAGING / "livecap.spec").read_text()
    for name in ('"pulsectl"', '"CoreAudio"', '"pyaudiowpatch"', '"app.sources.macos_tap"', '"app.sources.wasapi"'):
        assert name in spec


def test_entitlements():
    ent = plistlib.loads((PACKAGING / "macos" / "entitlements.plist").read_bytes())
    assert ent["com.apple.security.device.audio-input"] is True
    assert all(value is True for value in ent.values())
    assert "com.apple.security.get-task-allow" not in ent  # notarization refuses it


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_scripts_are_executable_and_shellcheck_clean(script):
    assert os.access(script, os.X_OK)
    if not shutil.which("shellcheck"):
        pytest.skip("shellcheck is not installed")
    r = subprocess.run(["shellcheck", "-x", str(script)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout


def test_sign_script_refuses_to_run_off_macos_or_without_an_app(tmp_path):
    r = subprocess.run(["bash", str(SCRIPTS[0]), str(tmp_path / "missing.app")], capture_output=True, text=True)
    assert r.returncode != 0 and r.stderr.startswith("sign_and_notarize: ")


def test_desktop_entry():
    path = PACKAGING / "linux" / "livecap.desktop"
    entry = configparser.ConfigParser(interpolation=None)
    entry.optionxform = str
    entry.read(path)
    d = entry["Desktop Entry"]
    assert d["Type"] == "Application" and d["Exec"] == "livecap" and d["Icon"] == "livecap"
    assert d["Name"] and d["Categories"].endswith(";")
    if shutil.which("desktop-file-validate"):
        r = subprocess.run(["desktop-file-validate", str(path)], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX shell script")
def test_install_desktop_entry_writes_an_absolute_exec(tmp_path):
    bundle = tmp_path / "odd $dir"
    (bundle / "icons" / "hicolor" / "48x48" / "apps").mkdir(parents=True)
    (bundle / "icons" / "hicolor" / "48x48" / "apps" / "livecap.png").write_bytes(b"png")
    (bundle / "livecap").write_text("#!/bin/sh\n")
    (bundle / "livecap").chmod(0o755)
    shutil.copy(PACKAGING / "linux" / "livecap.desktop", bundle)
    shutil.copy(REPO / "resources" / "icons" / "livecap.svg", bundle)
    shutil.copy(PACKAGING / "linux" / "install-desktop-entry.sh", bundle)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "share")}
    subprocess.run(["sh", str(bundle / "install-desktop-entry.sh")], env=env, check=True, capture_output=True)
    text = (tmp_path / "share" / "applications" / "livecap.desktop").read_text()
    assert f'Exec="{tmp_path}/odd \\\\$dir/livecap"' in text.splitlines()
    assert (tmp_path / "share" / "icons" / "hicolor" / "48x48" / "apps" / "livecap.png").exists()
    subprocess.run(
        ["sh", str(bundle / "install-desktop-entry.sh"), "--uninstall"], env=env, check=True, capture_output=True
    )
    assert not (tmp_path / "share" / "applications" / "livecap.desktop").exists()


def test_render_icon(tmp_path):
    svg = REPO / "resources" / "icons" / "livecap.svg"
    cmd = [sys.executable, str(PACKAGING / "render_icon.py"), str(svg), str(tmp_path)]
    subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    for size in (48, 256, 512):
        png = (tmp_path / "hicolor" / f"{size}x{size}" / "apps" / "livecap.png").read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        assert struct.unpack(">II", png[16:24]) == (size, size)


def test_make_and_ci_wiring():
    makefile = (REPO / "Makefile").read_text()
    assert "\npackage: " in makefile and "packaging/build.py" in makefile
    assert "pyinstaller" in (REPO / "pyproject.toml").read_text().lower()
    ci = (REPO / ".ci" / "run").read_text()
    assert "make package" in ci and "git diff --quiet" in ci
