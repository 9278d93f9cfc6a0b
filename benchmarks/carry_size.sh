#!/usr/bin/env bash
# What one device call carries, against its 64 MiB limit: the working tree as it travels (tracked files
# and untracked ones git does not ignore) plus the carried folders (default .gl .whl .whl-ort .bundles).
# Run from the repository root before the call; exits non-zero when over.
set -euo pipefail
LIMIT=$((64 << 20))
tree=$(git ls-files -co --exclude-standard -z | xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}')
total=$tree
printf '%-12s %8.1f MiB\n' "work tree" "$(echo "$tree / 1048576" | bc -l)"
for d in "${@:-.gl .whl .whl-ort .bundles}"; do
  for folder in $d; do
    [ -e "$folder" ] || { printf '%-12s   absent\n' "$folder"; continue; }
    size=$(find -L "$folder" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
    total=$((total + size))
    printf '%-12s %8.1f MiB\n' "$folder" "$(echo "$size / 1048576" | bc -l)"
  done
done
printf '%-12s %8.1f MiB of 64\n' "total" "$(echo "$total / 1048576" | bc -l)"
[ "$total" -le "$LIMIT" ] || { echo "over the 64 MiB a device call carries: trim .whl (iree_base_runtime and wgpu are needed only for the iree-vulkan and wgpu backends) or the bundles"; exit 1; }
