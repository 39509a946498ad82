"""Render the app icon (resources/icons/livecap.svg) to PNGs with Qt's SVG renderer, for the bundles.

    python packaging/render_icon.py SVG OUT_DIR [--icns]

Writes ``OUT_DIR/hicolor/<N>x<N>/apps/livecap.png`` for the freedesktop icon theme sizes and
``OUT_DIR/livecap.png`` (256 px). With ``--icns`` (macOS) it also writes ``OUT_DIR/livecap.iconset`` and
turns it into ``OUT_DIR/livecap.icns`` with ``iconutil``. Runs offscreen; needs only PySide6 (QtSvg is part
of PySide6-Essentials), so no extra tool (rsvg-convert, Pillow) is required.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

os.environ["QT_QPA_PLATFORM"] = "offscreen"

LINUX_SIZES = (16, 32, 48, 64, 128, 256, 512)
ICONSET = {  # name in the .iconset -> pixel size (Apple's required set)
    "icon_16x16.png": 16,
    "icon_16x16@2x.png": 32,
    "icon_32x32.png": 32,
    "icon_32x32@2x.png": 64,
    "icon_128x128.png": 128,
    "icon_128x128@2x.png": 256,
    "icon_256x256.png": 256,
    "icon_256x256@2x.png": 512,
    "icon_512x512.png": 512,
    "icon_512x512@2x.png": 1024,
}


def render(svg: Path, size: int, out: Path) -> None:
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    renderer = QSvgRenderer(str(svg))
    if not renderer.isValid():
        raise SystemExit(f"render_icon: {svg} is not a valid SVG file.")
    image = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter)
    painter.end()
    out.parent.mkdir(parents=True, exist_ok=True)
    if not image.save(str(out), "PNG"):
        raise SystemExit(f"render_icon: could not write {out}.")


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    if len(args) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    svg, out = Path(args[0]), Path(args[1])
    from PySide6.QtGui import QGuiApplication

    app = QGuiApplication.instance() or QGuiApplication(["render_icon"])  # noqa: F841 - image plugins need it
    for size in LINUX_SIZES:
        render(svg, size, out / "hicolor" / f"{size}x{size}" / "apps" / "livecap.png")
    render(svg, 256, out / "livecap.png")
    if "--icns" in argv:
        iconset = out / "livecap.iconset"
        for name, size in ICONSET.items():
            render(svg, size, iconset / name)
        subprocess.run(["iconutil", "-c", "icns", str(iconset), "-o", str(out / "livecap.icns")], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
