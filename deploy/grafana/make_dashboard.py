#!/usr/bin/env python3
"""Writes deploy/grafana/pagoda-dashboard.json, the Grafana dashboard of Pagoda's metrics.

    python3 deploy/grafana/make_dashboard.py            # rewrite the JSON beside this file
    python3 deploy/grafana/make_dashboard.py --check    # exit 1 if the JSON is out of date

Panels are declared below as (title, unit, queries); the layout (rows of panels, their grid
positions and ids) is computed, so adding a panel is one line. The server's metrics test
(crates/pagoda-server/tests/dashboards.rs) checks that every metric a query names is
exposed by a live server and that a real Prometheus evaluates every query.
"""
import json
import pathlib
import sys

RATE = "$__rate_interval"
SEL = 'model_name=~"$model_name", instance=~"$instance"'
GW = 'instance=~"$instance"'


def quantiles(metric, selector=SEL):
    return [
        (f"p{int(q * 100)}", f"histogram_quantile({q}, sum by (le) (rate({metric}_bucket{{{selector}}}[{RATE}])))")
        for q in (0.5, 0.9, 0.99)
    ]


ROWS = [
    ("Engine", [
        ("Requests running and waiting", "short", [
            ("running", f"sum(pagoda:num_requests_running{{{SEL}}})"),
            ("waiting", f"sum(pagoda:num_requests_waiting{{{SEL}}})"),
        ]),
        ("KV cache usage", "percentunit", [
            ("{{instance}}", f"pagoda:kv_cache_usage_perc{{{SEL}}}"),
        ]),
        ("Prefix cache hit rate (tokens)", "percentunit", [
            ("hit rate", f"sum(rate(pagoda:prefix_cache_hits_total{{{SEL}}}[{RATE}])) / "
                         f"sum(rate(pagoda:prefix_cache_queries_total{{{SEL}}}[{RATE}]))"),
        ]),
        ("Tokens per second", "short", [
            ("output", f"sum(rate(pagoda:generation_tokens_total{{{SEL}}}[{RATE}]))"),
            ("prompt", f"sum(rate(pagoda:prompt_tokens_total{{{SEL}}}[{RATE}]))"),
        ]),
        ("Preemptions per second", "short", [
            ("preemptions", f"sum(rate(pagoda:num_preemptions_total{{{SEL}}}[{RATE}]))"),
        ]),
        ("Finished requests per second", "reqps", [
            ("{{finished_reason}}", f"sum by (finished_reason) (rate(pagoda:request_success_total{{{SEL}}}[{RATE}]))"),
        ]),
    ]),
    ("Latency", [
        ("Time to first token", "s", quantiles("pagoda:time_to_first_token_seconds")),
        ("Inter-token latency", "s", quantiles("pagoda:inter_token_latency_seconds")),
        ("End-to-end latency", "s", quantiles("pagoda:e2e_request_latency_seconds")),
        ("Queue time", "s", quantiles("pagoda:request_queue_time_seconds")),
        ("SLO attainment by class", "percentunit", [
            ("{{slo_class}}", f'sum by (slo_class) (rate(pagoda:slo_attained_total{{{SEL}, target="both"}}[5m])) / '
                              f"sum by (slo_class) (rate(pagoda:slo_requests_total{{{SEL}}}[5m]))"),
        ]),
        ("Step-cost model", "s", [
            ("{{term}}", f"pagoda:step_cost_seconds{{{SEL}}}"),
        ]),
    ]),
    ("Gateway", [
        ("Cost per tenant (last hour)", "short", [
            ("{{tenant}} {{currency}}", f"sum by (tenant, currency) (increase(pagoda:gateway_cost_total{{{GW}}}[1h]))"),
        ]),
        ("Tokens per second by tenant", "short", [
            ("{{tenant}} {{kind}}", f"sum by (tenant, kind) (rate(pagoda:gateway_tokens_total{{{GW}}}[{RATE}]))"),
        ]),
        ("Requests per second by tenant and status", "reqps", [
            ("{{tenant}} {{status}}", f"sum by (tenant, status) (rate(pagoda:gateway_requests_total{{{GW}}}[{RATE}]))"),
        ]),
        ("Refused at admission", "reqps", [
            ("{{tenant}} {{reason}}", f"sum by (tenant, reason) (rate(pagoda:gateway_refused_total{{{GW}}}[{RATE}]))"),
        ]),
        ("Budget used", "percentunit", [
            ("{{tenant}} {{period}}", f"max by (tenant, period) (pagoda:gateway_budget_used_ratio{{{GW}}})"),
        ]),
        ("Metering sink", "short", [
            ("failing", f"max(pagoda:gateway_sink_failing{{{GW}}})"),
            ("queued events", f"sum(pagoda:gateway_sink_queued_events{{{GW}}})"),
        ]),
    ]),
    ("Guardrails", [
        ("Decisions per second", "short", [
            ("{{stage}} {{decision}}", f"sum by (stage, decision) (rate(pagoda:guard_decisions_total{{{GW}}}[{RATE}]))"),
        ]),
        ("Injection rule matches", "short", [
            ("{{rule}}", f"sum by (rule) (increase(pagoda:guard_rule_matches_total{{{GW}}}[1h]))"),
        ]),
        ("Sensitive values found", "short", [
            ("{{kind}}", f"sum by (kind) (increase(pagoda:guard_entities_total{{{GW}}}[1h]))"),
        ]),
        ("Canary leaks and refused tool calls", "short", [
            ("canary leaks", f"sum(increase(pagoda:guard_canary_leaks_total{{{GW}}}[1h]))"),
            ("tool calls refused", f"sum(increase(pagoda:guard_tool_calls_refused_total{{{GW}}}[1h]))"),
        ]),
    ]),
]

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def panel(panel_id, title, unit, queries, x, y):
    return {
        "id": panel_id,
        "type": "timeseries",
        "title": title,
        "datasource": DATASOURCE,
        "gridPos": {"h": 8, "w": 8, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}},
        "targets": [
            {"refId": chr(ord("A") + i), "datasource": DATASOURCE, "expr": expr, "legendFormat": legend}
            for i, (legend, expr) in enumerate(queries)
        ],
    }


