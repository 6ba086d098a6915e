#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs the main job: a small Llama-style model
# training on the tpu device. Extra arguments go to examples/train_llama.py.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python examples/train_llama.py "$@"
