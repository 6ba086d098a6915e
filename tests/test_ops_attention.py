"""Scaled-dot-product attention on tpu vs CPU: the public F.scaled_dot_product_attention
(whatever path it takes) and the fused `_scaled_dot_product_fused_attention_overrideable`
lowering called directly, forward and gradients."""
import copy

import pytest
import torch
import torch.nn.functional as F

from conftest import assert_same

OVR = torch.ops.aten._scaled_dot_product_fused_attention_overrideable
BWD = torch.ops.aten._scaled_dot_product_fused_attention_overrideable_backward


def _symint_returns_ok():
    # The fused forward returns SymInt max_q/max_k; the C++ fallback must map
    # SymInt returns (c10::TypeKind::SymIntType) to numbers.
    x = torch.zeros(1, 1, 1, 1, device="tpu")
    try:
        OVR(x, x, x)
    except RuntimeError as e:
        if "Expected SymInt or int but got None" in str(e):
            return False
        raise
    return True


def need_symint():
    # The fused attention op returns SymInts; the engine must hand them back.
    assert _symint_returns_ok(), "SymInt returns of engine ops must reach Python"

CASES = [
    # (q shape, kv heads, S, mask kind, is_causal, scale)
    ((2, 3, 5, 4), 3, 6, None, False, None),
    ((2, 3, 5, 4), 3, 5, None, True, None),
    ((1, 2, 4, 8), 2, 7, "float", False, 0.3),
    ((2, 2, 4, 4), 2, 6, "bool", False, None),
    ((2, 2, 4, 4), 2, 6, "bool_rowmasked", False, None),
    ((1, 4, 5, 4), 2, 6, "float_bcast", False, None),  # GQA
    ((1, 6, 3, 4), 2, 3, None, True, 0.5),  # GQA + causal
]


def make(case, dtype):
    qs, hk, s, mk, causal, scale = case
    g = torch.Generator().manual_seed(0)
    q = torch.randn(qs, generator=g).to(dtype)
    k = torch.randn(qs[0], hk, s, qs[3], generator=g).to(dtype)
    v = torch.randn(qs[0], hk, s, 3, generator=g).to(dtype)
    L = qs[2]
    mask = None
    if mk == "float":
        mask = torch.randn(qs[0], qs[1], L, s, generator=g).to(dtype)
    elif mk == "float_bcast":
        mask = torch.randn(L, s, generator=g).to(dtype)
    elif mk == "bool":
        mask = torch.rand(L, s, generator=g) > 0.3
        mask[:, 0] = True
    elif mk == "bool_rowmasked":
        mask = torch.rand(L, s, generator=g) > 0.3
        mask[1] = False
    return q, k, v, mask, causal, scale


def sdpa_cpu(q, k, v, mask, causal, scale):
    gqa = q.shape[1] != k.shape[1]
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, scale=scale, enable_gqa=gqa)


def ovr(q, k, v, mask, causal, scale):
    if mask is not None and mask.dtype == torch.bool:
        mask = torch.zeros(mask.shape, dtype=q.dtype, device=q.device).masked_fill(~mask, float("-inf"))
    return OVR(q, k, v, mask, 0.0, causal, False, scale=scale)[0]


def check(fn, case, dtype, grad):
    q, k, v, mask, causal, scale = make(case, dtype)
    tol = dict(rtol=2e-2, atol=2e-2) if dtype == torch.bfloat16 else dict(rtol=1e-4, atol=1e-5)
    leaves_c = [q, k, v] + ([mask] if mask is not None and mask.is_floating_point() else [])
    leaves_c = [x.clone().requires_grad_(grad) for x in leaves_c]
    leaves_t = [x.detach().to("tpu").requires_grad_(grad) for x in leaves_c]
    mask_t = mask.to("tpu") if mask is not None else None

    def call(leaves, m):
        qq, kk, vv = leaves[:3]
        m = leaves[3] if len(leaves) > 3 else m
        return qq, kk, vv, m

    out_c = sdpa_cpu(*call(leaves_c, mask), causal, scale)
    out_t = fn(*call(leaves_t, mask_t), causal, scale)
    assert_same(out_t, out_c, **tol)
    if grad:
        go = torch.randn(out_c.shape).to(dtype)
        gc = torch.autograd.grad(out_c, leaves_c, go)
        gt = torch.autograd.grad(out_t, leaves_t, go.to("tpu"))
        for a, b in zip(gt, gc):
            assert_same(a, b, **tol)


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_fused_overrideable(case, dtype):
    need_symint()
    check(ovr, CASES[case], dtype, grad=dtype != torch.bfloat16)