def variable(name, query):
    return {
        "name": name,
        "type": "query",
        "datasource": DATASOURCE,
        "query": {"query": query, "refId": name},
        "definition": query,
        "includeAll": True,
        "multi": True,
        "allValue": ".*",
        "current": {"text": "All", "value": "$__all"},
        "refresh": 2,
    }


def dashboard():
    panels, y, next_id = [], 0, 1
    for row_title, row_panels in ROWS:
        panels.append({"id": next_id, "type": "row", "title": row_title, "collapsed": False,
                       "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []})
        next_id += 1
        y += 1
        for i, (title, unit, queries) in enumerate(row_panels):
            panels.append(panel(next_id, title, unit, queries, (i % 3) * 8, y + (i // 3) * 8))
            next_id += 1
        y += ((len(row_panels) + 2) // 3) * 8
    return {
        "uid": "pagoda-overview",
        "title": "Pagoda",
        "description": "Engine, latency, gateway and guardrail metrics of Pagoda servers.",
        "tags": ["pagoda", "llm"],
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "refresh": "10s",
        "time": {"from": "now-1h", "to": "now"},
        "timezone": "browser",
        "templating": {"list": [
            {"name": "datasource", "type": "datasource", "query": "prometheus",
             "current": {}, "label": "Data source"},
            variable("instance", "label_values(pagoda:num_requests_running, instance)"),
            variable("model_name", "label_values(pagoda:num_requests_running, model_name)"),
        ]},
        "annotations": {"list": []},
        "panels": panels,
    }


def main():
    path = pathlib.Path(__file__).with_name("pagoda-dashboard.json")
    text = json.dumps(dashboard(), indent=2) + "\n"
    if "--check" in sys.argv[1:]:
        if not path.exists() or path.read_text() != text:
            print(f"{path} is out of date: run python3 {__file__}", file=sys.stderr)
            sys.exit(1)
        return
    path.write_text(text)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
