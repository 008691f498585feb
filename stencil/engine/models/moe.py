"""Mixture-of-experts feed-forward blocks: Qwen2-MoE (with its sigmoid-gated shared expert),
Qwen3-MoE, Mixtral and GPT-OSS (biased router, clamped SwiGLU, expert biases).

A step's rows are routed (softmax then top-k, renormalised or not; GPT-OSS: top-k of the biased
logits, then a softmax over those k), then grouped by expert: each expert with routed rows runs
its two linears once over exactly those rows, and the weighted outputs are scattered back with
one ``index_add_``. Experts are ordinary ``gate_up_proj`` / ``down_proj`` linears, so a GGUF file's
experts stay in their stored quantization (``quantized.py`` swaps the weights) and fp32 / bf16
ones are packed like any projection.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import torch
from torch import nn

from stencil.engine.errors import ConfigError
from stencil.kernels import Kernels, reference

MOE_MODEL_TYPES = ("qwen2_moe", "qwen3_moe", "mixtral", "gpt_oss")


@dataclass(frozen=True, slots=True)
class MoeSpec:
    """What changes the math of one model type's MoE block (read from its config)."""

    num_experts: int
    top_k: int
    intermediate: int
    renormalize: bool  # top-k probabilities divided by their sum
    softmax_after_topk: bool  # GPT-OSS: top-k of the logits, softmax over the k
    bias: bool  # router and expert biases (GPT-OSS)
    shared_intermediate: int  # 0: no shared expert
    swiglu_limit: float | None  # GPT-OSS's clamped SwiGLU
    swiglu_alpha: float


def moe_spec(config) -> MoeSpec | None:
    """The config's MoE block, or None for a dense model. Unsupported settings raise ConfigError."""
    kind = config.model_type
    if kind not in MOE_MODEL_TYPES:
        return None
    act = getattr(config, "hidden_act", "silu")
    if act != "silu":
        raise ConfigError(f"{kind}: hidden_act {act!r} is not supported (only 'silu')")
    if float(getattr(config, "router_jitter_noise", 0.0) or 0.0) != 0.0:
        raise ConfigError(f"{kind}: router_jitter_noise is training-only and not supported")
    oss = kind == "gpt_oss"
    experts = config.num_experts if kind.startswith("qwen") else config.num_local_experts
    inter = config.moe_intermediate_size if kind.startswith("qwen") else config.intermediate_size
    return MoeSpec(
        num_experts=int(experts),
        top_k=int(config.num_experts_per_tok),
        intermediate=int(inter),
        renormalize=kind == "mixtral" or bool(getattr(config, "norm_topk_prob", False)),
        softmax_after_topk=oss,
        bias=oss,
        shared_intermediate=int(getattr(config, "shared_expert_intermediate_size", 0) or 0),
        swiglu_limit=float(config.swiglu_limit) if oss else None,
        swiglu_alpha=float(getattr(config, "swiglu_alpha", 1.0)) if oss else 1.0,
    )


def is_sparse_layer(config, layer: int) -> bool:
    """Qwen-MoE's ``mlp_only_layers`` and ``decoder_sparse_step`` leave some layers dense."""
    if config.model_type not in ("qwen2_moe", "qwen3_moe"):
        return True
    step = int(getattr(config, "decoder_sparse_step", 1) or 1)
    only = getattr(config, "mlp_only_layers", None) or []
    return layer not in only and (layer + 1) % step == 0


def route(logits: torch.Tensor, spec: MoeSpec) -> tuple[torch.Tensor, torch.Tensor]:
    """``logits [T, E]`` (fp32) -> ``(weights [T, k] fp32, expert ids [T, k] int64)``."""
    if spec.softmax_after_topk:
        top, ids = torch.topk(logits, spec.top_k, dim=-1)
        return top.softmax(-1), ids
    weights, ids = torch.topk(logits.softmax(-1), spec.top_k, dim=-1)
    if spec.renormalize:
        weights = weights / weights.sum(-1, keepdim=True)
    return weights, ids


