"""torch.distributed with the "tpu" backend: two processes, each on its own
tpu device, train a model under DistributedDataParallel and run the common
collectives; the results are compared with one CPU process doing the same
work on the whole batch. Runs in Strict and in Fused Eager."""
import os
import tempfile

import pytest
import torch
import torch.multiprocessing as mp

WORLD = 2
STEPS = 3


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def batches():
    g = torch.Generator().manual_seed(1)
    return [torch.randn(2 * WORLD, 8, generator=g) for _ in range(STEPS)]


def worker(rank, store_path, eager_mode, results):
    import torch.distributed as dist

    import torch_tpu_rs

    torch_tpu_rs.set_eager_mode(eager_mode)
    dist.init_process_group("tpu", init_method=f"file://{store_path}", rank=rank, world_size=WORLD)
    try:
        dev = torch.device("tpu", rank)
        model = make_model().to(dev)
        if rank == 1:
            with torch.no_grad():  # DDP must start every rank from rank 0's weights
                for p in model.parameters():
                    p.add_(1.0)
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
        for x in batches():
            opt.zero_grad()
            ddp(x[2 * rank:2 * rank + 2].to(dev)).pow(2).mean().backward()
            opt.step()

        out = {"backend": dist.get_backend(), "params": [p.detach().cpu().tolist() for p in model.parameters()]}
        t = torch.full((3,), float(rank + 1), device=dev)
        dist.all_reduce(t)
        out["all_reduce"] = t.cpu().tolist()
        t = torch.full((3,), float(rank + 1), device=dev)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        out["all_reduce_max"] = t.cpu().tolist()
        gathered = [torch.empty(2, device=dev) for _ in range(WORLD)]
        dist.all_gather(gathered, torch.full((2,), float(rank), device=dev))
        out["all_gather"] = [g.cpu().tolist() for g in gathered]
        stacked = torch.empty(2 * WORLD, device=dev)
        dist.all_gather_into_tensor(stacked, torch.full((2,), float(rank), device=dev))
        out["all_gather_into_tensor"] = stacked.cpu().tolist()
        part = torch.empty(2, device=dev)
        dist.reduce_scatter_tensor(part, torch.arange(2.0 * WORLD, device=dev) * (rank + 1))
        out["reduce_scatter_tensor"] = part.cpu().tolist()
        b = torch.full((2,), float(rank + 5), device=dev)
        dist.broadcast(b, src=1)
        out["broadcast"] = b.cpu().tolist()
        r = torch.full((2,), float(rank + 1), device=dev)
        dist.reduce(r, dst=0)
        out["reduce"] = r.cpu().tolist() if rank == 0 else None
        gather_list = [torch.empty(2, device=dev) for _ in range(WORLD)] if rank == 0 else None
        dist.gather(torch.full((2,), float(rank + 7), device=dev), gather_list, dst=0)
        out["gather"] = [g.cpu().tolist() for g in gather_list] if rank == 0 else None
        s = torch.empty(2, device=dev)
        dist.scatter(s, [torch.full((2,), 10.0 + i, device=dev) for i in range(WORLD)] if rank == 0 else None, src=0)
        out["scatter"] = s.cpu().tolist()
        a2a = torch.empty(2, device=dev)
        dist.all_to_all_single(a2a, torch.tensor([rank * 10.0, rank * 10.0 + 1], device=dev))
        out["all_to_all_single"] = a2a.cpu().tolist()
        avg = torch.full((2,), float(rank + 1), device=dev)
        dist.all_reduce(avg, op=dist.ReduceOp.AVG)  # gloo lacks AVG; NCCL has it
        out["all_reduce_avg"] = avg.cpu().tolist()
        iavg = torch.tensor([-3 * rank, 3 * rank], device=dev)
        dist.all_reduce(iavg, op=dist.ReduceOp.AVG)
        out["all_reduce_avg_int"] = iavg.cpu().tolist()
        avg_part = torch.empty(2, device=dev)
        dist.reduce_scatter_tensor(avg_part, torch.arange(2.0 * WORLD, device=dev) * (rank + 1), op=dist.ReduceOp.AVG)
        out["reduce_scatter_avg"] = avg_part.cpu().tolist()
        p2p = torch.full((2,), 42.0 if rank == 0 else 0.0, device=dev)
        if rank == 0:
            dist.send(p2p, dst=1)
        else:
            dist.recv(p2p, src=0)
        out["send_recv"] = p2p.cpu().tolist()
        # Paired isend/irecv in the same order on both ranks (sends are
        # asynchronous, so neither rank blocks the other).
        mine, theirs = torch.full((3,), float(rank + 1), device=dev), torch.empty(3, device=dev)
        ops = [dist.P2POp(dist.isend, mine, 1 - rank), dist.P2POp(dist.irecv, theirs, 1 - rank)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        out["batch_isend_irecv"] = theirs.cpu().tolist()
        outs = [torch.empty(2, device=dev) for _ in range(WORLD)]
        dist.all_to_all(outs, [torch.full((2,), 10.0 * rank + i, device=dev) for i in range(WORLD)])
        out["all_to_all"] = [o.cpu().tolist() for o in outs]
        x = torch.full((2,), float(rank + 1), device=dev, requires_grad=True)
        torch.cat(torch.distributed.nn.functional.all_gather(x)).pow(2).sum().backward()  # backward: all_to_all
        out["all_gather_grad"] = x.grad.cpu().tolist()
        try:  # one element per rank is too few: gloo refuses, so must tpu
            dist.reduce_scatter_tensor(torch.empty(2, device=dev), torch.ones(2, device=dev))
            out["reduce_scatter_bad_size"] = "accepted"
        except RuntimeError as e:
            out["reduce_scatter_bad_size"] = str(e)
        dist.monitored_barrier()  # raises if it is not supported
        dist.barrier()
        results.put((rank, out))
    finally:
        dist.destroy_process_group()


def cpu_reference():
    """One process, the whole batch: DDP averages the ranks' gradients."""
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x in batches():
        opt.zero_grad()
        sum(model(x[2 * r:2 * r + 2]).pow(2).mean() for r in range(WORLD)).div(WORLD).backward()
        opt.step()
    return [p.detach() for p in model.parameters()]


def report_failures(target, rank, store, *args):
    """Runs one rank; an exception is put in the results with its traceback,
    so the test fails at once, showing it, instead of waiting for a timeout."""
    results = args[-1]
    try:
        target(rank, store, *args)
    except BaseException:
        import traceback

        results.put((rank, {"error": traceback.format_exc()}))
        raise


def run_ranks(target, *args):
    """Runs target(rank, store_path, *args, results) in WORLD spawned
    processes; returns {rank: what it put in results}."""
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "store")
        procs = [ctx.Process(target=report_failures, args=(target, r, store, *args, results)) for r in range(WORLD)]
        for p in procs:
            p.start()
        try:
            outs = {}
            for _ in procs:
                rank, out = results.get(timeout=240)
                assert "error" not in out, f"rank {rank} failed:\n{out['error']}"
                outs[rank] = out
        finally:
            for p in procs:
                p.join(timeout=60)
                if p.is_alive():
                    p.kill()
    assert [p.exitcode for p in procs] == [0] * WORLD
    return outs


