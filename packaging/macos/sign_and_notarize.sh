#!/usr/bin/env bash
# Sign dist/livecap.app with the hardened runtime, check it with its own --self-test, wrap it in a .dmg,
# then sign, notarize and staple the .dmg. Each step that needs credentials is skipped, with a message,
# when they are not configured, so an unsigned local build still gets a (Gatekeeper-blocked) .dmg.
#
#   packaging/macos/sign_and_notarize.sh [APP]        (default: dist/livecap.app; `make package` runs it)
#
# Environment:
#   LIVECAP_CODESIGN_IDENTITY  a "Developer ID Application: Name (TEAMID)" identity in the keychain
#                              (or its SHA-1); unset: no signing, the app keeps PyInstaller's ad-hoc signature
#   LIVECAP_NOTARY_PROFILE     a notarytool keychain profile, made once with
#                              `xcrun notarytool store-credentials PROFILE --apple-id ... --team-id ...`;
#                              unset: no notarization (needs the identity too)
#   LIVECAP_DMG                where to write the .dmg (default: next to the app, livecap-VERSION-arm64.dmg)
#   LIVECAP_SKIP_SELFTEST=1    do not run the signed app's --self-test
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
app="${1:-dist/livecap.app}"
app="${app%/}"
entitlements="$here/entitlements.plist"
identity="${LIVECAP_CODESIGN_IDENTITY:-}"
profile="${LIVECAP_NOTARY_PROFILE:-}"

say() { printf 'sign_and_notarize: %s\n' "$*"; }
die() { printf 'sign_and_notarize: %s\n' "$*" >&2; exit 1; }

[[ "$(uname -s)" == "Darwin" ]] || die "this script runs on macOS only (codesign, hdiutil, notarytool)."
[[ -d "$app/Contents/MacOS" ]] || die "$app is not an app bundle; build it first with 'make package'."
version="$(/usr/libexec/PlistBuddy -c 'Print :CFBundleShortVersionString' "$app/Contents/Info.plist")"
executable="$(/usr/libexec/PlistBuddy -c 'Print :CFBundleExecutable' "$app/Contents/Info.plist")"
dmg="${LIVECAP_DMG:-$(dirname "$app")/livecap-$version-arm64.dmg}"

sign() {
    codesign --force --timestamp --options runtime --sign "$identity" "$@"
}

# -- 1. code signing (inside out: nested code first, the app bundle last) ------------------------------------
if [[ -z "$identity" ]]; then
    say "LIVECAP_CODESIGN_IDENTITY is not set: skipping code signing and notarization." \
        "The app keeps PyInstaller's ad-hoc signature; other Macs will refuse to open it."
else
    say "signing $app as '$identity' (hardened runtime)"
    # Every Mach-O file except the main executable: Python, extension modules, dylibs, Qt frameworks' binaries
    # and plugins. Symbolic links (PyInstaller links Frameworks/ and Resources/) are skipped by -type f.
    while IFS= read -r -d '' file; do
        [[ "$file" == "$app/Contents/MacOS/$executable" ]] && continue
        if file -b "$file" | grep -q 'Mach-O'; then
            sign "$file"
        fi
    done < <(find "$app/Contents" -type f -print0)
    # Framework bundles (Qt), deepest first, so that each seals its already-signed contents.
    while IFS= read -r -d '' framework; do
        sign "$framework"
    done < <(find "$app/Contents" -depth -type d -name '*.framework' -print0)
    # The app itself: signs the main executable with the entitlements and seals the bundle.
    sign --entitlements "$entitlements" "$app"
    codesign --verify --deep --strict --verbose=2 "$app"
    codesign --display --entitlements - "$app" >/dev/null
    say "signature verified"
fi

# -- 2. the signed app must still work (library validation, entitlements, relocated resources) ----------------
if [[ "${LIVECAP_SKIP_SELFTEST:-}" == "1" ]]; then
    say "LIVECAP_SKIP_SELFTEST=1: not running the app's self-test."
else
    "$app/Contents/MacOS/$executable" --self-test || die "the app's --self-test failed; not making a .dmg."
fi

# -- 3. the disk image: the app and a link to /Applications --------------------------------------------------
staging="$(mktemp -d "${TMPDIR:-/tmp}/livecap-dmg.XXXXXX")"
trap 'rm -rf "$staging"' EXIT
ditto "$app" "$staging/livecap.app"  # ditto keeps symbolic links, extended attributes and signatures
ln -s /Applications "$staging/Applications"
rm -f "$dmg"
hdiutil create -volname "livecap $version" -srcfolder "$staging" -fs HFS+ -format UDZO -ov "$dmg" >/dev/null
say "wrote $dmg ($(du -h "$dmg" | cut -f1))"

if [[ -z "$identity" ]]; then
    exit 0
fi
codesign --force --timestamp --sign "$identity" "$dmg"

# -- 4. notarization and stapling ------------------------------------------------------------------------------
if [[ -z "$profile" ]]; then
    say "LIVECAP_NOTARY_PROFILE is not set: skipping notarization (the signed .dmg is not notarized)."
    exit 0
fi
say "submitting $dmg for notarization (profile '$profile'); this usually takes a few minutes"
result="$(xcrun notarytool submit "$dmg" --keychain-profile "$profile" --wait --output-format plist)"
status="$(printf '%s' "$result" | plutil -extract status raw -o - -)"
submission="$(printf '%s' "$result" | plutil -extract id raw -o - -)"
if [[ "$status" != "Accepted" ]]; then
    xcrun notarytool log "$submission" --keychain-profile "$profile" >&2 || true
    die "notarization ended with status '$status' (submission $submission); the log is above."
fi
xcrun stapler staple "$dmg"
xcrun stapler validate "$dmg"
spctl --assess --type open --context context:primary-signature --verbose=2 "$dmg"
say "notarized and stapled $dmg"