def clamped_swiglu(gate_up: torch.Tensor, limit: float, alpha: float) -> torch.Tensor:
    """GPT-OSS: ``gate_up [T, 2I]`` (gate rows first) -> ``(up + 1) * gate * sigmoid(alpha *
    gate)`` with gate clamped above at ``limit`` and up to ``[-limit, limit]``: ``[T, I]``."""
    gate, up = gate_up.chunk(2, dim=-1)
    gate = gate.clamp(max=limit)
    up = up.clamp(min=-limit, max=limit)
    return (up + 1) * (gate * torch.sigmoid(gate * alpha))


class Expert(nn.Module):
    """One expert (or the shared expert): ``down(act(gate_up(x)))``."""

    def __init__(self, hidden: int, inter: int, bias: bool, spec: MoeSpec) -> None:
        super().__init__()
        self.inter = inter
        self.gate_up_proj = nn.Linear(hidden, 2 * inter, bias=bias)
        self.down_proj = nn.Linear(inter, hidden, bias=bias)
        self.limit, self.alpha = spec.swiglu_limit, spec.swiglu_alpha

    def forward(self, x: torch.Tensor, ops: Kernels) -> torch.Tensor:
        gate_up = ops.linear(x, self.gate_up_proj.weight, self.gate_up_proj.bias)  # [T, 2I]
        return ops.linear(self.activation(gate_up, ops), self.down_proj.weight, self.down_proj.bias)

    def activation(self, gate_up: torch.Tensor, ops: Kernels) -> torch.Tensor:
        """``gate_up [T, 2I]`` -> ``[T, I]``: SiLU(gate) * up, or GPT-OSS's clamped SwiGLU."""
        if self.limit is not None:
            return clamped_swiglu(gate_up, self.limit, self.alpha)
        act = gate_up.new_empty(gate_up.shape[0], self.inter)
        ops.silu_and_mul(act, gate_up)
        return act


class SparseMoeBlock(nn.Module):
    """Router + experts (+ Qwen2-MoE's shared expert behind a sigmoid gate)."""

    def __init__(self, config, spec: MoeSpec) -> None:
        super().__init__()
        hidden = config.hidden_size
        self.spec = spec
        self.router = nn.Linear(hidden, spec.num_experts, bias=spec.bias)
        self.experts = nn.ModuleList(
            Expert(hidden, spec.intermediate, spec.bias, spec) for _ in range(spec.num_experts)
        )
        if spec.shared_intermediate:
            self.shared_expert = Expert(hidden, spec.shared_intermediate, False, spec)
            self.shared_expert_gate = nn.Linear(hidden, 1, bias=False)
        self._expert_params: tuple | None = None  # expert_params()

    def forward(self, x: torch.Tensor, ops: Kernels) -> torch.Tensor:  # x [T, hidden]
        logits = ops.linear(x, self.router.weight, self.router.bias).float()  # [T, E]
        weights, ids = route(logits, self.spec)
        out = self.run_experts(x, weights, ids, ops)
        if self.spec.shared_intermediate:
            gate = torch.sigmoid(ops.linear(x, self.shared_expert_gate.weight))  # [T, 1]
            out += gate * self.shared_expert(x, ops)
        return out

    def run_experts(
        self, x: torch.Tensor, weights: torch.Tensor, ids: torch.Tensor, ops: Kernels
    ) -> torch.Tensor:
        """Rows grouped by expert; each expert's two linears run once over its rows (one call
        for all experts where the kernel set has ``grouped_linear``, the gather of the rows and
        the weighted sum back into each token's row inside it); experts without rows skip."""
        k = ids.shape[1]
        flat = ids.flatten()  # [T * k]
        order = torch.argsort(flat, stable=True)  # assignments grouped by expert
        counts = torch.bincount(flat, minlength=self.spec.num_experts).tolist()
        tokens = order // k  # [T * k] row of each grouped assignment
        scale = weights.flatten()[order].to(x.dtype).unsqueeze(1)  # [T * k, 1]
        grouped = ops.grouped_linear or partial(reference.grouped_linear, linear=ops.linear)
        gate_up, gate_up_bias, down, down_bias = self.expert_params()
        h = grouped(x, gate_up, counts, gate_up_bias, rows=tokens)  # [T * k, 2I], x's rows gathered
        act = self.experts[0].activation(h, ops)  # [T * k, I]
        combine = (tokens, scale, x.shape[0])  # weighted back into each token's row in the call
        return grouped(act, down, counts, down_bias, combine=combine)  # [T, hidden]

    def expert_params(self) -> tuple:
        """``(gate_up weights, their biases or None, down weights, their biases or None)``, tuples
        over the experts, built once (a decode step's Python time at one row) and again when the
        experts' weights were swapped (loading, packing: every expert's at once)."""
        first, last = self.experts[0], self.experts[-1]
        probe = (first.gate_up_proj.weight, last.gate_up_proj.weight)
        probe += (first.down_proj.weight, last.down_proj.weight)
        cached = self._expert_params
        if cached is None or any(a is not b for a, b in zip(cached[1], probe, strict=True)):
            gate_up = tuple(e.gate_up_proj for e in self.experts)
            down = tuple(e.down_proj for e in self.experts)
            bias = self.spec.bias
            params = (
                tuple(m.weight for m in gate_up),
                tuple(m.bias for m in gate_up) if bias else None,
                tuple(m.weight for m in down),
                tuple(m.bias for m in down) if bias else None,
            )
            cached = self._expert_params = (params, probe)
        return cached[0]


