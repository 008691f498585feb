"""Speculative decoding: cheap drafts (n-gram prompt lookup, forced tokens of the constraint)
verified by one forward over every draft row, exact for greedy and sampled decoding."""
