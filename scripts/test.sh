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
# Most of the suite's time is XLA compiling small programs, one core each
# (compile_affinity.rs), so test processes scale with the cores: pytest-xdist
# runs one per core, up to 4, sharing the cache directory above (safe across
# processes; a program compiled in one is a disk hit in the other).
# `-n 0` among the arguments runs in this process.
workers="${TORCH_TPU_TEST_WORKERS:-$(python -c 'import os; print(min(4, len(os.sched_getaffinity(0))))')}"
echo "==> pytest ($workers processes)"
python -m pytest -n "$workers" tests "$@"
