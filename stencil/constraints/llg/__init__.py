"""The llguidance adapters: its errors and limits in Stencil's terms, the matcher template built
once per grammar, regexes / choices / Lark text grammars validated and written for it, the
regex checks, and the whitespace policy of JSON output."""