@pytest.mark.parametrize("case", range(len(CASES)))
def test_public_sdpa(case):
    def pub(q, k, v, m, causal, scale):
        return sdpa_cpu(q, k, v, m, causal, scale)

    check(pub, CASES[case], torch.float32, grad=True)


def test_fused_lse_and_dropout_error():
    need_symint()
    q, k, v, *_ = make(CASES[0], torch.float32)
    out = OVR(q.to("tpu"), k.to("tpu"), v.to("tpu"))
    s = (q @ k.transpose(-1, -2)) / 2.0
    assert_same(out[1], torch.logsumexp(s, -1), rtol=1e-4, atol=1e-5)
    assert out[4] == 5 and out[5] == 6
    with pytest.raises(NotImplementedError):
        OVR(q.to("tpu"), k.to("tpu"), v.to("tpu"), None, 0.5)


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fused_backward_direct(case, dtype):
    q, k, v, mask, causal, scale = make(CASES[case], dtype)
    if mask is not None and mask.dtype == torch.bool:
        mask = torch.zeros(mask.shape, dtype=dtype).masked_fill(~mask, float("-inf"))
    lc = [x.clone().requires_grad_() for x in (q, k, v)] + ([mask.clone().requires_grad_()] if mask is not None else [])
    out = sdpa_cpu(lc[0], lc[1], lc[2], lc[3] if mask is not None else None, causal, scale)
    go = torch.randn(out.shape, dtype=dtype)
    gc = torch.autograd.grad(out, lc, go)

    def t(x):
        return x.to("tpu") if x is not None else None

    z = torch.zeros((), dtype=torch.int64, device="tpu")
    e = torch.zeros(0, dtype=torch.int64, device="tpu")
    lse = torch.zeros(out.shape[:-1], device="tpu")
    gt = BWD(t(go), t(q), t(k), t(v), t(mask), [True] * 4, t(out.detach()), lse, e, e,
             q.shape[2], k.shape[2], 0.0, causal, z, z, scale=scale)
    tol = dict(rtol=1e-4, atol=1e-5)
    for a, b in zip(gt, gc):
        assert_same(a, b, **tol)


# ---- Cholesky family (stablehlo.cholesky / triangular_solve) ----

def _spd(*s, dtype):
    g = torch.Generator().manual_seed(1)
    a = torch.randn(*s, generator=g, dtype=dtype)
    return a @ a.mT + s[-1] * torch.eye(s[-1], dtype=dtype)


