"""Support shared by the tests and the benchmarks (never imported by the library itself):
``stencil serve`` as a subprocess, the hostile-request corpus and its runner, tiny random-weight
models, pathological constraints, and the schemathesis runner. Needs the ``test`` extra."""
