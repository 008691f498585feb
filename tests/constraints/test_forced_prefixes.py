"""Where the next bytes are forced, the mask allows every token spelling a prefix of them, not
only llguidance's own tokenization of the forced bytes: a word the model began (`A`, `gn` of
`Agnieszka`, forced on by grounding or by an enum) can go on in the tokenizer's own tokens
(`iesz`, `ka`), each accepted. Oracles: the real tokenizers' own encoding of the answer and
llguidance's ``compute_ff_bytes``."""

from __future__ import annotations

import json

import numpy as np
import pytest

from stencil.constraints import Constraint, allocate_token_bitmask, bitmask_to_bool

DOC = "Present: Zbigniew Kaczmarek, Agnieszka Wróbel-Sowa (chair). Minutes: Agnieszka Wróbel-Sowa."
GROUNDED = {
    "type": "object",
    "properties": {"attendees": {"type": "array", "items": {"type": "string", "x-grounded": True}}},
    "required": ["attendees"],
    "additionalProperties": False,
}
ANSWER = {"attendees": ["Zbigniew Kaczmarek", "Agnieszka Wróbel-Sowa"]}
MONTH = {
    "type": "object",
    "properties": {"month": {"enum": ["April", "August"]}},
    "required": ["month"],
}


def allowed(matcher, vocab) -> np.ndarray:
    mask = allocate_token_bitmask(1, vocab.vocab_size)
    matcher.fill_next_token_bitmask(mask, 0)
    return bitmask_to_bool(mask, vocab.vocab_size)[0].numpy()


@pytest.mark.parametrize("name", ["smol", "qwen"])
@pytest.mark.parametrize(
    ("schema", "text", "source"),
    [
        (GROUNDED, json.dumps(ANSWER, ensure_ascii=False), DOC),
        (MONTH, '{"month": "April"}', None),
    ],
    ids=["grounded", "enum"],
)
def test_the_tokenizers_own_tokens_are_in_the_mask_where_bytes_are_forced(
    request, name, schema, text, source
):
    compiler = request.getfixturevalue(f"{name}_compiler")
    tokenizer = request.getfixturevalue(f"{name}_tokenizer")
    vocab = compiler.vocab
    m = compiler.compile(Constraint.json_schema(schema, source_text=source)).new_matcher()
    forced_steps = 0
    for t in [*tokenizer.encode(text, add_special_tokens=False), vocab.eos_token_ids[0]]:
        bits = allowed(m, vocab)
        forced = m._m.compute_ff_bytes()
        if forced and t not in vocab.eos_token_ids:
            forced_steps += 1
            spelled = [u for u in range(vocab.tokenizer_size) if bits[u]]
            assert all(
                forced.startswith(vocab.token_bytes(u)) or vocab.token_bytes(u).startswith(forced)
                for u in spelled
            )
            assert all(bits[u] for u in vocab.prefix_tokens(forced))
        assert bits[t], (text, vocab.token_bytes(t), forced)
        assert m.accept_token(t), (text, vocab.token_bytes(t))
    assert forced_steps and m.is_terminated()
