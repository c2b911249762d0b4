"""Generates the reference vectors the metric and JSON tests compare against.

Run with numpy installed:  python3 gen_vectors.py
It rewrites numpy_stats.json, python_float_repr.json, python_json_dumps.json and
vllm_summary_cases.json here.
Floats are stored as Python repr strings (they round-trip exactly); the tests parse them
with Rust's exact float parser.
"""

import json
import math
import random
import struct

import numpy as np

PERCENTILES = [0.0, 0.5, 1.0, 25.0, 33.3, 50.0, 75.0, 90.0, 95.0, 99.0, 99.9, 100.0]
LCG_A = 6364136223846793005
LCG_C = 1442695040888963407
MASK = (1 << 64) - 1


def lcg_values(seed, n, scale):
    """Must match `lcg_values` in crates/core/src/metrics/stats.rs tests."""
    x = seed & MASK
    out = []
    for _ in range(n):
        x = (LCG_A * x + LCG_C) & MASK
        out.append(float(x >> 11) * 2.0**-53 * scale)
    return out


def stats(values):
    data = values or 0  # vLLM's `X or 0`
    return {
        "mean": repr(float(np.mean(data))),
        "std": repr(float(np.std(data))),
        "median": repr(float(np.median(data))),
        "percentiles": [repr(float(np.percentile(data, p))) for p in PERCENTILES],
    }


def numpy_cases():
    rng = random.Random(20240601)
    cases = []

    def add(name, values, stored=True, lcg=None):
        case = {"name": name}
        if stored:
            case["values"] = [repr(v) for v in values]
        else:
            case["lcg"] = lcg
        case.update(stats(values))
        cases.append(case)

    add("empty", [])
    add("single", [0.123456])
    add("two", [0.5, 0.25])
    add("duplicates", [1.0, 1.0, 1.0, 2.0, 2.0, 3.0])
    add("tiny-and-huge", [1e-300, 1e300, -1e300, 3.0, 1e-5, 7.25])
    # Sizes around the pairwise-sum thresholds (7/8/9, 127/128/129, 135/136/137, ...).
    for n in [3, 7, 8, 9, 15, 16, 17, 63, 64, 65, 127, 128, 129, 135, 136, 137,
              255, 256, 257, 300, 1000, 1031]:
        vals = [rng.uniform(-1, 1) * 10 ** rng.randint(-4, 4) for _ in range(n)]
        add(f"mixed-{n}", vals)
    # Latency-like values built as the records build them: integer microseconds * 1e-6.
    for n in [10, 40, 200, 777]:
        vals = [rng.randint(1, 3_000_000) * 1e-6 for _ in range(n)]
        add(f"micros-{n}", vals)
    for n in [50, 500]:
        vals = [rng.lognormvariate(-3, 1) for _ in range(n)]
        add(f"lognormal-{n}", vals)
    # Large inputs (deep recursion of the pairwise sum) from a generator both sides share.
    for seed, n, scale in [(1, 5000, 1.0), (2, 20000, 0.05), (3, 100003, 1234.5)]:
        add(f"lcg-{n}", lcg_values(seed, n, scale), stored=False,
            lcg={"seed": seed, "n": n, "scale": scale})
    return {"percentiles": PERCENTILES, "cases": cases}


