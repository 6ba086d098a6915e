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


def test_cpu_device_count_is_one_per_core_and_can_be_chosen():
    """The XLA CPU plugin runs one worker thread per device or per core,
    whichever is more; the engine asks for one device per core (at most
    the plugin's 4) so that its workers do not outnumber the cores."""
    code = ("import torch\n"
            "n = torch.tpu.device_count(); print(n)\n"
            "x = torch.arange(4.0, device=f'tpu:{n - 1}') * 2\n"
            "print(x.device, x.cpu().tolist())\n")
    # Pinned to one core (before the plugin starts): one device.
    one_core = "import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\n"
    out = run(one_core + code, TORCH_TPU_CPU_DEVICE_COUNT="")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["1", "tpu:0 [0.0, 2.0, 4.0, 6.0]"]
    out = run(code, TORCH_TPU_CPU_DEVICE_COUNT="")
    assert out.returncode == 0, out.stderr
    assert 1 <= int(out.stdout.split("\n")[0]) <= min(len(os.sched_getaffinity(0)), 4)
    # The plugin's INFO line about the option it was given stays quiet.
    assert "cpu_device_count" not in out.stderr, out.stderr
    out = run(code, TORCH_TPU_CPU_DEVICE_COUNT="3")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["3", "tpu:2 [0.0, 2.0, 4.0, 6.0]"]


def test_a_bad_cpu_device_count_is_a_clear_error():
    code = ("import torch, torch_tpu_rs\n"
            "print(torch.tpu.is_available())\n"
            "try:\n"
            "    torch.ones(2, device='tpu')\n"
            "except RuntimeError as e:\n"
            "    print(e)\n")
    out = run(code, TORCH_TPU_CPU_DEVICE_COUNT="two")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "False"
    assert 'TORCH_TPU_CPU_DEVICE_COUNT="two" is not a device count' in lines[1]
    assert "whole number" in lines[1]


def test_starting_the_plugin_leaves_the_log_level_as_it_was():
    code = "import os, torch; torch.ones(1, device='tpu'); print(os.environ.get('TF_CPP_MIN_LOG_LEVEL'))"
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "None"
    out = run(code, TORCH_TPU_CPU_DEVICE_COUNT="2", TF_CPP_MIN_LOG_LEVEL="0")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0"
    # A level the user set is theirs: the plugin's INFO line then shows.
    assert "cpu_device_count set via create_options" in out.stderr
