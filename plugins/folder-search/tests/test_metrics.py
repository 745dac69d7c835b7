"""folder-search's gauges (index sizes, the indexing queue) as an operator sees them with telemetry on.

A real kernel with the installed plugin and ``PLEXOR_OTEL=1``; ``/metrics``' text is parsed by
``prometheus_client``'s own parser, and the OpenTelemetry SDK's in-memory reader collects the same gauges.
"""

from __future__ import annotations

import time

import anyio
import pytest
from conftest import call, wait_ready

pytest.importorskip("opentelemetry.sdk", reason="the plexor[otel] extra is not installed")

from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from plexor.features.telemetry import Telemetry  # noqa: E402

INSTALLED = ["folder-search"]
pytestmark = pytest.mark.anyio


def _scrape(kernel) -> dict[str, dict[str, float]]:
    """Each folder-search gauge of ``/metrics``, as {folder: value}."""
    body, _ = kernel.telemetry.prometheus_text()
    out: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(body.decode()):
        if family.name.startswith("plexor_folders_"):
            out[family.name] = {s.labels["folder"]: s.value for s in family.samples}
    return out


def _folders(tmp_path, names_and_sizes):
    paths = []
    for name, size in names_and_sizes:
        folder = tmp_path / name
        folder.mkdir()
        for i in range(size):
            (folder / f"note{i}.md").write_text(f"# Note {i}\n\nAbout the {name} project, part {i}.\n")
        paths.append(folder)
    return paths


async def test_index_sizes_per_folder_in_metrics_and_otel(plexor, plexor_config, tmp_path):
    alpha, beta = _folders(tmp_path, [("alpha", 3), ("beta", 5)])
    plexor_config({"folder-search": {"folders": [str(alpha), str(beta)], "watch": False}})
    async with plexor.client(installed=INSTALLED, env={"PLEXOR_OTEL": "1"}) as client:
        await wait_ready(client)
        listed = {f["name"]: f for f in (await call(client, "folders_list_folders"))["folders"]}
        scraped = _scrape(client.kernel)
        assert scraped["plexor_folders_documents"] == {"alpha": 3.0, "beta": 5.0}
        assert scraped["plexor_folders_chunks"] == {name: float(listed[name]["chunks"]) for name in ("alpha", "beta")}
        assert all(v > 0 for v in scraped["plexor_folders_chunks"].values())
        assert scraped["plexor_folders_queue"] == {"alpha": 0.0, "beta": 0.0}

        reader = InMemoryMetricReader()
        provider = MeterProvider(metric_readers=[reader])
        try:
            client.kernel.telemetry = Telemetry(client.kernel, meter_provider=provider)
            points = {}
            for rm in reader.get_metrics_data().resource_metrics:
                for sm in rm.scope_metrics:
                    for metric in sm.metrics:
                        if metric.name.startswith("plexor.folders."):
                            points[metric.name] = {p.attributes["folder"]: p.value
                                                   for p in metric.data.data_points}
            assert points["plexor.folders.documents"] == {"alpha": 3, "beta": 5}
            assert points["plexor.folders.queue"] == {"alpha": 0, "beta": 0}
        finally:
            provider.shutdown()


async def test_changes_waiting_for_the_watcher_are_the_queue(plexor, plexor_config, tmp_path):
    (live,) = _folders(tmp_path, [("live", 1)])
    # A long quiet time keeps what the watcher saw waiting, so the queue can be read.
    plexor_config({"folder-search": {"folders": [str(live)], "debounce_ms": 4000}})
    async with plexor.client(installed=INSTALLED, env={"PLEXOR_OTEL": "1"}) as client:
        await wait_ready(client)
        for i in range(3):
            (live / f"new{i}.md").write_text(f"# New {i}\n\nwaiting to be indexed\n")
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and _scrape(client.kernel)["plexor_folders_queue"]["live"] < 3:
            await anyio.sleep(0.05)
        assert _scrape(client.kernel)["plexor_folders_queue"] == {"live": 3.0}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and _scrape(client.kernel)["plexor_folders_documents"]["live"] < 4:
            await anyio.sleep(0.1)
        assert _scrape(client.kernel)["plexor_folders_documents"] == {"live": 4.0}
        assert _scrape(client.kernel)["plexor_folders_queue"] == {"live": 0.0}


async def test_no_gauge_is_read_when_telemetry_is_off(plexor, plexor_config, tmp_path):
    (quiet,) = _folders(tmp_path, [("quiet", 2)])
    plexor_config({"folder-search": {"folders": [str(quiet)], "watch": False}})
    async with plexor.client(installed=INSTALLED) as client:
        await wait_ready(client)
        assert client.kernel.telemetry is None
        declared = sorted(g.otel_name for g in client.kernel.gauges.all())  # declared, kept, never read
        assert declared == ["plexor.folders.chunks", "plexor.folders.documents", "plexor.folders.queue"]
