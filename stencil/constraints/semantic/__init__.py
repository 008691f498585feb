"""Decode-time semantic checks: what a JSON schema says that its grammar cannot (see
``graph`` for which values are checked, ``tracker`` for when, ``masking`` for the mask)."""