CHOL_FNS = {
    "cholesky_ex": lambda a, b: torch.linalg.cholesky_ex(a)[0],
    "cholesky_ex_upper": lambda a, b: torch.linalg.cholesky_ex(a, upper=True)[0],
    "linalg_cholesky": lambda a, b: torch.linalg.cholesky(a),
    "triangular_solve": lambda a, b: torch.triangular_solve(b, torch.linalg.cholesky(a), upper=False)[0],
    "triangular_solve_t_upper": lambda a, b: torch.triangular_solve(
        b, torch.linalg.cholesky(a).mT, upper=True, transpose=True)[0],
    "solve_triangular": lambda a, b: torch.linalg.solve_triangular(torch.linalg.cholesky(a), b, upper=False),
    "solve_triangular_right_unit": lambda a, b: torch.linalg.solve_triangular(
        torch.linalg.cholesky(a).mT, b.mT, upper=True, left=False, unitriangular=True),
    "cholesky_solve": lambda a, b: torch.cholesky_solve(b, torch.linalg.cholesky(a)),
    "cholesky_solve_upper": lambda a, b: torch.cholesky_solve(b, torch.linalg.cholesky(a, upper=True), upper=True),
    "cholesky_inverse": lambda a, b: torch.cholesky_inverse(torch.linalg.cholesky(a)),
    "cholesky_inverse_upper": lambda a, b: torch.cholesky_inverse(torch.linalg.cholesky(a, upper=True), upper=True),
}


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name", list(CHOL_FNS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cholesky_family(name, dtype):
    fn = CHOL_FNS[name]
    a = _spd(2, 4, 4, dtype=dtype)
    b = torch.randn(3, 1, 4, 2, dtype=dtype)  # batch-broadcast against a
    ac, bc = a.clone().requires_grad_(), b.clone().requires_grad_()
    at, bt = a.to("tpu").requires_grad_(), b.to("tpu").requires_grad_()
    oc, ot = fn(ac, bc), fn(at, bt)
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else {}
    assert_same(ot, oc, **tol)
    go = torch.randn(oc.shape, dtype=dtype)
    leaves_c = [ac, bc] if _inputs_used(name) else [ac]
    leaves_t = [at, bt][: len(leaves_c)]
    gc = torch.autograd.grad(oc, leaves_c, go)
    gt = torch.autograd.grad(ot, leaves_t, go.to("tpu"))
    for x, y in zip(gt, gc):
        assert_same(x, y, **tol)


def _inputs_used(name):
    return [] if name.startswith(("cholesky_ex", "linalg_cholesky", "cholesky_inverse")) else [True]


def test_cholesky_errors():
    a = _spd(2, 3, 3, dtype=torch.float64)
    a[1, 2, 2] = -100.0
    info_c = torch.linalg.cholesky_ex(a)[1]
    info_t = torch.linalg.cholesky_ex(a.to("tpu"))[1]
    assert info_t.dtype == info_c.dtype and info_t.shape == info_c.shape
    # Zero exactly where CPU is zero (the reported minor order may differ: XLA NaNs the whole factor).
    assert torch.equal(info_t.cpu() == 0, info_c == 0)
    with pytest.raises(RuntimeError):
        torch.linalg.cholesky(a.to("tpu"))
    with pytest.raises(RuntimeError):
        torch.linalg.cholesky(torch.eye(3, dtype=torch.bfloat16).to("tpu"))
    e = torch.linalg.cholesky_ex(torch.zeros(0, 0).to("tpu"))
    assert e[0].shape == (0, 0) and e[1].item() == 0


# nn.MultiheadAttention and nn.TransformerEncoderLayer take PyTorch's fused
# inference ops in eval mode without autograd (for the CPU, CUDA and tpu
# alike): torch_tpu_rs/fastpath.py composes them from lowered ops.
_X = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(0))
_Y = torch.randn(2, 7, 8, generator=torch.Generator().manual_seed(1))
_PAD = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
_CAUSAL = torch.triu(torch.ones(5, 5, dtype=torch.bool), 1)
MHA_CASES = {
    "self": lambda m, x, y, pad, causal: m(x, x, x),
    "no weights": lambda m, x, y, pad, causal: m(x, x, x, need_weights=False),
    "padding mask": lambda m, x, y, pad, causal: m(x, x, x, key_padding_mask=pad),
    "causal mask": lambda m, x, y, pad, causal: m(x, x, x, attn_mask=causal),
    "both, per head": lambda m, x, y, pad, causal: m(
        x, x, x, attn_mask=causal, key_padding_mask=pad, average_attn_weights=False
    ),
    "cross": lambda m, x, y, pad, causal: m(x, y, y),
}


def _fast_path_both(module, fn):
    torch.manual_seed(0)
    module = module.eval()
    with torch.no_grad():
        cpu = fn(module, _X, _Y, _PAD, _CAUSAL)
        tpu = fn(copy.deepcopy(module).to("tpu"), *(t.to("tpu") for t in (_X, _Y, _PAD, _CAUSAL)))
    return tpu, cpu


