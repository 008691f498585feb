"""Stencil behind Ray Serve: replicas, their ingress, prefix-affinity routing."""
