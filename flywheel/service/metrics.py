"""Prometheus metrics: requests and latency per endpoint, answers and latency per answer path, and the
learner's figures (queue depth, attempts, verified, deposited) read from the catalog at scrape time.

Each replica keeps its own registry; the catalog figures are global (the catalog is shared).
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class _CatalogFigures:
    def __init__(self, stats: Callable[[], dict]):
        self.stats = stats

    def collect(self):
        s = self.stats()
        by = s.get("by_status", {})
        for name, doc, value in (
            ("galahad_queue_depth", "problems pending or claimed", by.get("pending", 0) + by.get("claimed", 0)),
            ("galahad_attempts", "attempts recorded", s["attempts"]),
            ("galahad_verified", "problems with a verified attempt", s["verified"]),
            ("galahad_deposited", "artifacts deposited", s["artifacts"]),
        ):
            yield GaugeMetricFamily(name, doc, value=value)


class Metrics:
    def __init__(self, catalog_stats: Callable[[], dict]):
        self.registry = CollectorRegistry()
        self.requests = Counter("galahad_requests", "HTTP requests", ["endpoint", "status"], registry=self.registry)
        self.latency = Histogram("galahad_request_seconds", "HTTP request latency", ["endpoint"],
                                 buckets=BUCKETS, registry=self.registry)
        self.answers = Counter("galahad_answers", "answers by path", ["path"], registry=self.registry)
        self.answer_latency = Histogram("galahad_answer_seconds", "solve latency by answer path", ["path"],
                                        buckets=BUCKETS, registry=self.registry)
        self.registry.register(_CatalogFigures(catalog_stats))

    def request(self, endpoint: str, status: int, seconds: float) -> None:
        self.requests.labels(endpoint, str(status)).inc()
        self.latency.labels(endpoint).observe(seconds)

    def answer(self, path: str, seconds: float) -> None:
        self.answers.labels(path).inc()
        self.answer_latency.labels(path).observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
