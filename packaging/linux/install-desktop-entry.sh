#!/bin/sh
# Register this livecap bundle with the desktop for the current user: installs the icons into
# ~/.local/share/icons/hicolor and a desktop entry into ~/.local/share/applications whose Exec and
# TryExec are this bundle's absolute path. Run it again after moving the folder; --uninstall removes both.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
data=${XDG_DATA_HOME:-$HOME/.local/share}
apps="$data/applications"
icons="$data/icons/hicolor"

if [ "${1:-}" = "--uninstall" ]; then
    rm -f "$apps/livecap.desktop"
    find "$icons" -name livecap.png -path '*/apps/*' -exec rm -f {} + 2>/dev/null || true
    rm -f "$icons/scalable/apps/livecap.svg"
    echo "livecap: removed the desktop entry and icons from $data."
    exit 0
fi

if [ ! -x "$here/livecap" ]; then
    echo "livecap: $here/livecap is missing; run this script from inside the livecap folder." >&2
    exit 1
fi
mkdir -p "$apps" "$icons/scalable/apps"
cp -R "$here/icons/hicolor/." "$icons/"
cp "$here/livecap.svg" "$icons/scalable/apps/livecap.svg"
# Exec: the path in double quotes with \ " ` $ backslash-escaped and % doubled, then every backslash doubled
# again for the string-level escaping (desktop entry spec, "The Exec key"); TryExec: string escaping only.
exec_value=$(printf '%s' "$here/livecap" | sed -e 's/[\\"`$]/\\&/g' -e 's/\\/\\\\/g' -e 's/%/%%/g')
tryexec_value=$(printf '%s' "$here/livecap" | sed -e 's/\\/\\\\/g')
{
    grep -v -e '^Exec=' -e '^TryExec=' "$here/livecap.desktop"
    printf 'Exec="%s"\n' "$exec_value"
    printf 'TryExec=%s\n' "$tryexec_value"
} >"$apps/livecap.desktop"
chmod 644 "$apps/livecap.desktop"
if command -v update-desktop-database >/dev/null 2>&1; then update-desktop-database -q "$apps" || true; fi
if command -v gtk-update-icon-cache >/dev/null 2>&1; then gtk-update-icon-cache -q -t "$icons" || true; fi
echo "livecap: installed $apps/livecap.desktop (starts $here/livecap)."
