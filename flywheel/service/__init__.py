"""Galahad as a service: an HTTP API on Ray Serve (answering replicas) with the learner running beside it."""
