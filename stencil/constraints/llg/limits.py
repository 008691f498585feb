"""``Limits`` -> llguidance ``LLParserLimits``."""

from __future__ import annotations

import llguidance

from ..limits import Limits


def parser_limits(limits: Limits) -> llguidance.LLParserLimits:
    return llguidance.LLParserLimits(
        max_grammar_size=limits.max_grammar_size,
        max_lexer_states=limits.max_lexer_states,
        step_lexer_fuel=limits.step_lexer_fuel,
        step_max_items=limits.step_max_items,
        max_items_in_row=limits.max_items_in_row,
        initial_lexer_fuel=limits.initial_lexer_fuel,
        verbose_errors=False,
    )
