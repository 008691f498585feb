"""The decoder every family shares: embedding, a stack of layers over the paged cache, final norm,
logits for the rows asked for. A family subclasses it with its own layer (``make_layer``), and its
embedding scale, logit scale / soft-cap and rotary tables where they differ."""

from __future__ import annotations

import torch
from torch import nn

from stencil.engine.attention import AttentionMetadata
from stencil.engine.models.layers import (
    RMSNorm,
    rope_inv_freq,
    rope_parameters,
    rope_table,
    set_weight,
)
from stencil.kernels import Kernels
from stencil.kernels.quant_weight import is_quantized


class DecoderForCausalLM(nn.Module):
    """Forward over a flat batch of the step's tokens; logits only for the rows asked for.

    Built on the meta device by the loader; ``init_rope()`` runs once the weights are real.
    Subclasses set ``embed_scale`` / ``logit_scale`` / ``logit_softcap`` and ``rope_types``
    (rotary table name -> the config's layer type, or None for its one table)."""

    embed_scale: float | None = None  # Gemma: sqrt(hidden)
    logit_scale: float | None = None  # Granite: logits / logits_scaling
    logit_softcap: float | None = None  # Gemma 2: softcap * tanh(logits / softcap)

    def __init__(self, config, max_positions: int) -> None:
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(
            self.make_layer(config, i) for i in range(config.num_hidden_layers)
        )
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.tie = bool(getattr(config, "tie_word_embeddings", False))
        if not self.tie:
            self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.max_positions = max_positions
        self.long_rope: dict[str, int] = {}  # LongRoPE table -> original context length

    def make_layer(self, config, index: int) -> nn.Module:
        raise NotImplementedError

    def rope_types(self) -> dict[str, str | None]:
        return {"default": None}

    def init_rope(self) -> None:
        """(Re)build each rotary table ``rope_<name> [max_positions, rotary_dim]`` (float32,
        ``[cos | sin]`` of the rotary_dim / 2 frequencies, times the rope type's attention
        factor; LongRoPE: the short-factor table, then the long-factor one); call after moving a
        meta-initialised model to a device."""
        device = self.norm.weight.device
        for name, layer_type in self.rope_types().items():
            params = rope_parameters(self.config, layer_type)
            table = rope_table(*rope_inv_freq(self.config, layer_type), self.max_positions)
            if params.get("rope_type") == "longrope":
                original = int(params["original_max_position_embeddings"])
                long = _longrope_inv_freq(self.config, layer_type, original)
                table = torch.cat((table, rope_table(*long, self.max_positions)))
                self.long_rope[name] = original
            self.register_buffer(f"rope_{name}", table.to(device), persistent=False)

    def forward(
        self, input_ids, positions, kv_caches, meta: AttentionMetadata, ops: Kernels
    ) -> torch.Tensor:
        hidden = self.embed(input_ids)  # [T, hidden]
        rope = {name: (positions, getattr(self, f"rope_{name}")) for name in self.rope_types()}
        for name, original in self.long_rope.items():
            rope[name] = (self._long_positions(positions, meta, original), rope[name][1])
        residual = None
        for layer, kv in zip(self.layers, kv_caches, strict=True):
            hidden, residual = layer(rope, hidden, residual, kv, meta, ops)
        return self.norm(hidden, ops, residual)[0]  # [T, hidden]

    def _long_positions(self, positions, meta: AttentionMetadata, original: int) -> torch.Tensor:
        """LongRoPE as transformers applies it to a prompt and its continuation: a token reads the
        long-factor half of the table (rows offset by ``max_positions``) when its position or its
        sequence's prompt passes the original length. Per token and prompt, so chunked prefill
        and recompute after preemption rotate every token as one prefill would."""
        q_lens = [b - a for a, b in zip(meta.cu_seqlens_q, meta.cu_seqlens_q[1:], strict=False)]
        long_prompt = torch.repeat_interleave(
            torch.tensor([p > original for p in meta.prompt_lens]), torch.tensor(q_lens)
        ).to(positions.device)  # [T]
        long = long_prompt | (positions >= original)
        return positions + long.to(positions.dtype) * self.max_positions

    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        weight = self.embed_tokens.weight
        if is_quantized(weight):  # rows dequantized from the kept codes
            hidden = weight.rows(input_ids, self.norm.weight.dtype)
        else:
            hidden = self.embed_tokens(input_ids)
        if self.embed_scale is not None:
            hidden = hidden * torch.tensor(self.embed_scale, dtype=hidden.dtype)
        return hidden

    def pack_linear_weights(self, pack) -> None:
        """Swap every projection weight for ``pack(weight)`` (a kernel set's own layout); a tied
        lm_head gets a packed copy of its own, the embedding keeps the plain one. Quantized
        weights are already in their kernel's layout: kept as they are (a quantized tied
        embedding serves both)."""
        for module in self.modules():
            if isinstance(module, nn.Linear) and isinstance(module.weight, torch.Tensor):
                set_weight(module, pack(module.weight))
        if self.tie and isinstance(self.embed_tokens.weight, torch.Tensor):
            self.lm_head = nn.Linear(
                self.config.hidden_size, self.config.vocab_size, bias=False, device="meta"
            )
            set_weight(self.lm_head, pack(self.embed_tokens.weight))
            self.tie = False

    def compute_logits(self, hidden: torch.Tensor, ops: Kernels) -> torch.Tensor:
        weight = self.embed_tokens.weight if self.tie else self.lm_head.weight
        logits = ops.linear(hidden.contiguous(), weight).float()  # [rows, vocab]
        if self.logit_scale is not None:
            logits /= self.logit_scale
        if self.logit_softcap is not None:
            logits = torch.tanh(logits / self.logit_softcap) * self.logit_softcap
        return logits


def _longrope_inv_freq(config, layer_type, original: int) -> tuple[torch.Tensor, float]:
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    kw = {} if layer_type is None else {"layer_type": layer_type}
    inv, factor = ROPE_INIT_FUNCTIONS["longrope"](
        config, torch.device("cpu"), seq_len=original + 1, **kw
    )
    return inv.float(), float(factor)
