"""Model training on tpu matches CPU step for step."""
import pytest
import torch

from torch_tpu_rs.models import MLP, Llama, LlamaConfig

STEPS = 20


def train(model_fn, batches, loss_fn, device, opt_fn):
    torch.manual_seed(0)
    model = model_fn().to(device)
    opt = opt_fn(model.parameters())
    losses = []
    for batch in batches:
        batch = [b.to(device) for b in batch]
        loss = loss_fn(model, *batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, model


def compare(model_fn, batches, loss_fn, opt_fn, rtol=1e-4):
    cpu_losses, cpu_model = train(model_fn, batches, loss_fn, "cpu", opt_fn)
    tpu_losses, tpu_model = train(model_fn, batches, loss_fn, "tpu", opt_fn)
    for step, (c, t) in enumerate(zip(cpu_losses, tpu_losses)):
        assert t == pytest.approx(c, rel=rtol), f"step {step}: tpu loss {t} vs cpu {c}"
    assert cpu_losses[-1] < 0.9 * cpu_losses[0]  # it actually trained
    for (name, p_cpu), p_tpu in zip(cpu_model.named_parameters(), tpu_model.parameters()):
        torch.testing.assert_close(p_tpu.detach().cpu(), p_cpu.detach(), rtol=1e-3, atol=1e-4, msg=name)


# Two batches in turn: the loss must fall as the model memorizes them.
def mlp_batches():
    g = torch.Generator().manual_seed(1)
    two = [(torch.randn(16, 32, generator=g), torch.randint(0, 10, (16,), generator=g)) for _ in range(2)]
    return [two[i % 2] for i in range(STEPS)]


def mlp_loss(model, x, y):
    return torch.nn.functional.cross_entropy(model(x), y)


def llama_batches():
    g = torch.Generator().manual_seed(2)
    two = [(torch.randint(0, 256, (4, 17), generator=g),) for _ in range(2)]
    return [two[i % 2] for i in range(STEPS)]


def llama_loss(model, tokens):
    return model.loss(tokens)


OPTIMIZERS = {
    "adamw_foreach": lambda p: torch.optim.AdamW(p, lr=1e-3, foreach=True),
    "adamw_forloop": lambda p: torch.optim.AdamW(p, lr=1e-3, foreach=False),
    "sgd_foreach": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, foreach=True),
    "sgd_forloop": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, foreach=False),
}


@pytest.mark.parametrize("opt", list(OPTIMIZERS))
def test_mlp_trains_like_cpu(opt):
    compare(lambda: MLP(), mlp_batches(), mlp_loss, OPTIMIZERS[opt])


@pytest.mark.parametrize("opt", ["adamw_foreach", "adamw_forloop", "sgd_foreach"])
def test_llama_trains_like_cpu(opt):
    cfg = LlamaConfig(vocab_size=256, dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_seq_len=32)
    compare(lambda: Llama(cfg), llama_batches(), llama_loss, OPTIMIZERS[opt])
