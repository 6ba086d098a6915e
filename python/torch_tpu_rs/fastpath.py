"""The inference fast paths of nn.MultiheadAttention and nn.TransformerEncoderLayer.

In eval mode without autograd, those modules call fused ops
(`_native_multi_head_attention`, `_transformer_encoder_layer_fwd`) for the
CPU, CUDA and the PrivateUse1 device alike; PyTorch has CPU and CUDA kernels
for them and no decomposition. Here each is the composition of the ops the
modules' slow path runs (`F.multi_head_attention_forward`, layer_norm,
linear), which the engine lowers, so results match the modules' slow path
(the tests compare them with the CPU's fast path too). Where PyTorch's CPU
kernels differ from their own slow path, this follows the slow path.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

_lib = torch.library.Library("aten", "IMPL")


def _attention(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias, proj_weight, proj_bias,
               mask, need_weights, average_attn_weights, mask_type):
    """Batch-first attention; masks as MultiheadAttention.merge_masks made them:
    type 1 is a [B, S] key padding mask, type 2 a [B, H, L, S] attention mask,
    type 0 an [L, S] one."""
    batch, length = query.shape[0], query.shape[1]
    attn_mask = key_padding_mask = None
    if mask is not None:
        if mask_type == 1:
            key_padding_mask = mask
        elif mask.dim() == 4:
            attn_mask = mask.reshape(batch * num_head, length, mask.shape[-1])
        else:
            attn_mask = mask
    q, k, v = (t.transpose(0, 1) for t in (query, key, value))
    out, weights = F.multi_head_attention_forward(
        q, k, v, embed_dim, num_head, qkv_weight, qkv_bias, None, None, False, 0.0,
        proj_weight, proj_bias, training=False, key_padding_mask=key_padding_mask,
        need_weights=need_weights, attn_mask=attn_mask, average_attn_weights=average_attn_weights,
    )
    return out.transpose(0, 1), weights


def _native_multi_head_attention(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias,
                                 proj_weight, proj_bias, mask=None, need_weights=True,
                                 average_attn_weights=True, mask_type=None):
    return _attention(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias, proj_weight,
                      proj_bias, mask, need_weights, average_attn_weights, mask_type)


def _transformer_encoder_layer_fwd(src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight,
                                   proj_bias, use_gelu, norm_first, eps, norm_weight_1, norm_bias_1,
                                   norm_weight_2, norm_bias_2, ffn_weight_1, ffn_bias_1, ffn_weight_2,
                                   ffn_bias_2, mask=None, mask_type=None):
    def attend(x):
        return _attention(x, x, x, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias,
                          mask, False, True, mask_type)[0]

    def feed_forward(x):
        hidden = F.linear(x, ffn_weight_1, ffn_bias_1)
        hidden = F.gelu(hidden) if use_gelu else F.relu(hidden)
        return F.linear(hidden, ffn_weight_2, ffn_bias_2)

    def norm1(x):
        return F.layer_norm(x, (embed_dim,), norm_weight_1, norm_bias_1, eps)

    def norm2(x):
        return F.layer_norm(x, (embed_dim,), norm_weight_2, norm_bias_2, eps)

    x = src
    if norm_first:
        x = x + attend(norm1(x))
        return x + feed_forward(norm2(x))
    x = norm1(x + attend(x))
    return norm2(x + feed_forward(x))


def _no_nested_tensors(op: str):
    """nn.TransformerEncoder (eval, no grad, a src_key_padding_mask) turns its
    batch into a nested tensor; tpu has none. Name the way out."""
    def refuse(t, mask, *args, **kwargs):
        raise NotImplementedError(
            f"aten::{op}: the tpu device has no nested tensors (input of shape {list(t.shape)}, "
            f"mask of shape {list(mask.shape)}). nn.TransformerEncoder converts its batch to one "
            "in eval mode with a src_key_padding_mask: build it with enable_nested_tensor=False. "
            "Outputs at unpadded positions are then the same; padded positions are computed "
            "instead of zeroed, as in PyTorch's own path with enable_nested_tensor=False."
        )
    return refuse


def install() -> None:
    _lib.impl("_native_multi_head_attention", _native_multi_head_attention, "PrivateUse1")
    _lib.impl("_transformer_encoder_layer_fwd", _transformer_encoder_layer_fwd, "PrivateUse1")
    for op in ("_nested_tensor_from_mask_left_aligned", "_nested_tensor_from_mask"):
        _lib.impl(op, _no_nested_tensors(op), "PrivateUse1")
