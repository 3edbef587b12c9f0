"""Prometheus metrics, every collector of the service, one metric per figure: requests per endpoint, latency
and time to first token per route and answer path, solves in flight, the learner's figures read from the
catalog and its health read from its supervisor at scrape time, and this replica's store (`StoreFigures`).

Each replica keeps its own registry (a scrape through Serve's proxy reaches one replica): request figures
are that replica's, catalog and learner figures global. With tenants, requests are also counted per tenant;
a tenant's own `/metrics` (`render_tenant`) shows only its counts and its view's catalog figures. The metric
names: docs/service.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from galahad.flywheel.memory.solver import PATHS
from galahad.flywheel.service import request
from galahad.flywheel.service.request import NO_PATH

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
OTHER_PATH = "other"  # a path outside memory's PATHS: the label set stays bounded


def path_label(path: str) -> str:
    return path if path in PATHS else OTHER_PATH


class _CatalogFigures:
    def __init__(self, stats: Callable[[], dict]):
        self.stats = stats

    def collect(self):
        s = self.stats()
        by = s.get("by_status", {})
        for name, doc, value in (
            ("galahad_queue_depth", "problems pending or claimed", by.get("pending", 0) + by.get("claimed", 0)),
            ("galahad_attempts", "attempts recorded", s["attempts"]),
            ("galahad_verified", "problems with a verified attempt (sampled or gold)", s["verified"]),
            ("galahad_gold_solutions", "verified problems whose solution is their gold (no sample verified)",
             s.get("gold_solutions", 0)),
            ("galahad_deposited", "artifacts deposited", s["artifacts"]),
        ):
            yield GaugeMetricFamily(name, doc, value=value)
        yield CounterMetricFamily("galahad_problems_failed", "problems that used their whole sampling budget "
                                  "without a verified attempt (a failed problem is never queued again)",
                                  value=by.get("failed", 0))
        yield GaugeMetricFamily("galahad_artifact_bytes", "bytes of every artifact the catalog records",
                                value=s.get("bytes", 0))
        yield GaugeMetricFamily("galahad_artifacts_evicted", "artifacts whose blob was evicted to fit the store budget",
                                value=s.get("evicted", 0))
        yield CounterMetricFamily("galahad_artifact_rebuilds", "evicted artifacts rebuilt exactly on their graft",
                                  value=s.get("rebuilds", 0))


class StoreFigures:
    """`galahad_store_bytes{tier}` of one replica's store (a `LocalStore` or an `S3Store`): `ram` its RAM
    tier; `disk` the local folder's artifacts (a directory store: the catalog's resident bytes, what is not
    evicted; an object store: its local cache's files); `object` (an object store) the catalog's resident
    bytes. And its RAM tier's counters."""

    def __init__(self, store, catalog):
        self.store, self.catalog = store, catalog

    def tiers(self) -> dict[str, int]:
        resident = int(self.catalog.evictions.figures()["resident_bytes"])
        out = {"ram": int(self.store.ram.stats()["bytes"])}
        if getattr(self.store, "local_ids", None) is not None:  # an object store: the bucket, its local cache
            return out | {"disk": sum(_size(self.store, i) for i in self.store.local_ids()), "object": resident}
        return out | {"disk": resident}

    def collect(self):
        family = GaugeMetricFamily("galahad_store_bytes", "artifact bytes per store tier: ram (this replica's), "
                                   "disk (the local folder or cache), object (the bucket)", labels=["tier"])
        for tier, value in self.tiers().items():
            family.add_metric([tier], value)
        yield family
        s = self.store.ram.stats()
        yield GaugeMetricFamily("galahad_ram_tier_capacity_bytes", "this replica's RAM tier budget",
                                value=s["capacity"])
        yield GaugeMetricFamily("galahad_ram_tier_entries", "artifacts in this replica's RAM tier", value=s["entries"])
        yield CounterMetricFamily("galahad_ram_tier_hits", "reads served by the RAM tier (no read, no hash)",
                                  value=s["hits"])
        yield CounterMetricFamily("galahad_ram_tier_misses", "reads that went to the disk", value=s["misses"])


def _size(store, blob_id: str) -> int:
    try:
        return int(store.local_size(blob_id))
    except OSError:  # evicted meanwhile
        return 0


class _LearnerFigures:
    """`learner_state()`: the supervisor's state (`up`, `restarts`), `{"state": "off"}` without a learner."""

    def __init__(self, learner_state: Callable[[], dict]):
        self.learner_state = learner_state

    def collect(self):
        s = self.learner_state()
        if s.get("state") == "off":
            return
        yield GaugeMetricFamily("galahad_learner_up", "1 while the learner runs, 0 while it (re)starts or is "
                                "unreachable", value=1 if s.get("up") else 0)
        if "restarts" in s:
            yield CounterMetricFamily("galahad_learner_restarts", "times the learner died and was started again",
                                      value=s["restarts"])


