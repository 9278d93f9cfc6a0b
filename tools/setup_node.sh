#!/usr/bin/env bash
# torch-webgpu.js's npm packages: `npm ci` in torch_webgpu/web from its package-lock.json — the tokenizer
# and chat-template libraries a decode bundle's text needs (@huggingface/tokenizers, @huggingface/jinja;
# serve/export-web copy their ES module builds into the page) and Dawn for Node (`webgpu`, a devDependency:
# the Node runs of the tests and benchmarks). node_modules/ is never committed.
# Idempotent: a stamp of the lock file and the node version makes a second run a no-op.
set -euo pipefail
cd "$(dirname "$0")/../torch_webgpu/web"

STAMP=node_modules/.torch-webgpu-installed
for tool in node npm; do
  command -v "$tool" >/dev/null || { echo "setup_node: no $tool; run tools/setup_system.sh first" >&2; exit 1; }
done
want=$({ cat package.json package-lock.json; node --version; } | sha256sum | cut -d' ' -f1)
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
  exit 0
fi
echo "setup: installing torch-webgpu.js's npm packages into torch_webgpu/web/node_modules"
npm ci --no-audit --no-fund --loglevel=error
node --input-type=module -e "await import('@huggingface/tokenizers'); await import('@huggingface/jinja'); \
const {create} = await import('webgpu'); if (typeof create !== 'function') process.exit(1);" || {
  echo "setup_node: the npm packages do not import under $(node --version)" >&2; exit 1; }
echo "$want" > "$STAMP"
