#!/usr/bin/env bash
# System packages for torch-webgpu on Debian 12: compilers, Python venv, the Vulkan loader and, when no
# GPU Vulkan driver is present, Mesa's software rasteriser (lavapipe) from bookworm-backports; Chromium and
# its WebDriver for the browser tests of torch-webgpu.js (tests/web, WebGPU on Chromium's SwiftShader);
# Node.js and npm for torch-webgpu.js's npm packages (tools/setup_node.sh) and its Node runs.
# Dawn refuses bookworm's Mesa 22.3, so the backports suite is added by copying the machine's own deb822
# Debian source (same URIs and keyring) — no registry host is written here.
set -euo pipefail

need_root() { [ "$(id -u)" = 0 ] || { echo "setup_system: run as root (apt-get is needed)" >&2; exit 1; }; }
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
apt_updated=0
apt_update() { [ $apt_updated = 1 ] || { apt-get update -qq; apt_updated=1; }; }
apt_install() {
  local missing=()
  for p in "$@"; do have_pkg "$p" || missing+=("$p"); done
  [ ${#missing[@]} = 0 ] && return 0
  need_root; apt_update
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# A vendor GPU driver that does not come from Mesa (Mesa's own ICDs include hardware ones, but only a
# Mesa new enough for Dawn makes them usable, and that same install brings lavapipe).
has_vendor_gpu_icd() {
  local f
  for f in /usr/share/vulkan/icd.d/*.json /etc/vulkan/icd.d/*.json /usr/local/share/vulkan/icd.d/*.json \
           ${VK_DRIVER_FILES:+${VK_DRIVER_FILES//:/ }}; do
    [ -e "$f" ] || continue
    case "$(basename "$f")" in nvidia*) return 0 ;; esac
  done
  return 1
}

add_backports_source() {
  local out=/etc/apt/sources.list.d/torch-webgpu-backports.sources
  [ -f "$out" ] && return 0
  local src=/etc/apt/sources.list.d/debian.sources
  if [ ! -f "$src" ]; then
    echo "setup_system: no $src to derive bookworm-backports from; add bookworm-backports to apt by hand" >&2
    exit 1
  fi
  # Take the first stanza that serves the plain 'bookworm' suite and keep its URIs, components and keyring.
  awk -v RS= -v ORS='\n\n' '/Suites:[^\n]*bookworm([ \n]|$)/ && !/security/ {print; exit}' "$src" \
    | sed -E 's/^Suites:.*/Suites: bookworm-backports/' > "$out.tmp"
  grep -q '^URIs:' "$out.tmp" || { rm -f "$out.tmp"; echo "setup_system: no bookworm stanza in $src" >&2; exit 1; }
  mv "$out.tmp" "$out"
  apt_updated=0
}

mesa_major() { dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null | sed -E 's/^([0-9]+).*/\1/'; }

apt_install build-essential cmake ninja-build git python3 python3-venv python3-dev libvulkan1 ca-certificates
apt_install chromium chromium-driver
# Debian's nodejs and npm, unless a node and an npm are already there (NodeSource's nodejs carries its own
# npm, which Debian's npm package would conflict with).
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  apt_install nodejs npm
fi

if has_vendor_gpu_icd; then
  :  # NVIDIA driver present; Mesa lavapipe is not needed
elif [ -n "$(mesa_major)" ] && [ "$(mesa_major)" -ge 24 ]; then
  :
else
  need_root
  . /etc/os-release
  if [ "${VERSION_CODENAME:-}" = bookworm ]; then
    add_backports_source; apt_update
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      -t bookworm-backports mesa-vulkan-drivers >/dev/null
  else
    apt_install mesa-vulkan-drivers
  fi
fi