class Metrics:
    def __init__(self, catalog_stats: Callable[[], dict], learner_state: Callable[[], dict] | None = None,
                 store=None, catalog=None):
        self.registry = CollectorRegistry()
        self.requests = Counter("galahad_requests", "HTTP requests", ["endpoint", "status"], registry=self.registry)
        self.latency = Histogram("galahad_request_seconds", "HTTP request latency by route and answer path "
                                 f"({', '.join(PATHS)}; {NO_PATH} for a request that answered nothing)",
                                 ["route", "path"], buckets=BUCKETS, registry=self.registry)
        self.first_token = Histogram("galahad_time_to_first_token_seconds", "streamed answers: from the route's "
                                     "start to the first content chunk handed to the server", ["route", "path"],
                                     buckets=BUCKETS, registry=self.registry)
        self.answers = Counter("galahad_answers", "answers by path", ["path"], registry=self.registry)
        self.answer_latency = Histogram("galahad_answer_seconds", "solve latency by answer path", ["path"],
                                        buckets=BUCKETS, registry=self.registry)
        # per tenant (requests with a tenant's token; none on a service without tenants): what a tenant's
        # own `/metrics` shows of it, and what the admin's shows of every tenant
        self.tenant_requests = Counter("galahad_tenant_requests", "HTTP requests by tenant", ["tenant", "endpoint", "status"],
                                       registry=self.registry)
        self.solving = Gauge("galahad_solves_in_flight", "solves admitted by this replica (running or waiting "
                             "for the engine)", registry=self.registry)
        self.registry.register(_CatalogFigures(catalog_stats))
        if learner_state is not None:
            self.registry.register(_LearnerFigures(learner_state))
        if store is not None:  # its tiers (the resident bytes: `catalog`'s)
            self.registry.register(StoreFigures(store, catalog))

    def request(self, endpoint: str, status: int, seconds: float, tenant: str | None = None,
                path: str = NO_PATH) -> None:
        """One finished request: counted by endpoint and status; its latency by route and answer path."""
        self.requests.labels(endpoint, str(status)).inc()
        self.latency.labels(endpoint, path).observe(seconds)
        if tenant is not None:
            self.tenant_requests.labels(tenant, endpoint, str(status)).inc()

    def answer(self, path: str, seconds: float) -> None:
        """One answer; also marks this request's answer path for its `galahad_request_seconds` sample."""
        ctx = request.current()
        if ctx is not None:
            ctx.path = path_label(path)
        self.answers.labels(path).inc()
        self.answer_latency.labels(path).observe(seconds)

    def timed_stream(self, events: Iterable[bytes], first_content: int, t0: float, route: str,
                     path: str) -> Iterator[bytes]:
        """`events` as they are sent; once event `first_content` (the first carrying a token) has been
        handed on, its time since `t0` (`time.perf_counter()` at the route's start) is this route's TTFT."""
        for i, event in enumerate(events):
            yield event
            if i == first_content:
                self.first_token.labels(route, path_label(path)).observe(time.perf_counter() - t0)

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def render_tenant(self, tenant: str, scope_stats: dict) -> bytes:
        """What one tenant's `/metrics` shows: its own request counts (`galahad_tenant_requests_total`, its
        label only) and its scope's catalog figures (`catalog.scopes.stats`: its memory and shared's);
        nothing of another tenant's, nor the service-wide figures."""
        registry = CollectorRegistry()
        registry.register(_TenantFigures(self.tenant_requests, tenant, scope_stats))
        return generate_latest(registry)


class _TenantFigures:
    def __init__(self, counter: Counter, tenant: str, stats: dict):
        self.counter, self.tenant, self.stats = counter, tenant, stats

    def collect(self):
        requests = CounterMetricFamily("galahad_tenant_requests", "HTTP requests by tenant",
                                       labels=["tenant", "endpoint", "status"])
        for family in self.counter.collect():
            for sample in family.samples:
                if sample.name.endswith("_total") and sample.labels.get("tenant") == self.tenant:
                    requests.add_metric([self.tenant, sample.labels["endpoint"], sample.labels["status"]], sample.value)
        yield requests
        by = self.stats.get("by_status", {})
        for name, doc, value in (
            ("galahad_scope_queue_depth", "problems pending or claimed in this tenant's view",
             by.get("pending", 0) + by.get("claimed", 0)),
            ("galahad_scope_problems", "problems in this tenant's view (its scope and shared)", self.stats["problems"]),
            ("galahad_scope_verified", "verified problems in this tenant's view", self.stats["verified"]),
            ("galahad_scope_artifacts", "artifacts in this tenant's view", self.stats["artifacts"]),
            ("galahad_scope_bytes", "artifact bytes in this tenant's view", self.stats["bytes"]),
        ):
            yield GaugeMetricFamily(name, doc, value=value)
