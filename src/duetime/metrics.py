"""A Scheduler's own counters as Prometheus metrics, for a process that already exports some
(``pip install prometheus_client``, or ``duetime[web]``).

>>> from duetime.metrics import register
>>> register(s)  # doctest: +SKIP

registers a collector that reads ``s.stats()`` at each scrape. (The dashboard's ``/metrics``
says what a store holds, for every process; this says what one process did.) ``import
duetime`` never imports this module.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from duetime.scheduler import Scheduler

__all__ = ["SchedulerCollector", "register"]

# Counters of Stats: (field, metric name without the duetime_ prefix, help).
_COUNTERS = (
    ("started", "runs_started", "Run attempts started."),
    ("succeeded", "runs_succeeded", "Run attempts that returned normally."),
    ("failed", "runs_failed", "Run attempts that raised."),
    ("retried", "retries", "Retries queued."),
    ("dead", "runs_dead", "Occurrences that failed their last allowed attempt."),
    ("missed", "runs_missed", "Occurrences coalesced or skipped by the misfire policy."),
    ("skipped", "runs_skipped", "Occurrences skipped because the previous run was going."),
    ("deferred", "runs_deferred", "Starts deferred by a rate limiter."),
)
# Gauges of Stats.
_GAUGES = (
    ("jobs", "scheduler_jobs", "Live jobs in this scheduler."),
    ("running", "scheduler_running", "Occurrences begun and not finished."),
    ("live_entries", "scheduler_queue_entries", "Live queue entries."),
    ("held", "scheduler_held", "Occurrences waiting for a run of the same job to end."),
    ("blocked", "scheduler_blocked", "Occurrences waiting for a max_concurrent slot."),
)


class SchedulerCollector(Collector):
    """A ``prometheus_client`` collector of one Scheduler's ``stats()``, read at each scrape.

    Args:
        scheduler: The Scheduler.
        labels: Constant labels added to every metric (``{"scheduler": "billing"}``, to tell
            several schedulers of one process apart). Default none.
    """

    def __init__(self, scheduler: Scheduler, labels: dict[str, str] | None = None) -> None:
        self.scheduler = scheduler
        self.labels = dict(labels or {})

    def describe(self) -> Iterator[Metric]:
        """The metrics (a registry checks their names are its own at ``register``)."""
        return self.collect()

    def collect(self) -> Iterator[Metric]:
        """The scheduler's counters now."""
        st = self.scheduler.stats()
        names, values = list(self.labels), list(self.labels.values())
        for field, name, help in _COUNTERS:
            counter = CounterMetricFamily(f"duetime_{name}", help, labels=names)
            counter.add_metric(values, getattr(st, field))
            yield counter
        for field, name, help in _GAUGES:
            gauge = GaugeMetricFamily(f"duetime_{name}", help, labels=names)
            gauge.add_metric(values, getattr(st, field))
            yield gauge
        late = GaugeMetricFamily(
            "duetime_lateness_seconds",
            "Start lateness (start - due) percentiles over this scheduler's runs, in seconds.",
            labels=[*names, "quantile"],
        )
        for q, value in (
            ("0.5", st.lateness.p50),
            ("0.95", st.lateness.p95),
            ("0.99", st.lateness.p99),
            ("1", st.lateness.max),
        ):
            late.add_metric([*values, q], value)
        yield late


def register(
    s: Scheduler,
    registry: CollectorRegistry | None = None,
    *,
    labels: dict[str, str] | None = None,
) -> SchedulerCollector:
    """Export Scheduler ``s``'s counters (``s.stats()``) through ``prometheus_client``.

    Args:
        s: The Scheduler.
        registry: The registry to add the collector to. Default: ``prometheus_client``'s
            global ``REGISTRY`` (what ``start_http_server`` and ``make_asgi_app`` serve).
        labels: Constant labels for every metric (needed to register two schedulers in one
            registry: their metric names are the same).

    Returns:
        The collector (``registry.unregister(collector)`` removes it).

    Metrics: ``duetime_runs_started_total``, ``..._succeeded_total``, ``..._failed_total``,
    ``duetime_retries_total``, ``duetime_runs_dead_total``, ``..._missed_total``,
    ``..._skipped_total``, ``..._deferred_total`` (counters); ``duetime_scheduler_jobs``,
    ``..._running``, ``..._queue_entries``, ``..._held``, ``..._blocked`` (gauges); and
    ``duetime_lateness_seconds{quantile=...}`` (0.5, 0.95, 0.99, and 1 for the largest).
    """
    collector = SchedulerCollector(s, labels)
    target: Any = REGISTRY if registry is None else registry
    target.register(collector)
    return collector
