"""The service's defaults in one frozen dataclass: bind address, replicas, size limits, learner polling."""

from __future__ import annotations

from dataclasses import dataclass

TOKEN_ENV = "GALAHAD_API_TOKEN"


@dataclass(frozen=True)
class ServiceConfig:
    host: str = "127.0.0.1"
    port: int = 8000
    replicas: int = 1
    max_body_bytes: int = 1_000_000  # one request body (a problem list included)
    max_problem_chars: int = 20_000  # one problem text (the problem-file limit, `records.MAX_TEXT`)
    max_problems: int = 1_000  # problems in one POST /v1/problems
    max_find: int = 100  # rows from /v1/catalog/find
    learner_poll_seconds: float = 1.0  # how often an idle learner looks for newly queued problems
    max_ongoing_requests: int = 64  # per replica; the engine itself answers one request at a time
