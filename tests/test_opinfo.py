"""PyTorch's OpInfo database (op_db) run on tpu against the CPU, CPU fallback off.

One test per case `op_name[.variant]-dtype-fwd|grad` (see tests/opinfo_cases.py):
at most 3 samples of each entry, outputs compared with assert_close (values,
dtype, shape); `grad` compares the float32 gradients for a fixed random
cotangent. A sample view of part of a storage moves with its whole storage,
as it would be made on the device. A float16/bfloat16/float32 output outside
tolerance still passes when it is at least as close to a float64 run as the
CPU's own result (PyTorch's rule for its reference tests). Random ops (an ATen op tagged nondeterministic_seeded runs, or
OpInfo itself skips PyTorch's device-vs-CPU comparison as non-deterministic)
cannot match the CPU's random stream: for them the harness checks shapes,
dtypes, finiteness and reproducibility under the same seed; their
distributions are tested in tests/test_factory_random.py. float32 runs for every entry; the other dtypes for a deterministic
third of the entries (TORCH_TPU_OPINFO_FULL=1: all of them) to keep the module
within a few minutes. Known failures are listed in tests/opinfo_known_failures.py
(regenerate with tests/opinfo_refresh.py) and are strict xfails.
"""
from __future__ import annotations

import os
import signal
import sys

import pytest

import expecttest  # noqa: E402,F401  (torch.testing._internal needs it; a missing one must fail, not skip)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import opinfo_cases as oc  # noqa: E402
import opinfo_known_failures as known  # noqa: E402

CASE_TIMEOUT_S = 60
FULL = os.environ.get("TORCH_TPU_OPINFO_FULL") == "1"


def _params():
    out = []
    for c in oc.build_cases(full_dtypes=FULL):
        marks = []
        if c.key in known.CRASHES or oc.op_id(oc.op_db()[c.op_index]) in oc.DENYLIST:
            marks.append(pytest.mark.skip(reason=known.CRASHES.get(c.key) or oc.DENYLIST[c.name]))
        elif c.key in known.FAILURES:
            marks.append(pytest.mark.xfail(reason=known.FAILURES[c.key], strict=True))
        out.append(pytest.param(c, id=c.id, marks=marks))
    return out


def _timeout(signum, frame):
    raise TimeoutError(f"case ran over {CASE_TIMEOUT_S} s")


@pytest.mark.parametrize("case", _params())
def test_opinfo(case):
    old = signal.signal(signal.SIGALRM, _timeout)
    signal.alarm(CASE_TIMEOUT_S)
    try:
        result = oc.run_case(case)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    if result == "skip":
        pytest.skip("no sample runs on the CPU")
