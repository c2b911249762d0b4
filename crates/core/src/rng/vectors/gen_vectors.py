"""Writes numpy_python.json: reference draws from numpy and CPython's `random`.

The Rust ports in `crates/core/src/rng` are checked against this file. Floats are stored as
their IEEE-754 bit patterns (u64) so the comparison is exact.

Run with numpy installed:  python gen_vectors.py > numpy_python.json
"""

import json
import random
import struct
import sys

import numpy as np


def bits(x):
    return struct.unpack("<Q", struct.pack("<d", float(x)))[0]


def legacy_cases():
    out = []
    for seed in [0, 1, 42, 12345, 2**32 - 1]:
        rs = np.random.RandomState(seed)
        case = {"seed": seed}
        case["raw_u32"] = [int(v) for v in rs.randint(0, 2**32, size=5, dtype=np.int64)]
        case["random_sample"] = [bits(v) for v in rs.random_sample(8)]
        case["standard_exponential"] = [bits(rs.standard_exponential()) for _ in range(6)]
        gam = {}
        for shape in [0.25, 0.5, 1.0, 1.5, 2.0, 3.7, 10.0]:
            r2 = np.random.RandomState(seed)
            gam[repr(shape)] = [bits(r2.gamma(shape, 0.125)) for _ in range(25)]
        case["gamma_scale_0.125"] = gam
        # Interleaved calls: the cached second gaussian must survive between gamma calls.
        r3 = np.random.RandomState(seed)
        mixed = []
        for i in range(30):
            if i % 3 == 0:
                mixed.append(bits(r3.gamma(2.5, 1.0)))
            elif i % 3 == 1:
                mixed.append(bits(r3.random_sample()))
            else:
                mixed.append(bits(r3.gamma(0.7, 2.0)))
        case["mixed"] = mixed
        ri = {}
        for n in [1, 10, 151643, 2**31 + 5, 2**32, 2**40]:
            r4 = np.random.RandomState(seed)
            ri[str(n)] = [int(v) for v in r4.randint(0, n, size=12)]
        case["randint_0_n"] = ri
        out.append(case)
    return out


def python_cases():
    out = []
    for seed in [0, 1, 42, 2**32, 2**64 + 3, 12345678901234567890]:
        r = random.Random(seed)
        case = {"seed": str(seed)}
        case["random"] = [bits(r.random()) for _ in range(6)]
        case["getrandbits"] = {str(k): [r.getrandbits(k) for _ in range(3)] for k in [1, 7, 32, 33, 64]}
        case["randbelow"] = {str(n): [r._randbelow(n) for _ in range(8)] for n in [1, 2, 10, 1000, 2**31, 2**40 + 1]}
        lst = list(range(37))
        r.shuffle(lst)
        case["shuffle_37"] = lst
        case["choice_10"] = [r.choice(range(10)) for _ in range(10)]
        out.append(case)
    return out


def pcg_cases():
    out = []
    for seed in [0, 1, 42, 2**40 + 7, 2**64 + 5]:
        ss = np.random.SeedSequence(seed)
        case = {"seed": str(seed)}
        case["state_u64"] = [int(v) for v in ss.generate_state(4, np.uint64)]
        g = np.random.default_rng(seed)
        case["raw_u64"] = [int(v) for v in g.bit_generator.random_raw(4)]
        g = np.random.default_rng(seed)
        case["random"] = [bits(v) for v in g.random(5)]
        ints = {}
        for lo, hi in [(0, 1), (5, 6), (0, 10), (0, 151643), (1, 2049), (0, 2**32), (0, 2**32 + 1), (0, 2**40), (-7, 9)]:
            g = np.random.default_rng(seed)
            ints["%d,%d" % (lo, hi)] = [int(v) for v in g.integers(lo, hi, size=11)]
        case["integers"] = ints
        # The buffered upper half of a 64-bit draw survives across calls and 64-bit draws.
        g = np.random.default_rng(seed)
        seq = []
        seq += [int(v) for v in g.integers(0, 10, size=3)]
        seq += [int(v) for v in g.integers(0, 2**40, size=2)]
        seq += [int(v) for v in g.integers(0, 1000, size=3)]
        seq += [int(v) for v in g.integers(3, 4, size=2)]
        seq += [int(v) for v in g.integers(0, 7, size=1)]
        case["interleaved"] = seq
        out.append(case)
    return out


json.dump(
    {"numpy": np.__version__, "legacy": legacy_cases(), "python": python_cases(), "pcg64": pcg_cases()},
    sys.stdout,
    indent=1,
)
