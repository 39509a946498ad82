"""Helpers for packaging/livecap.spec (and packaging/build.py): which collected files the bundle keeps.

PyInstaller's hooks collect every Qt plugin of the modules in use and every library those link; livecap needs
few of them, and some libraries must come from the host system instead. These functions filter the
Analysis TOCs (lists of ``(dest_name, src_name, typecode)``). Tested in tests/packaging/test_bundletools.py.
"""

from __future__ import annotations

import os
import re
import struct
from pathlib import Path

QT_PLUGINS = {  # plugin folder -> the plugins to keep (None: all); folders not listed are dropped
    # offscreen (--self-test, CI), xcb (X11 and XWayland), wayland, minimal; cocoa on macOS
    "platforms": ("qoffscreen", "qxcb", "qwayland", "qminimal.", "qcocoa"),
    "platforminputcontexts": None,  # compose keys, ibus input methods
    "platformthemes": ("qxdgdesktopportal",),  # not qgtk3, which would pull in GTK, cairo and pango
    "iconengines": None,  # SVG icons
    "imageformats": ("qsvg",),  # PNG is built into QtGui
    "styles": None,  # macOS style
    "wayland-shell-integration": ("xdg-shell",),
    "wayland-decoration-client": None,
}
# Libraries that must come from the host, as in AppImage's excludelist: they have to match the host's drivers,
# sound server or configuration files (ALSA plugins, JACK/PipeWire, fontconfig, X11/Wayland, OpenGL), or are
# part of every base system and break other host libraries when an older copy is bundled (libstdc++, libgcc_s).
HOST_LIBS = {
    "libasound.so.2",
    "libjack.so.0",
    "libpipewire-0.3.so.0",
    "libfontconfig.so.1",
    "libfreetype.so.6",
    "libharfbuzz.so.0",
    "libfribidi.so.0",
    "libxcb.so.1",
    "libX11.so.6",
    "libX11-xcb.so.1",
    "libxcb-dri2.so.0",
    "libxcb-dri3.so.0",
    "libwayland-client.so.0",
    "libGL.so.1",
    "libEGL.so.1",
    "libGLX.so.0",
    "libOpenGL.so.0",
    "libGLdispatch.so.0",
    "libdrm.so.2",
    "libgbm.so.1",
    "libglapi.so.0",
    "libstdc++.so.6",
    "libgcc_s.so.1",
    "libz.so.1",
    "libexpat.so.1",
    "libuuid.so.1",
    "libgpg-error.so.0",
    "libcom_err.so.2",
    "libICE.so.6",
    "libSM.so.6",
    "libusb-1.0.so.0",
    "libgmp.so.10",
}


def keep(dest: str, linux: bool) -> bool:
    """Whether the collected file ``dest`` (a path inside the bundle) stays: Qt plugins per QT_PLUGINS, no Qt
    translations, and (``linux``) no HOST_LIBS."""
    d = dest.replace("\\", "/")
    if "/Qt/translations/" in d or d.endswith(".qm"):
        return False  # Qt's own UI translations: the app is English only
    m = re.search(r"/Qt/plugins/([^/]+)/([^/]+)$", d)
    if m:
        kind, name = m.groups()
        if kind not in QT_PLUGINS:
            return False
        wanted = QT_PLUGINS[kind]
        return wanted is None or any(w in name for w in wanted)
    return not (linux and Path(d).name in HOST_LIBS)


def elf_needed(path: str) -> list[str]:
    """The DT_NEEDED names of an ELF shared object (its direct dependencies); [] when it is not ELF."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF":
        return []
    bits64, end = data[4] == 2, "<" if data[5] == 1 else ">"
    # ELF header: e_phoff at 0x20 (64-bit) or 0x1C (32-bit); e_phentsize and e_phnum at 0x36 or 0x2A
    (phoff,) = struct.unpack_from(end + ("Q" if bits64 else "I"), data, 0x20 if bits64 else 0x1C)
    phentsize, phnum = struct.unpack_from(end + "HH", data, 0x36 if bits64 else 0x2A)
    loads, dynamic = [], None
    for i in range(phnum):
        off = phoff + i * phentsize
        if bits64:
            p_type, _, p_offset, p_vaddr, _, p_filesz = struct.unpack_from(end + "IIQQQQ", data, off)
        else:
            p_type, p_offset, p_vaddr, _, p_filesz = struct.unpack_from(end + "IIIII", data, off)
        if p_type == 1:  # PT_LOAD: maps file offsets to virtual addresses
            loads.append((p_vaddr, p_offset, p_filesz))
        elif p_type == 2:  # PT_DYNAMIC
            dynamic = (p_offset, p_filesz)
    if dynamic is None:
        return []
    fmt, size = (end + "qQ", 16) if bits64 else (end + "iI", 8)
    entries = [struct.unpack_from(fmt, data, dynamic[0] + k) for k in range(0, dynamic[1], size)]
    strtab = next((v for t, v in entries if t == 5), None)  # DT_STRTAB (a virtual address)
    base = next((o + strtab - va for va, o, n in loads if va <= strtab < va + n), None) if strtab is not None else None
    if base is None:
        return []
    return [data[base + v : data.index(b"\0", base + v)].decode() for t, v in entries if t == 1]  # DT_NEEDED


def prune_orphans(binaries: list) -> list:
    """Drop the shared libraries that only dropped plugins or host libraries needed (Linux): keep the extension
    modules, Qt plugins, libpython, PortAudio and ONNX Runtime's provider bridge (both loaded with dlopen; without
    the bridge ONNX Runtime prints "Init provider bridge failed" on every start) and what they link,
    transitively, through bundled libraries only (a host library's own dependencies are the host's business)."""

    def is_root(dest: str, typecode: str) -> bool:
        name = Path(dest).name
        return (
            typecode == "EXTENSION"
            or "/Qt/plugins/" in dest
            or name.startswith(("libpython", "libportaudio", "libonnxruntime_providers_shared"))
        )

    by_name = {Path(dest).name: src for dest, src, typecode in binaries if typecode != "SYMLINK"}
    todo = [src for dest, src, typecode in binaries if typecode != "SYMLINK" and is_root(dest, typecode)]
    needed: set[str] = set()
    while todo:
        for name in elf_needed(todo.pop()):
            if name not in needed and name in by_name:
                needed.add(name)
                todo.append(by_name[name])
    return [e for e in binaries if e[2] == "SYMLINK" or is_root(e[0], e[2]) or Path(e[0]).name in needed]


def drop_dangling_links(toc: list, present: set[str]) -> list:
    """Drop SYMLINK entries (PyInstaller lists its top-level links to libraries among the datas) whose target
    is no longer collected."""

    def target(dest: str, link: str) -> str:
        return os.path.normpath(os.path.join(os.path.dirname(dest), link))

    return [e for e in toc if e[2] != "SYMLINK" or target(e[0], e[1]) in present]
