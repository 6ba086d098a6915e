"""`torch.distributed` for tpu tensors: the process-group backend "tpu".

    dist.init_process_group("tpu")      # under torchrun, or with rank/world_size
    model = DDP(model.to(f"tpu:{local_rank}"))   # or fully_shard(model), DTensor

Collectives take tpu tensors (and CPU tensors), through the group's methods
and through the functional collectives DTensor and FSDP2 use. Each one is staged through
host memory and run by gloo, PyTorch's CPU backend: a portable baseline for
any PJRT plugin, since PJRT's C API has no cross-process collectives. The
host copy is a sync; on a real TPU slice, collectives inside compiled XLA
programs are the fast path this does not replace.

Each collective completes before it returns, so the `Work` it hands back
is done (`async_op=True` is accepted and returns finished work; wait on it,
since c10d's wrapper reports `is_completed()` as False). `send` stays
asynchronous, as in gloo, so paired sends and receives (`batch_isend_irecv`,
pipelining) complete in any order.
"""
from __future__ import annotations

from datetime import timedelta

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import Backend, _create_work_from_future

BACKEND = "tpu"


def _done(result) -> dist.Work:
    fut = torch.futures.Future()
    fut.set_result(result)
    return _create_work_from_future(fut)


def _host(t: torch.Tensor) -> torch.Tensor:
    return t.cpu() if t.device.type == "tpu" else t


def _divide(t: torch.Tensor, n: int) -> None:
    """AVG's division, as NCCL's: integers round toward zero (C division)."""
    if t.is_floating_point() or t.is_complex():
        t.div_(n)
    else:
        t.div_(n, rounding_mode="trunc")


def _write_back(dst: torch.Tensor, host: torch.Tensor) -> None:
    if host is not dst:
        dst.copy_(host)