@pytest.mark.parametrize("eager_mode", ["strict", "fused"])
def test_ddp_and_collectives_across_two_processes(eager_mode):
    outs = run_ranks(worker, eager_mode)
    reference = cpu_reference()
    for rank, out in outs.items():
        assert out["backend"] == "tpu"
        for got, want in zip(out["params"], reference):
            torch.testing.assert_close(torch.tensor(got), want)
        assert out["all_reduce"] == [3.0, 3.0, 3.0]
        assert out["all_reduce_max"] == [2.0, 2.0, 2.0]
        assert out["all_gather"] == [[0.0, 0.0], [1.0, 1.0]]
        assert out["all_gather_into_tensor"] == [0.0, 0.0, 1.0, 1.0]
        # rank r sends arange(4) * (r + 1); the sum is arange(4) * 3, split in two.
        assert out["reduce_scatter_tensor"] == [[0.0, 3.0], [6.0, 9.0]][rank]
        assert out["broadcast"] == [6.0, 6.0]
        assert out["reduce"] == ([3.0, 3.0] if rank == 0 else None)
        assert out["gather"] == ([[7.0, 7.0], [8.0, 8.0]] if rank == 0 else None)
        assert out["scatter"] == [10.0 + rank] * 2
        # rank r holds [10r, 10r + 1] and gets element r of every rank's.
        assert out["all_to_all_single"] == [rank, 10.0 + rank]
        assert out["send_recv"] == [42.0, 42.0]
        assert out["all_reduce_avg"] == [1.5, 1.5]
        assert out["all_reduce_avg_int"] == [-1, 1]  # -3 / 2 and 3 / 2 round toward zero, as NCCL's
        assert out["reduce_scatter_avg"] == [[0.0, 1.5], [3.0, 4.5]][rank]
        assert out["batch_isend_irecv"] == [2.0 - rank] * 3
        assert out["all_to_all"] == [[rank, rank], [10.0 + rank, 10.0 + rank]]
        # d/dx of sum over ranks of |x_r|^2 as seen by every rank: 2 x * WORLD.
        assert out["all_gather_grad"] == [2.0 * (rank + 1) * WORLD] * 2
        assert "world_size (2) times" in out["reduce_scatter_bad_size"]


