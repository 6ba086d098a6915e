#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs the whole test suite: cargo test, then
# pytest. Extra arguments go to pytest. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# shellcheck disable=SC1091
source .venv/bin/activate
export TORCH_TPU_PJRT_PLUGIN="${TORCH_TPU_PJRT_PLUGIN:-$(python -c 'from torch_tpu_rs._plugin import default_plugin; print(default_plugin())')}"
# A fresh compilation cache per run keeps the tests hermetic (the default
# is ~/.cache/torch_tpu_rs).
export TORCH_TPU_CACHE_DIR="${TORCH_TPU_CACHE_DIR:-$(mktemp -d -t torch_tpu_rs_cache.XXXXXX)}"
echo "==> cargo test"
cargo test --workspace --exclude torch_tpu_rs --quiet 2>&1 | grep -v "^running 0 tests\|^test result: ok. 0 passed\|^$" || { echo "cargo test failed" >&2; exit 1; }
echo "==> pytest"
python -m pytest tests "$@"
