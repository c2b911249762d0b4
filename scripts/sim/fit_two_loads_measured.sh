#!/usr/bin/env bash
# Can `sim fit` on two loads predict the loads between them, on measured data? The bundled
# InferenceX rows of vLLM 0.13 serving gpt-oss-120b on H100s are split by deployment and shape
# (TP 2, 4, 8 x 1k/1k, 1k/8k, 8k/1k tokens: nine groups of three to five concurrencies); in each
# group the fit sees the lowest and the highest concurrency, starting from generic priors (never
# from the shipped H100 constants, which these rows set), with the constants it picks by default,
# and predicts the concurrencies between. Prints every held-out point's error and, per metric
# (the median end-to-end latency reported, not fitted), the median and P90 of the held-out
# errors, with the same split predicted from the priors alone.
#
# Usage: scripts/sim/fit_two_loads_measured.sh   (about 3.5 minutes on two cores)
# Environment: SB (default target/release/servebench), JOBS (parallel fits, default 2).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
SB=${SB:-$repo/target/release/servebench}
JOBS=${JOBS:-2}
rows=$repo/crates/sim/testdata/inferencex-h100-gpt-oss-120b-vllm.json
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# Generic priors (the held-out checks of CALIBRATION.md start from them).
priors=$repo/docs/profiles/generic-priors.toml

python3 - "$rows" "$out" <<'EOF'
import json, sys
rows, out = sys.argv[1], sys.argv[2]
groups = {}
for r in json.load(open(rows)):
    if r.get("vllm") == "v0.13.0":
        groups.setdefault((r["tp"], r["isl"], r["osl"]), []).append(r)
for (tp, isl, osl), rs in sorted(groups.items()):
    concs = sorted(r["conc"] for r in rs)
    ends = (concs[0], concs[-1])
    name = f"{out}/tp{tp}-{isl}-{osl}"
    json.dump([r for r in rs if r["conc"] in ends], open(name + ".fit.json", "w"))
    json.dump([r for r in rs if r["conc"] not in ends], open(name + ".test.json", "w"))
EOF

common=(--model openai/gpt-oss-120b --hardware h100-sxm)
for fit in "$out"/*.fit.json; do
  g=${fit%.fit.json}
  (
    "$SB" sim fit "${common[@]}" --profile "$priors" --no-holdout --out "$g.toml" "$fit" >"$g.log" 2>&1
    "$SB" sim validate "${common[@]}" --profile "$g.toml" --json "$g.test.json" >"$g.fitted.json" 2>/dev/null
    "$SB" sim validate "${common[@]}" --profile "$priors" --json "$g.test.json" >"$g.priors.json" 2>/dev/null
  ) &
  while [ "$(jobs -r | wc -l)" -ge "$JOBS" ]; do sleep 1; done
done
wait

python3 - "$out" <<'EOF'
import glob, json, math, sys
out = sys.argv[1]
names = {"ttft": "mean TTFT", "tpot": "mean TPOT", "throughput": "output tok/s", "median_e2el": "median E2EL"}
def p90(v):
    v = sorted(v)
    return v[max(0, math.ceil(0.9 * len(v)) - 1)]
for kind in ("fitted", "priors"):
    errors = {m: [] for m in names}
    for f in sorted(glob.glob(f"{out}/*.{kind}.json")):
        for p in json.load(open(f))["points"]:
            if p["metric"] in names:
                errors[p["metric"]].append(p["error"])
                if kind == "fitted":
                    print(f"{p['labels']:<60} {names[p['metric']]:<13} {p['measured']:>10.1f} {p['predicted']:>10.1f} {100 * p['error']:+7.1f}%")
    print(f"\nheld out, {'fitted on the two ends' if kind == 'fitted' else 'generic priors, no fit'}:")
    for m, v in errors.items():
        a = [abs(e) for e in v]
        print(f"  {names[m]:<13} n={len(a):<3} median {100 * sorted(a)[len(a) // 2]:5.1f} %   P90 {100 * p90(a):5.1f} %")
EOF