class TpuBackend(Backend):
    """The c10d backend behind group "tpu": gloo, with tpu tensors staged
    through host memory. c10d routes a group's collectives (and the
    functional collectives DTensor and FSDP2 use) to it by device type."""

    def __init__(self, store: dist.Store, rank: int, size: int, timeout: timedelta):
        super().__init__(rank, size)
        options = dist.ProcessGroupGloo._Options()
        options._timeout = timeout
        options._devices = [dist.ProcessGroupGloo.create_default_device()]
        self._gloo = dist.ProcessGroupGloo(store, rank, size, options)

    # Batched point-to-point ops go one by one (c10d asks before coalescing).
    supports_coalescing = False

    def getBackendName(self) -> str:  # noqa: N802  (the name c10d calls)
        return BACKEND

    def _check_split(self, big, small, what: str) -> None:
        """all_gather_into_tensor / reduce_scatter_tensor: `big` holds one
        `small` per rank, of the same dtype (gloo's checks; a wrong size
        used to broadcast or cut chunks silently)."""
        if big.numel() != small.numel() * self.size():
            raise RuntimeError(
                f"{what}: the {'output' if what.startswith('all_gather') else 'input'} tensor must hold "
                f"world_size ({self.size()}) times the elements of the other: got {tuple(big.shape)} and "
                f"{tuple(small.shape)}")
        if big.dtype != small.dtype:
            raise RuntimeError(f"{what}: input and output must have the same dtype, got {small.dtype} and {big.dtype}"
                               if what.startswith("all_gather") else
                               f"{what}: input and output must have the same dtype, got {big.dtype} and {small.dtype}")

    def _on_host(self, tensors, collective):
        """Runs `collective` on host copies of `tensors`, then writes them back."""
        host = [_host(t) for t in tensors]
        collective(host).wait()
        for t, h in zip(tensors, host):
            _write_back(t, h)
        return _done(list(tensors))

    def _allreduce_host(self, host, op) -> None:
        """gloo's allreduce of host tensors in place. AVG, which gloo lacks
        (NCCL has it), is a sum divided by the group size."""
        opts = dist.AllreduceOptions()
        opts.reduceOp = dist.ReduceOp.SUM if op == dist.ReduceOp.AVG else op
        self._gloo.allreduce(host, opts).wait()
        if op == dist.ReduceOp.AVG:
            for h in host:
                _divide(h, self.size())

    def allreduce(self, tensors, opts=None):
        op = opts.reduceOp if opts is not None else dist.ReduceOp.SUM
        host = [_host(t) for t in tensors]
        self._allreduce_host(host, op)
        for t, h in zip(tensors, host):
            _write_back(t, h)
        return _done(list(tensors))

    def allreduce_coalesced(self, tensors, opts=None):
        opts = opts if opts is not None else dist.AllreduceCoalescedOptions()
        return self._on_host(tensors, lambda h: self._gloo.allreduce_coalesced(h, opts))

    def broadcast(self, tensors, opts=None):
        opts = opts if opts is not None else dist.BroadcastOptions()
        return self._on_host(tensors, lambda h: self._gloo.broadcast(h, opts))

    def reduce(self, tensors, opts=None):
        opts = opts if opts is not None else dist.ReduceOptions()
        average = opts.reduceOp == dist.ReduceOp.AVG
        gloo_opts = dist.ReduceOptions()
        gloo_opts.rootRank, gloo_opts.rootTensor = opts.rootRank, opts.rootTensor
        gloo_opts.reduceOp = dist.ReduceOp.SUM if average else opts.reduceOp
        host = [_host(t) for t in tensors]
        self._gloo.reduce(host, gloo_opts).wait()
        if self.rank() == opts.rootRank:
            for t, h in zip(tensors, host):
                if average:
                    _divide(h, self.size())
                _write_back(t, h)
        return _done(list(tensors))

    @staticmethod
    def _gathered_on_host(output_lists, inputs, collective):
        """Runs `collective(host output lists, host inputs)`, then writes the
        host outputs back (all_gather, gather)."""
        host_out = [[_host(t) for t in outs] for outs in output_lists]
        collective(host_out, [_host(t) for t in inputs]).wait()
        for outs, hosts in zip(output_lists, host_out):
            for t, h in zip(outs, hosts):
                _write_back(t, h)
        return _done([t for outs in output_lists for t in outs])

    def allgather(self, output_lists, inputs, opts=None):
        opts = opts if opts is not None else dist.AllgatherOptions()
        return self._gathered_on_host(output_lists, inputs, lambda o, i: self._gloo.allgather(o, i, opts))

    def _allgather_base(self, output, input, opts=None):
        """all_gather_into_tensor: the ranks' inputs stacked along dim 0."""
        self._check_split(output, input, "all_gather_into_tensor")
        chunks = list(_host(output).chunk(self.size()))
        self._gloo.allgather([chunks], [_host(input)], opts or dist.AllgatherOptions()).wait()
        _write_back(output, torch.cat(chunks))
        return _done([output])

    def reduce_scatter(self, outputs, input_lists, opts=None):
        """Each rank gets the reduction of every rank's i-th input: an
        allreduce of all of them, keeping this rank's part."""
        opts = opts if opts is not None else dist.ReduceScatterOptions()
        for out, inputs in zip(outputs, input_lists):
            full = torch.stack([_host(t) for t in inputs])
            self._allreduce_host([full], opts.reduceOp)
            _write_back(out, full[self.rank()])
        return _done(list(outputs))

    def _reduce_scatter_base(self, output, input, opts=None):
        """reduce_scatter_tensor: `input` is split along dim 0, one part per rank."""
        opts = opts if opts is not None else dist.ReduceScatterOptions()
        self._check_split(input, output, "reduce_scatter_tensor")
        full = _host(input).clone()
        self._allreduce_host([full], opts.reduceOp)
        _write_back(output, full.chunk(self.size())[self.rank()])
        return _done([output])

    # The names torch.distributed's tensor-in/tensor-out calls use.
    def all_gather_single(self, output, input, opts=None):
        return self._allgather_base(output, input, opts)

    def reduce_scatter_single(self, output, input, opts=None):
        return self._reduce_scatter_base(output, input, opts)

    def all_to_all_single(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        return self.alltoall_base(output, input, output_split_sizes, input_split_sizes, opts)

    def all_gather_single_coalesced(self, outputs, inputs, opts=None):
        for output, input in zip(outputs, inputs):
            self._allgather_base(output, input, opts)
        return _done(list(outputs))

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts=None):
        for output, input in zip(outputs, inputs):
            self._reduce_scatter_base(output, input, opts)
        return _done(list(outputs))

    allgather_into_tensor_coalesced = all_gather_single_coalesced
    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced

    def gather(self, output_lists, inputs, opts=None):
        opts = opts if opts is not None else dist.GatherOptions()
        return self._gathered_on_host(output_lists, inputs, lambda o, i: self._gloo.gather(o, i, opts))

    def scatter(self, outputs, input_lists, opts=None):
        opts = opts if opts is not None else dist.ScatterOptions()
        host_out = [_host(t) for t in outputs]
        self._gloo.scatter(host_out, [[_host(t) for t in ins] for ins in input_lists], opts).wait()
        for t, h in zip(outputs, host_out):
            _write_back(t, h)
        return _done(list(outputs))

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        opts = opts if opts is not None else dist.AllToAllOptions()
        host_out = _host(output)
        self._gloo.alltoall_base(host_out, _host(input), output_split_sizes, input_split_sizes, opts).wait()
        _write_back(output, host_out)
        return _done([output])

    def alltoall(self, outputs, inputs, opts=None):
        """List-form all_to_all (also the backward of the autograd
        all_gather): one all_to_all_single over the concatenations."""
        opts = opts if opts is not None else dist.AllToAllOptions()
        host_in = torch.cat([_host(t).reshape(-1) for t in inputs])
        host_out = torch.empty(sum(t.numel() for t in outputs), dtype=host_in.dtype)
        self._gloo.alltoall_base(host_out, host_in, [t.numel() for t in outputs],
                                 [t.numel() for t in inputs], opts).wait()
        for t, h in zip(outputs, host_out.split([t.numel() for t in outputs])):
            _write_back(t, h.view(t.shape))
        return _done(list(outputs))

    def send(self, tensors, dst, tag=0):
        # gloo's own asynchronous work: it keeps the host copies alive.
        return self._gloo.send([_host(t) for t in tensors], dst, tag)

    def recv(self, tensors, src, tag=0):
        return self._on_host(tensors, lambda h: self._gloo.recv(h, src, tag))

    def barrier(self, opts=None):
        self._gloo.barrier(opts if opts is not None else dist.BarrierOptions()).wait()
        return _done([])

    def monitored_barrier(self, opts=None, wait_all_ranks=False):
        if opts is None or opts.timeout is None:
            return self._gloo.monitored_barrier(wait_all_ranks=wait_all_ranks)
        return self._gloo.monitored_barrier(opts.timeout, wait_all_ranks)


def _create(store, rank, size, timeout) -> TpuBackend:
    return TpuBackend(store, rank, size, timeout)


def register() -> None:
    """Makes "tpu" a torch.distributed backend for tpu and CPU tensors, and
    the default one for tpu tensors (`init_process_group()` picks it)."""
    if not dist.is_available() or BACKEND.upper() in dist.Backend._plugins:
        return
    dist.Backend.register_backend(BACKEND, _create, devices=["cpu", "tpu"])