def fsdp_worker(rank, store_path, results):
    """FSDP2 (fully_shard) training and DTensor placements on a tpu mesh."""
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor, init_device_mesh

    import torch_tpu_rs  # noqa: F401

    dist.init_process_group("tpu", init_method=f"file://{store_path}", rank=rank, world_size=WORLD)
    try:
        torch.tpu.set_device(rank)
        mesh = init_device_mesh("tpu", (WORLD,))
        whole = torch.arange(8.0).reshape(4, 2)
        sharded = distribute_tensor(whole.to("tpu"), mesh, [Shard(0)])
        out = {
            "local_shard": sharded.to_local().cpu().tolist(),
            "full_tensor": sharded.full_tensor().cpu().tolist(),
            "replicated": sharded.redistribute(mesh, [Replicate()]).to_local().cpu().tolist(),
        }
        model = make_model().to("tpu")
        for layer in model:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for x in batches():
            opt.zero_grad()
            model(x[2 * rank:2 * rank + 2].to("tpu")).pow(2).mean().backward()
            opt.step()
        out["params"] = [p.full_tensor().detach().cpu().tolist() for p in model.parameters()]
        results.put((rank, out))
    finally:
        dist.destroy_process_group()


def test_fsdp2_and_dtensor_across_two_processes():
    """fully_shard gathers parameters and reduce-scatters gradients through
    the functional collectives; training matches the full-batch CPU run."""
    outs = run_ranks(fsdp_worker)
    reference = cpu_reference()
    for rank, out in outs.items():
        assert out["local_shard"] == [[[0.0, 1.0], [2.0, 3.0]], [[4.0, 5.0], [6.0, 7.0]]][rank]
        assert out["full_tensor"] == out["replicated"] == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0], [6.0, 7.0]]
        for got, want in zip(out["params"], reference):
            torch.testing.assert_close(torch.tensor(got), want)


def compiled_ddp_worker(rank, store_path, results):
    """torch.compile(backend="tpu") of a DDP model: Dynamo's DDP optimizer
    splits the graph at gradient buckets; the all-reduces still run."""
    import torch.distributed as dist

    import torch_tpu_rs  # noqa: F401

    dist.init_process_group("tpu", init_method=f"file://{store_path}", rank=rank, world_size=WORLD)
    try:
        dev = torch.device("tpu", rank)
        model = make_model().to(dev)
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        compiled = torch.compile(ddp, backend="tpu")
        opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
        for x in batches():
            opt.zero_grad()
            compiled(x[2 * rank:2 * rank + 2].to(dev)).pow(2).mean().backward()
            opt.step()
        results.put((rank, {"params": [p.detach().cpu().tolist() for p in model.parameters()]}))
    finally:
        dist.destroy_process_group()


def test_compiled_ddp_across_two_processes():
    outs = run_ranks(compiled_ddp_worker)
    reference = cpu_reference()
    for out in outs.values():
        for got, want in zip(out["params"], reference):
            torch.testing.assert_close(torch.tensor(got), want)


def test_torchrun_ddp_example():
    """examples/train_ddp.py under torchrun: two ranks train, and their
    replicas end identical."""
    import json
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           os.path.join(root, "examples", "train_ddp.py"), "--steps", "4", "--log-every", "1", "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=root)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads([line for line in done.stdout.splitlines() if line.startswith("{")][-1])
    assert summary["world_size"] == 2
    assert summary["replicas_in_sync"] is True
    assert 0 < summary["final_loss"] < 6.0  # log(256) = 5.55 at the start