def map_moe_weight(name: str, tensor: torch.Tensor, config) -> list[tuple] | None:
    """HF MoE weight names (``model.`` stripped) -> ``(our name, tensor, shard or None)`` list;
    None where the name is not an MoE weight of its own (``map_weight`` handles it)."""
    kind = config.model_type
    if kind not in MOE_MODEL_TYPES:
        return None
    if kind == "mixtral" and ".block_sparse_moe." in name:
        name = name.replace(".block_sparse_moe.", ".mlp.")
        for old, new, shard in (("w1", "gate_up_proj", 0), ("w3", "gate_up_proj", 1)):
            if f".{old}." in name:
                return [(name.replace(f".{old}.", f".{new}."), tensor, shard)]
        if ".w2." in name:
            return [(name.replace(".w2.", ".down_proj."), tensor, None)]
    if name.endswith("mlp.gate.weight"):  # Qwen / Mixtral router
        return [(name.replace("mlp.gate.", "mlp.router."), tensor, None)]
    if name.endswith(".sinks.weight"):  # GGUF's attn_sinks
        return [(name[: -len(".weight")], tensor, None)]
    if name.endswith("shared_expert_gate.weight") and tensor.ndim == 1:  # GGUF: [hidden]
        return [(name, tensor.reshape(1, -1), None)]
    leaf = name.rsplit(".", 1)[-1]
    if kind == "gpt_oss" and ".mlp.experts." in name and leaf.startswith(("gate_up", "down")):
        return _gpt_oss_experts(name, tensor)
    return None


def _gpt_oss_experts(name: str, tensor: torch.Tensor) -> list[tuple]:
    """GPT-OSS stores experts stacked: ``gate_up_proj [E, H, 2I]`` with gate and up interleaved
    along the last dim, ``down_proj [E, I, H]``, biases ``[E, 2I]`` / ``[E, H]``."""
    prefix, leaf = name.rsplit(".", 1)
    tensor = torch.as_tensor(tensor)  # numpy from the weight-only quantization path
    out = []
    for e in range(tensor.shape[0]):
        t = tensor[e]
        if leaf.startswith("gate_up"):
            t = torch.cat((t[..., ::2], t[..., 1::2]), dim=-1)  # gate columns, then up
        target = f"{prefix}.{e}.{'gate_up_proj' if leaf.startswith('gate_up') else 'down_proj'}"
        if leaf.endswith("_bias"):
            out.append((f"{target}.bias", t.contiguous(), None))
        else:
            out.append((f"{target}.weight", t.T.contiguous(), None))  # [out, in]
    return out