def float_cases():
    rng = random.Random(7)
    vals = [0.0, -0.0, 1.0, -1.0, 52.0, 0.1, 0.2, 0.3, 1 / 3, 2 / 3, 1e-05, 0.0001, 0.001,
            1e16, 1e15, 9999999999999998.0, 1234567890123456.0, 12345678901234567.0,
            1.5e16, 1e22, 1e23, 1e-7, 1.5e-7, 123.456, 5e-324, 2.2250738585072014e-308,
            1.7976931348623157e308, 4.35, 0.5, 1e100, 1e-100, 100.0, 1e21, 9.5, 99.9,
            2.675, 0.125, 0.375, 1e-4 * 3, 0.1 + 0.2, 4.0, 1e5, 123456789.0]
    vals += [10.0 ** e for e in range(-30, 31)]
    vals += [-(10.0 ** e) * 1.25 for e in range(-25, 26, 3)]
    for _ in range(600):
        bits = rng.getrandbits(64)
        v = struct.unpack("<d", struct.pack("<Q", bits))[0]
        if math.isfinite(v):
            vals.append(v)
    for _ in range(600):
        vals.append(round(rng.uniform(0, 1000), rng.randint(0, 6)))
    for _ in range(300):
        vals.append(rng.uniform(-1, 1) * 10.0 ** rng.randint(-20, 20))
    for _ in range(200):
        vals.append(float(rng.randint(0, 10**rng.randint(1, 20))))
    # Exact halfway cases, where the shortest digits tie and Python rounds half to even.
    for _ in range(300):
        frac = rng.choice([0.125, 0.375, 0.625, 0.875, 0.5, 0.25, 0.75, 0.0625])
        vals.append(rng.choice([1, -1]) * (rng.randint(10**13, 2**50) + frac))
    for _ in range(100):
        vals.append(float(rng.randint(2**53, 2**60) & ~0xFF))
    out = []
    for v in vals:
        bits = struct.unpack("<Q", struct.pack("<d", v))[0]
        out.append([f"{bits:016x}", repr(v)])
    return out


def json_cases():
    docs = [
        {"date": "20250101-120000", "completed": 20, "duration": 64.4, "request_rate": "inf",
         "label": None, "ok": True, "no": False, "ratio": 1e-05, "big": 1.5e16,
         "nested": {"a": [1, 2.0, [3.5, []], {}], "b": {"c": None}}},
        {"text": "h\u00e9llo \u2603 \U0001F600 tab\t quote\" back\\slash\nnew\u0001\u007f\u0080 /"},
        {"itls": [[0.01, 0.02], [], [1e-06]], "errors": ["", "Bad Request"]},
        [],
        {},
        {"ints": [0, -1, 9007199254740993, 18446744073709551615], "floats": [0.0, -0.0, 100.0]},
    ]
    return [{"input": json.dumps(d, ensure_ascii=False), "python": json.dumps(d)} for d in docs]


def vllm_summary(case):
    """vLLM 0.33's calculate_metrics and bucket peaks, on records given in integer ns/us."""
    outs = []
    for r in case["records"]:
        ch = r["chunks_us"]
        outs.append({
            "success": not r["failed"],
            "start_time": r["start_ns"] * 1e-9,
            "ttft": ch[0] * 1e-6 if ch else 0.0,
            "latency": ch[-1] * 1e-6 if ch else 0.0,
            "itl": [(b - a) * 1e-6 for a, b in zip(ch, ch[1:])],
            "output_tokens": r["completion_tokens"],
            "prompt_len": r["prompt_tokens"],
            "client_queue_time": (r["start_ns"] - r["arrival_ns"]) * 1e-9,
        })
    dur = case["duration_s"]
    pcts = case["percentiles"]
    goodput = dict(case["goodput"])
    lens, total_input, completed, good = [], 0, 0, 0
    itls, tpots, all_tpots, ttfts, e2els, queues, e2els_q = [], [], [], [], [], [], []
    for o in outs:
        if o["success"]:
            n = o["output_tokens"]
            lens.append(n)
            total_input += o["prompt_len"]
            tpot = 0.0
            if n > 1:
                tpot = (o["latency"] - o["ttft"]) / (n - 1)
                tpots.append(tpot)
            all_tpots.append(tpot)
            itls += o["itl"]
            ttfts.append(o["ttft"])
            e2els.append(o["latency"])
            queues.append(o["client_queue_time"])
            e2els_q.append(o["latency"] + o["client_queue_time"])
            completed += 1
        else:
            lens.append(0)
    if goodput:
        valid, slos = [], []
        for key, vals in (("ttft", ttfts), ("tpot", all_tpots), ("e2el", e2els)):
            if key in goodput:
                valid.append(vals)
                slos.append(goodput[key] / 1000)
        for req in zip(*valid):
            if all(s >= v for s, v in zip(slos, req)):
                good += 1
    succ = [o for o in outs if o["success"]]
    max_tok, max_conc = 0.0, 0
    if succ:
        min_start = min(o["start_time"] for o in succ)
        max_end = max(o["start_time"] + o["latency"] for o in succ)
        nb = int(np.ceil(max_end - min_start)) + 1
        tps = np.zeros(nb)
        conc = np.zeros(nb)
        for o in succ:
            t = o["start_time"] + o["ttft"]
            times = [t]
            for g in o["itl"]:
                t += g
                times.append(t)
            for t in times:
                b = int(t - min_start)
                if 0 <= b < nb:
                    tps[b] += 1
            s = int(o["start_time"] - min_start)
            e = int(o["start_time"] + o["latency"] - min_start)
            for sec in range(s, e + 1):
                conc[sec] += 1
        max_tok = float(np.max(tps))
        max_conc = int(np.max(conc))
    selected = {"ttft": ttfts, "tpot": tpots, "itl": itls, "e2el": e2els}
    if case["max_concurrency"] is not None:
        selected["client_queue_time"] = queues
        if case["request_rate"] != "inf":
            selected["e2el_including_client_queue"] = e2els_q
    metrics = {}
    for m in case["metrics"]:
        if m not in selected:
            continue
        x = selected[m] or 0
        metrics[m] = {
            "mean": repr(float(np.mean(x) * 1000)),
            "median": repr(float(np.median(x) * 1000)),
            "std": repr(float(np.std(x) * 1000)),
            "percentiles": [repr(float(np.percentile(x, p) * 1000)) for p in pcts],
        }
    total_output = sum(lens)
    return {
        "completed": completed,
        "failed": len(outs) - completed,
        "total_input": total_input,
        "total_output": total_output,
        "request_throughput": repr(completed / dur),
        "request_goodput": repr(good / dur) if goodput else None,
        "output_throughput": repr(total_output / dur),
        "total_token_throughput": repr((total_input + total_output) / dur),
        "max_output_tokens_per_s": repr(max_tok),
        "max_concurrent_requests": max_conc,
        "metrics": metrics,
    }


