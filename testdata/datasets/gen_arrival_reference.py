"""Writes arrival.json: vLLM's precomputed arrival schedule (cumulative delays, seconds) for a
few traffic settings, drawn with numpy's legacy np.random.gamma after np.random.seed(seed).

usage: python gen_arrival_reference.py > arrival.json

Follows vLLM 0.33's `get_request` (vllm/benchmarks/serve.py). Delays are stored as IEEE-754 bit
patterns.
"""

import json
import struct
import sys

import numpy as np


def bits(x):
    return struct.unpack("<Q", struct.pack("<d", float(x)))[0]


def schedule(n, rate, burstiness, seed, ramp=None):
    np.random.seed(seed)
    delays = []
    for i in range(n):
        if ramp:
            kind, start, end = ramp
            progress = i / max(n - 1, 1)
            r = start + (end - start) * progress if kind == "linear" else start * ((end / start) ** progress)
        else:
            r = rate
        if r == float("inf"):
            delays.append(0)
        elif burstiness == float("inf"):
            delays.append(1.0 / r)
        else:
            delays.append(np.random.gamma(shape=burstiness, scale=1.0 / (r * burstiness)))
    for i in range(1, len(delays)):
        delays[i] += delays[i - 1]
    if ramp is None and delays[-1] != 0:
        factor = (n / rate) / delays[-1]
        delays = [d * factor for d in delays]
    return [bits(d) for d in delays]


CASES = [
    {"n": 5, "rate": "inf", "burstiness": 1.0, "seed": 0},
    {"n": 20, "rate": 4.0, "burstiness": 1.0, "seed": 0},
    {"n": 30, "rate": 10.0, "burstiness": 0.5, "seed": 42},
    {"n": 15, "rate": 2.5, "burstiness": 3.0, "seed": 7},
    {"n": 6, "rate": 8.0, "burstiness": "inf", "seed": 0},
    {"n": 1, "rate": 3.0, "burstiness": 1.0, "seed": 5},
    {"n": 25, "rate": "inf", "burstiness": 1.0, "seed": 0, "ramp": ["linear", 1, 10]},
    {"n": 25, "rate": "inf", "burstiness": 2.0, "seed": 1, "ramp": ["exponential", 2, 32]},
]
out = []
for c in CASES:
    f = lambda v: float(v) if v != "inf" else float("inf")
    out.append({**c, "delays_bits": schedule(c["n"], f(c["rate"]), f(c["burstiness"]), c["seed"], c.get("ramp"))})
json.dump({"numpy": np.__version__, "cases": out}, sys.stdout, indent=1)
