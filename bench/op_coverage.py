"""OpInfo coverage of the tpu device: pass rates per dtype, forward and
gradients separately, as JSON on stdout.

    .venv/bin/python bench/op_coverage.py [--subset]

Runs the cases of tests/test_opinfo.py (tests/opinfo_cases.py) in a child
process (tests/opinfo_refresh.run_isolated), so an op that aborts the process
counts as a failure instead of ending the run. A case whose samples are all
invalid on the CPU is left out of the totals. Entries = cases
(op name, variant, dtype, kind).
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import opinfo_cases as oc  # noqa: E402
from opinfo_refresh import run_isolated  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--subset", action="store_true", help="non-float32 dtypes only on the test's subset")
    ap.add_argument("--top", type=int, default=15, help="how many unlowered ops to list")
    a = ap.parse_args()
    t0 = time.time()
    cases, res = run_isolated(full=not a.subset)
    rates: dict[str, dict] = {}
    unlowered = collections.Counter()
    crashes = []
    for i, c in enumerate(cases):
        st, reason, _ = res.get(i, ("crash", "not run", 0))
        if st == "skip":
            continue
        r = rates.setdefault(c.kind, {}).setdefault(oc.dtype_name(c.dtype), {"passed": 0, "total": 0})
        r["total"] += 1
        r["passed"] += st == "pass"
        if reason.startswith("not lowered: "):
            unlowered[reason.removeprefix("not lowered: ")] += 1
        if st == "crash":
            crashes.append({"case": c.id, "reason": reason})
    for kind in rates.values():
        tot = {"passed": 0, "total": 0}
        for r in kind.values():
            r["percent"] = round(100.0 * r["passed"] / max(r["total"], 1), 1)
            tot["passed"] += r["passed"]
            tot["total"] += r["total"]
        tot["percent"] = round(100.0 * tot["passed"] / max(tot["total"], 1), 1)
        kind["all"] = tot
    print(json.dumps({
        "fwd": rates.get("fwd", {}),
        "grad": rates.get("grad", {}),
        "top_unlowered": dict(unlowered.most_common(a.top)),
        "crashes": crashes,
        "seconds": round(time.time() - t0, 1),
    }, indent=1))


if __name__ == "__main__":
    main()
