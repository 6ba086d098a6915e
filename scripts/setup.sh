#!/usr/bin/env bash
# Sets up a development environment in .venv and builds torch_tpu_rs into it.
# Idempotent: a second run reuses the venv, the installed packages and
# cargo's incremental build.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "==> creating .venv"
  "$PYTHON" -m venv .venv
fi
# shellcheck disable=SC1091
source .venv/bin/activate

stamp=.venv/.torch_tpu_rs-requirements
want="$(cat requirements-dev.txt requirements-plugin.txt | sha256sum | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "==> installing Python packages (torch is about 5 GB on a fresh machine)"
  python -m pip install --quiet --upgrade pip
  python -m pip install --quiet -r requirements-dev.txt
  echo "==> installing the PJRT CPU plugin (sha256-checked)"
  python -m pip install --quiet --require-hashes --no-deps -r requirements-plugin.txt
  echo "$want" > "$stamp"
fi

echo "==> building torch_tpu_rs (cargo, release)"
export PYO3_PYTHON="$PWD/.venv/bin/python"
# maturin develop builds the extension and installs the package (with its
# torch.backends entry point) into the active venv.
# (It also asks pip for the package's own dependency, torch, already there.)
if ! maturin develop --release --quiet > .venv/.build.log 2>&1; then
  grep -v "Requirement already satisfied" .venv/.build.log | tail -60
  echo "==> build failed (full log: .venv/.build.log)" >&2
  exit 1
fi
python -c "import torch_tpu_rs, torch; assert torch.tpu.is_available(), torch_tpu_rs._C.start_error(); print('==> torch_tpu_rs ready:', torch.tpu.device_count(), 'x', torch.tpu.get_device_name())"
