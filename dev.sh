#!/usr/bin/env bash
# The project's entry points. Each first sets the machine up (idempotent; quick on a second run):
#   ./dev.sh demo    pick the adapter and run a small model on it, checked against torch CPU
#   ./dev.sh test    run the whole test suite
set -euo pipefail
cd "$(dirname "$0")"
command=${1:-}
[ $# -gt 0 ] && shift
case "$command" in
  demo|test|setup) ;;
  *) echo "usage: ./dev.sh demo|test|setup [args...]" >&2; exit 2 ;;
esac
bash tools/setup_system.sh
bash tools/setup_python.sh
bash tools/setup_node.sh
case "$command" in
  demo) exec .venv/bin/python -m torch_webgpu.demo "$@" ;;
  test) exec .venv/bin/python -m pytest "$@" ;;
  setup) ;;
esac
