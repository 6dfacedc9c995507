"""``/metrics``: what a store holds, as Prometheus metrics (a ``prometheus_client`` collector
that reads the store at each scrape)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from duetime._validate import NS_PER_SECOND
from duetime.errors import StoreError
from duetime.stores._views import JOB_STATES, StoreView
from duetime.stores.records import RUN_STATES

__all__ = ["BUCKETS", "StoreCollector"]

logger = logging.getLogger("duetime")

#: The histograms' upper bounds (seconds).
BUCKETS = (0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0, 3600.0)
_BOUNDS = tuple(int(b * NS_PER_SECOND) for b in BUCKETS)


class StoreCollector(Collector):
    """Jobs by state, runs by outcome, run duration and lateness, dead letters and live
    workers, read from a store at each scrape (a few grouped queries).

    Args:
        view: The store's view.
        now: The real time (UTC epoch nanoseconds) at a scrape.
    """

    def __init__(self, view: StoreView, now: Callable[[], int]) -> None:
        self.view = view
        self.now = now

    def describe(self) -> Iterator[Metric]:
        """Nothing up front (the metrics are read at a scrape: none is read at registering)."""
        return iter(())

    def collect(self) -> Iterator[Metric]:
        """The metrics, read now. A store that fails gives ``duetime_store_up 0`` only."""
        up = GaugeMetricFamily("duetime_store_up", "Whether the store answered this scrape.")
        try:
            families = list(self._read())
        except StoreError as exc:
            logger.warning("metrics: %s", exc)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield from families

    def _read(self) -> Iterator[Metric]:
        view = self.view
        jobs = GaugeMetricFamily("duetime_jobs", "Jobs stored, by state.", labels=["state"])
        counted = view.job_counts()
        for state in JOB_STATES:
            jobs.add_metric([state], counted.get(state, 0))
        yield jobs
        runs = GaugeMetricFamily(
            "duetime_runs",
            "Run records kept (see the store's retention), by state.",
            labels=["state"],
        )
        counted = view.run_counts()
        for state in RUN_STATES:
            runs.add_metric([state], counted.get(state, 0))
        yield runs
        for what, help in (
            ("duration", "Finished runs' duration (finished - started), in seconds."),
            ("lateness", "Finished runs' lateness (started - due), in seconds."),
        ):
            found = view.histogram(what, _BOUNDS)
            family = HistogramMetricFamily(f"duetime_run_{what}_seconds", help)
            buckets = [(str(b), n) for b, n in zip(BUCKETS, found.counts, strict=True)]
            buckets.append(("+Inf", found.count))
            family.add_metric([], buckets, found.total / NS_PER_SECOND)
            yield family
        yield GaugeMetricFamily(
            "duetime_dead_letters",
            "Dead letters (jobs whose last attempt failed).",
            value=view.dead_count(),
        )
        yield GaugeMetricFamily(
            "duetime_workers_live",
            "Worker processes whose last announcement has not lapsed.",
            value=view.live_workers(self.now()),
        )