def summary_cases():
    rng = random.Random(99)
    cases = []
    for k in range(8):
        n = rng.choice([1, 3, 20, 60])
        records = []
        for i in range(n):
            arrival = rng.randint(0, 30_000_000_000)
            start = arrival + rng.choice([0, 0, rng.randint(0, 2_000_000_000)])
            first = rng.randint(20_000, 3_000_000)
            gaps = [rng.randint(5_000, 300_000) for _ in range(rng.choice([0, 1, 5, 40]))]
            chunks = [first]
            for g in gaps:
                chunks.append(chunks[-1] + g)
            failed = rng.random() < 0.15
            records.append({
                "start_ns": start, "arrival_ns": arrival,
                "chunks_us": [] if failed and rng.random() < 0.5 else chunks,
                "completion_tokens": len(chunks) * rng.choice([1, 1, 3]),
                "prompt_tokens": rng.randint(1, 4000), "failed": failed,
            })
        case = {
            "duration_s": rng.uniform(10, 60),
            "max_concurrency": rng.choice([None, 4]),
            "request_rate": rng.choice(["inf", 2.5]),
            "goodput": rng.choice([[], [["ttft", 1500.0]], [["ttft", 2000.0], ["tpot", 150.0], ["e2el", 9000.0]]]),
            "percentiles": [50.0, 90.0, 99.0, 99.9],
            "metrics": ["ttft", "tpot", "itl", "e2el", "client_queue_time", "e2el_including_client_queue"],
            "records": records,
        }
        case["expected"] = vllm_summary(case)
        cases.append(case)
    return cases


def main():
    data = numpy_cases()
    with open("numpy_stats.json", "w") as f:
        f.write('{"percentiles": ' + json.dumps([repr(p) for p in data["percentiles"]]) + ', "cases": [\n')
        f.write(",\n".join(json.dumps(c) for c in data["cases"]))
        f.write("\n]}\n")
    with open("python_float_repr.json", "w") as f:
        f.write("[\n" + ",\n".join(json.dumps(c) for c in float_cases()) + "\n]\n")
    with open("python_json_dumps.json", "w", encoding="utf-8") as f:
        json.dump(json_cases(), f, indent=1, ensure_ascii=False)
        f.write("\n")
    with open("vllm_summary_cases.json", "w") as f:
        f.write("[\n" + ",\n".join(json.dumps(c) for c in summary_cases()) + "\n]\n")


if __name__ == "__main__":
    main()
