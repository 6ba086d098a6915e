"""Plugin selection: TORCH_TPU_PJRT_PLUGIN chooses the PJRT plugin; a bad
path gives a clear error instead of a crash. (Never libtpu here: it contacts
a cloud metadata server.)"""
import os
import subprocess
import sys

import torch

import torch_tpu_rs


def run(code: str, **env):
    full_env = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full_env, timeout=120)


def test_default_is_the_pinned_cpu_plugin():
    assert torch_tpu_rs._C.plugin_path().endswith("lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so")
    assert torch_tpu_rs._C.platform_name() == "cpu"


def test_explicit_plugin_path_is_used():
    path = torch_tpu_rs._C.plugin_path()
    out = run("import torch, torch_tpu_rs; print(torch_tpu_rs._C.plugin_path()); print(torch.tpu.device_count())",
              TORCH_TPU_PJRT_PLUGIN=path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0] == path


def test_missing_plugin_is_a_clear_error(tmp_path):
    stub = tmp_path / "libstub_pjrt.so"
    code = (
        "import torch, torch_tpu_rs\n"
        "print(torch.tpu.is_available())\n"
        "print(torch_tpu_rs._C.start_error())\n"
        "try:\n"
        "    torch.ones(2, device='tpu') + 1\n"
        "except RuntimeError as e:\n"
        "    print('raised', 'PJRT' in str(e) or 'plugin' in str(e))\n"
    )
    for path in [str(tmp_path / "does-not-exist.so"), str(stub)]:
        stub.write_bytes(b"not an ELF file")
        out = run(code, TORCH_TPU_PJRT_PLUGIN=path)
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert lines[0] == "False"
        assert path in lines[1]
        assert lines[2] == "raised True"
