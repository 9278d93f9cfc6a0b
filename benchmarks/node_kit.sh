#!/usr/bin/env bash
# Node for a GPU machine without network: Debian 12's nodejs (18) with its library .debs, and the npm
# packages torch-webgpu.js runs on there — `webgpu` (Dawn for Node: only dist/linux-x64/dawn.node, xz'd) and
# the tokenizer libraries — in ./.node (git-ignored; ~27 MB of the 64 MiB a device call carries). Run from
# the repository root after `npm ci` in torch_webgpu/web (tools/setup_node.sh).
#
# On the GPU machine benchmarks/lm_on_gpu_machine.sh unpacks it: the .debs into / (Debian's libnode loads
# its bundled JavaScript from /usr/share/nodejs), dawn.node beside the webgpu package, and the packages as
# torch_webgpu/web/node_modules, where torch_webgpu/web/node/generate.mjs finds them. The .debs need glibc
# >= 2.34 and GLIBCXX_3.4.30 (Ubuntu 22.04 and later), and the image's own libssl3 and zlib.
set -euo pipefail
SRC=torch_webgpu/web/node_modules
[ -f "$SRC/webgpu/dist/linux-x64/dawn.node" ] || { echo "node_kit: no $SRC/webgpu; run tools/setup_node.sh" >&2; exit 1; }
rm -rf .node && mkdir -p .node/debs .node/node_modules/webgpu/dist/linux-x64
# Debian's own index, in a private lists directory (whatever this machine's sources are; bookworm's nodejs)
lists=$(mktemp -d); mkdir -p "$lists/partial"
opts=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 "-oDir::State::Lists=$lists")
apt-get "${opts[@]}" update -qq
version=$(apt-cache "${opts[@]}" madison nodejs | awk -F'|' '$2 !~ /nodesource/ {gsub(/ /, "", $2); print $2; exit}')
[ -n "$version" ] || { echo "node_kit: no Debian nodejs in the apt sources" >&2; exit 1; }
(cd .node/debs && apt-get "${opts[@]}" download "nodejs=$version" "libnode108=$version" node-acorn \
   node-cjs-module-lexer node-undici libbrotli1 libc-ares2 libicu72 libnghttp2-14 libuv1 2>&1 | grep -v "^W: " || true)
rm -rf "$lists"
cp "$SRC/webgpu/package.json" "$SRC/webgpu/index.js" .node/node_modules/webgpu/
xz -T0 -9 -c "$SRC/webgpu/dist/linux-x64/dawn.node" > .node/node_modules/webgpu/dist/linux-x64/dawn.node.xz
# the tokenizer libraries: their package.json and the builds Node imports (no types, maps or CommonJS)
mkdir -p .node/node_modules/@huggingface/tokenizers/dist .node/node_modules/@huggingface/jinja/dist
cp "$SRC/@huggingface/tokenizers/package.json" .node/node_modules/@huggingface/tokenizers/
cp "$SRC/@huggingface/tokenizers/dist/tokenizers.mjs" .node/node_modules/@huggingface/tokenizers/dist/
cp "$SRC/@huggingface/jinja/package.json" .node/node_modules/@huggingface/jinja/
cp "$SRC/@huggingface/jinja/dist/index.js" .node/node_modules/@huggingface/jinja/dist/
echo "nodejs $version" > .node/VERSION
find .node -type f -printf '%s\n' | awk '{s += $1} END {printf ".node: %.1f MiB\n", s / 1048576}'
