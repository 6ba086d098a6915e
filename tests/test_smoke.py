"""The smallest end-to-end checks: a tpu tensor round-trips and computes."""
import torch

from conftest import assert_same, run_both


def test_device_is_tpu():
    x = torch.ones(3, device="tpu")
    assert x.device.type == "tpu"
    assert x.is_tpu


def test_roundtrip_values():
    cpu = torch.randn(4, 5)
    assert torch.equal(cpu.to("tpu").cpu(), cpu)


def test_add_and_scalar_mul():
    a, b = torch.randn(4, 5), torch.randn(4, 5)
    assert_same(*run_both(lambda x, y: x + y * 2.5, a, b))


def test_view_write_updates_base():
    def f(z):
        z = z.clone()
        z[:, 1] += 10
        return z

    assert_same(*run_both(f, torch.arange(6.0).reshape(2, 3)))
