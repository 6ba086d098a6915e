"""The XLA CPU plugin's YNNPACK fusions of a dot or a reduction with
broadcast operands compute wrong values (lammps-jax-pjrt-cpu 0.11.2); the
engine starts the plugin with them off (`xla_cpu_flags.rs`). Graphs that
hit them, against the CPU, in Strict and Fused Eager."""
import ctypes
import os

import pytest
import torch

import torch_tpu_rs
from conftest import assert_same, run_both

GRAPHS = {
    # Fused Eager gave 4096 for n = 64 (the contraction over 4 was lost),
    # and garbage for larger n.
    "sum_of_ones_matmul": lambda x: (x @ x.T).sum(),
    "softmax_of_ones_matmul": lambda x: ((x @ x.T).softmax(-1) * 2 + 1).sum(0).tanh(),
    "column_sums_of_matmul": lambda x: (x @ x.T).sum(0),
}


@pytest.mark.parametrize("mode", ["strict", "fused"])
@pytest.mark.parametrize("graph", GRAPHS)
@pytest.mark.parametrize("n", [64, 100, 257])
def test_matmul_of_broadcast_values_matches_cpu(mode, graph, n):
    torch_tpu_rs.set_eager_mode(mode)
    fn = GRAPHS[graph]
    assert_same(*run_both(lambda x: fn(x * 1.0), torch.ones(n, 4)), rtol=1e-5)
    # A fill made on the device: a broadcast scalar inside the graph.
    assert_same(fn(torch.full((n, 4), 0.5, device="tpu")), fn(torch.full((n, 4), 0.5)), rtol=1e-5)


def test_the_processs_xla_flags_are_left_as_they_were():
    """The flag goes to the plugin only while it starts: other XLA users in
    the process (jax) must not meet a flag their XLA may not know."""
    torch.ones(1, device="tpu").cpu()  # the engine has started
    libc = ctypes.CDLL(None)
    libc.getenv.restype = ctypes.c_char_p
    now = libc.getenv(b"XLA_FLAGS")
    assert (now.decode() if now is not None else None) == os.environ.get("XLA_FLAGS")
