"""A process forked after tpu started cannot use it (the plugin's threads do
not come along): as with CUDA, tpu calls there raise, naming the 'spawn'
start method, instead of hanging; CPU work in the child and tpu in the
parent are unaffected. Each case runs in its own interpreter, so a hang
fails on the timeout and not the whole suite."""
import os
import subprocess
import sys
import tempfile
import textwrap


def run(code: str, timeout: int = 120) -> subprocess.CompletedProcess:
    """Runs `code` as a script file (spawned workers import its classes from it)."""
    with tempfile.TemporaryDirectory() as d:
        script = os.path.join(d, "case.py")
        with open(script, "w") as f:
            f.write(textwrap.dedent(code))
        return subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=timeout)


def test_a_forked_child_raises_and_the_parent_keeps_working():
    out = run("""
        import os, torch, torch_tpu_rs
        x = torch.arange(4.0, device="tpu") * 2
        assert x.sum().item() == 12.0
        pid = os.fork()
        if pid == 0:
            code = 3
            try:
                ok = torch.tpu._is_in_bad_fork() and torch.tpu.device_count() >= 1
                for use in (lambda: torch.empty(4, device="tpu"), lambda: torch.ones(2).to("tpu"), lambda: x.cpu()):
                    try:
                        use()
                        ok = False
                    except RuntimeError as e:
                        ok = ok and "forked subprocess" in str(e)
                (x + 1).cpu()
            except RuntimeError as e:
                code = 0 if ok and "forked subprocess" in str(e) and "'spawn'" in str(e) else 4
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(status))
        print("parent", torch.tpu._is_in_bad_fork(), (x + 1).cpu().tolist())
    """)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[:2] == ["child 0", "parent False [1.0, 3.0, 5.0, 7.0]"], out.stdout


def test_a_forked_child_exits_cleanly_with_inherited_tpu_tensors():
    """The child's interpreter frees the tensors it inherited on exit; that
    must neither hang nor crash."""
    out = run("""
        import os, torch, torch_tpu_rs
        keep = [torch.randn(64, 64, device="tpu") for _ in range(8)]
        torch.tpu.synchronize()
        pid = os.fork()
        if pid == 0:
            del keep[:]
            import gc; gc.collect()
            sys_exit = __import__("sys").exit
            sys_exit(0)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status), float(sum(k.sum() for k in keep).isfinite()))
    """)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "0 1.0", out.stdout


DATASET = """
    import torch, torch_tpu_rs
    from torch.utils.data import DataLoader, Dataset

    class Squares(Dataset):
        def __init__(self, on_tpu):
            self.on_tpu = on_tpu
        def __len__(self):
            return 6
        def __getitem__(self, i):
            x = torch.full((3,), float(i))
            if self.on_tpu:
                return (x.to("tpu") ** 2).cpu()
            return x ** 2

    model = torch.nn.Linear(3, 1).to("tpu")  # tpu is started in the parent
"""


def test_dataloader_workers_doing_cpu_work_are_unaffected():
    out = run(DATASET + """
    batches = [b for b in DataLoader(Squares(False), batch_size=2, num_workers=2)]
    print(torch.cat(batches)[:, 0].tolist(), model(batches[0].to("tpu")).shape)
    """)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[0.0, 1.0, 4.0, 9.0, 16.0, 25.0] torch.Size([2, 1])", out.stdout


def test_dataloader_workers_using_tpu_raise_the_spawn_hint():
    out = run(DATASET + """
    try:
        list(DataLoader(Squares(True), batch_size=2, num_workers=2, timeout=60))
    except RuntimeError as e:
        print("raised", "forked subprocess" in str(e) and "'spawn'" in str(e))
    """)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "raised True", out.stdout


def test_spawned_dataloader_workers_can_use_tpu():
    out = run(DATASET + """
    if __name__ == "__main__":
        loader = DataLoader(Squares(True), batch_size=3, num_workers=1, multiprocessing_context="spawn")
        print(torch.cat(list(loader))[:, 0].tolist())
    """, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[0.0, 1.0, 4.0, 9.0, 16.0, 25.0]", out.stdout
