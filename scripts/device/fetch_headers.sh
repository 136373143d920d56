#!/usr/bin/env bash
# Fetches, here, the headers the GPU machine lacks (it reaches no package registry): fmt
# (used header-only there), nlohmann-json and CLI11, from Debian's packages, unpacked into
# build-device/include (ignored by git; 2 MB). The device tool carries that folder:
#   run(command="scripts/device/check.sh", carry=["build-device/include"])
set -euo pipefail
cd "$(dirname "$0")/../.."
out=build-device/include
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get download libfmt-dev nlohmann-json3-dev libcli11-dev > /dev/null 2>&1) || {
  apt-get update -q > /dev/null && (cd "$work" && apt-get download libfmt-dev nlohmann-json3-dev \
    libcli11-dev > /dev/null 2>&1)
}
for deb in "$work"/*.deb; do dpkg -x "$deb" "$work/root"; done
rm -rf "$out" && mkdir -p "$out"
cp -r "$work/root/usr/include/fmt" "$work/root/usr/include/nlohmann" \
      "$work/root/usr/include/CLI" "$out/"
echo "device headers: $out ($(du -sh "$out" | cut -f1)): $(ls "$out" | tr '\n' ' ')"
