"""EdgeLake node latency as a metric: each request to a node is timed into ``plexor.span.duration``.

A real kernel with the installed plugin, the stand-in node, and ``PLEXOR_OTEL=1``; ``/metrics``' text
is parsed by ``prometheus_client``'s own parser.
"""

from __future__ import annotations

from typing import Any

import pytest
from standin import StandIn, free_port

pytest.importorskip("opentelemetry.sdk", reason="the plexor[otel] extra is not installed")

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

pytestmark = pytest.mark.anyio


async def test_node_request_durations_by_node_and_outcome(plexor: Any, plexor_config: Any, node: StandIn) -> None:
    down = f"127.0.0.1:{free_port()}"
    plexor_config({"edgelake": {"nodes": [node.address, down], "retries": 1, "backoff": 0.01}})
    async with plexor.client(installed=["edgelake"], env={"PLEXOR_OTEL": "1"}) as client:
        for _ in range(3):
            r = await client.call_tool("edgelake_list_databases", {})
            assert not r.is_error, r.content[0].text
        r = await client.call_tool("edgelake_list_databases", {"node": down})
        assert r.is_error and "is unreachable" in r.content[0].text
        body, _ = client.kernel.telemetry.prometheus_text()
    families = {f.name: f for f in text_string_to_metric_families(body.decode())}
    histogram = families["plexor_span_duration_seconds"]
    assert histogram.type == "histogram"
    counts = {(s.labels["plexor_plugin_name"], s.labels["server_address"], s.labels["server_port"],
               s.labels["plexor_span_name"], s.labels["plexor_outcome"], s.labels["error_type"]): s.value
              for s in histogram.samples if s.name.endswith("_count")}
    host, port = node.address.rsplit(":", 1)
    _, down_port = down.rsplit(":", 1)
    assert counts == {
        ("edgelake", host, port, "GET", "ok", ""): 3.0,
        # One attempt and one retry, each refused: both are node requests that failed.
        ("edgelake", "127.0.0.1", down_port, "GET", "error", "ConnectionRefusedError"): 2.0,
    }
    sums = {s.labels["server_port"]: s.value for s in histogram.samples if s.name.endswith("_sum")}
    assert sums[port] > 0


async def test_node_request_durations_reach_the_otel_reader(plexor: Any, plexor_config: Any, node: StandIn) -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from plexor.features.telemetry import Telemetry

    plexor_config({"edgelake": {"nodes": [node.address], "retries": 1, "backoff": 0.01}})
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    try:
        async with plexor.client(installed=["edgelake"]) as client:
            client.kernel.telemetry = Telemetry(client.kernel, meter_provider=provider)
            for _ in range(2):
                assert not (await client.call_tool("edgelake_list_databases", {})).is_error
            points = [(dict(p.attributes), p.count) for rm in reader.get_metrics_data().resource_metrics
                      for sm in rm.scope_metrics for m in sm.metrics if m.name == "plexor.span.duration"
                      for p in m.data.data_points]
    finally:
        provider.shutdown()
    host, port = node.address.rsplit(":", 1)
    assert points == [({"plexor.plugin.name": "edgelake", "plexor.span.name": "GET", "plexor.outcome": "ok",
                        "server.address": host, "server.port": port}, 2)]
