#!/usr/bin/env python3
"""TTFT of a closed-loop `pagoda bench serve` run, over all requests and over those sent
after the first wave (the first `--wave` requests in send order), from requests.jsonl."""
import argparse
import json
from pathlib import Path


def percentile(values, q):
    values = sorted(values)
    k = (len(values) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out_dirs", nargs="+", type=Path, help="--out-dir of each run")
    parser.add_argument("--wave", type=int, default=32, help="requests in the first wave")
    parser.add_argument(
        "--medians",
        action="store_true",
        help="also print medians per server (runs named SERVER-N) and their throughput ratio",
    )
    args = parser.parse_args()
    throughput = {}
    for out_dir in args.out_dirs:
        rows = [json.loads(line) for line in (out_dir / "requests.jsonl").open()]
        rows.sort(key=lambda r: r["sent_s"])
        ok = [r for r in rows if r["error"] is None]
        later = [r for r in rows[args.wave:] if r["error"] is None]
        end = max(r["sent_s"] + r["e2e_ms"] / 1e3 for r in ok)
        tokens = sum(r["output_tokens"] for r in ok)
        every = [r["ttft_ms"] / 1e3 for r in ok]
        after = [r["ttft_ms"] / 1e3 for r in later]
        server = out_dir.name.rsplit("-", 1)[0]
        throughput.setdefault(server, []).append(tokens / end)
        print(
            f"{out_dir.name}: {len(ok)}/{len(rows)} ok, {tokens / end:.1f} output tok/s; "
            f"TTFT all p50 {percentile(every, 0.5):.1f} s p99 {percentile(every, 0.99):.1f} s; "
            f"after the first wave (n={len(after)}) p50 {percentile(after, 0.5):.1f} s "
            f"p90 {percentile(after, 0.9):.1f} s p99 {percentile(after, 0.99):.1f} s"
        )
    if args.medians:
        medians = {name: percentile(runs, 0.5) for name, runs in throughput.items()}
        for name, median in medians.items():
            print(f"median {name}: {median:.1f} output tok/s over {len(throughput[name])} runs")
        if len(medians) == 2:
            (a, ma), (b, mb) = medians.items()
            print(f"{a} / {b}: {ma / mb:.2f}x")


if __name__ == "__main__":
    main()