@pytest.mark.parametrize("case", list(MHA_CASES))
def test_multihead_attention_inference_fast_path(case, mode):
    tpu, cpu = _fast_path_both(torch.nn.MultiheadAttention(8, 2, batch_first=True), MHA_CASES[case])
    assert_same(tpu[0], cpu[0], rtol=1e-4, atol=1e-5)
    if cpu[1] is None:
        assert tpu[1] is None
    else:
        assert_same(tpu[1], cpu[1], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_transformer_encoder_layer_inference_fast_path(norm_first, activation, mode):
    layer = torch.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True, norm_first=norm_first, activation=activation)
    additive = torch.zeros(5, 5).masked_fill(_CAUSAL, float("-inf"))
    tpu, cpu = _fast_path_both(layer, lambda m, x, y, pad, causal: m(x, src_mask=additive.to(x.device)))
    assert_same(tpu, cpu, rtol=1e-4, atol=1e-5)
    encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
    tpu, cpu = _fast_path_both(encoder, lambda m, x, y, pad, causal: m(x, src_key_padding_mask=pad))
    assert_same(tpu, cpu, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mask_check", [True, False])
def test_transformer_encoder_nested_path_names_the_way_out(mask_check):
    """Eval, no grad and a padding mask send nn.TransformerEncoder to nested
    tensors, which tpu lacks: the error says how to avoid them, and the
    suggested encoder matches the CPU at the unpadded positions."""
    layer = torch.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)
    cpu = torch.nn.TransformerEncoder(layer, 2, mask_check=mask_check).eval()
    tpu = copy.deepcopy(cpu).to("tpu")
    with torch.no_grad():
        with pytest.raises(NotImplementedError, match="enable_nested_tensor=False"):
            tpu(_X.to("tpu"), src_key_padding_mask=_PAD.to("tpu"))
        expected = cpu(_X, src_key_padding_mask=_PAD)
        suggested = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
        suggested.load_state_dict(cpu.state_dict())
        got = suggested.to("tpu")(_X.to("tpu"), src_key_padding_mask=_PAD.to("tpu")).cpu()
    real = ~_PAD
    assert expected[~real].abs().max() == 0  # the CPU's nested path zeroes padded positions
    torch.testing.assert_close(got[real], expected[real], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("compiled", [False, True])
def test_flex_attention_on_tpu(compiled):
    """FlexAttention's dense path with a causal block mask and a score_mod,
    forward and backward, against SDPA on the CPU with the same bias."""
    import warnings

    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    torch.manual_seed(0)
    B, H, S, D = 2, 2, 32, 8
    q, k, v = [torch.randn(B, H, S, D) for _ in range(3)]

    def causal(b, h, qi, ki):
        return qi >= ki

    def bias(score, b, h, qi, ki):
        return score + (qi - ki) * 0.01

    fn = torch.compile(flex_attention, backend="tpu") if compiled else flex_attention
    mask = create_block_mask(causal, B=None, H=None, Q_LEN=S, KV_LEN=S, device="tpu")
    tq, tk, tv = [t.to("tpu").requires_grad_() for t in (q, k, v)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # eager FlexAttention warns that it is the reference path
        out = fn(tq, tk, tv, score_mod=bias, block_mask=mask)
    out.sum().backward()

    cq, ck, cv = [t.clone().requires_grad_() for t in (q, k, v)]
    i = torch.arange(S)
    attn_bias = ((i[:, None] - i[None, :]) * 0.01).masked_fill(i[:, None] < i[None, :], float("-inf"))
    ref = F.scaled_dot_product_attention(cq, ck, cv, attn_mask=attn_bias)
    ref.sum().backward()
    assert_same(out.detach(), ref.detach(), atol=1e-5)
    for got, want in ((tq, cq), (tk, ck), (tv, cv)):
        assert_same(got.grad, want.grad, atol=1e-4)
