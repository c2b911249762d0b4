#!/usr/bin/env python3
"""How fast `vllm bench serve`'s own client puts a burst of requests on the wire.

Runs vLLM's request function (its `vllm/benchmarks/lib/endpoint_request_func.py`, loaded from a
vLLM source tree, not copied) the way its `serve.py` runs it at `--request-rate inf`: one aiohttp
session with its connector settings, one task a request, all created at once, after one warm-up
request. A server in another process answers each request with two tokens and stamps, on the
same monotonic clock, when each request's body arrived. Per burst size it prints, in ms:
  clock step   how far apart the requests' own clocks (`st`, from which TTFT counts) start;
  first / n    when the first request is on the wire, over the burst size;
  send step    how far apart the requests reach the server after that;
  mean TTFT    what the client reports against a server that answers at once.
`predict`'s `bench-client=vllm` (crates/sim/src/predict/dispatch.rs) takes its constants from
this (CALIBRATION.md, "The measuring client").

Usage: python3 scripts/sim/vllm_client_probe.py VLLM_SOURCE_TREE [N ...]   (default N: 16 64 300 1000)
Needs aiohttp and tqdm (and regex from vLLM 0.13: pip install aiohttp tqdm regex); a vLLM
source tree is its sdist unpacked. Releases before 0.11 keep no clock a request (clock step: -).
"""
import asyncio
import importlib.util
import json
import multiprocessing
import socket
import sys
import threading
import time

CHUNKS = [b'data: {"choices":[{"index":0,"text":"a"}]}\n\n', b'data: {"choices":[{"index":0,"text":"b"}]}\n\n',
          b'data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}\n\n', b"data: [DONE]\n\n"]
BODY = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in CHUNKS) + b"0\r\n\r\n"
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def serve(sock, stamps, done):
    """Answers every request on every connection; appends its arrival (ns) to `stamps`."""
    def handle(conn):
        f = conn.makefile("rb")
        try:
            while f.readline():
                length = 0
                while (h := f.readline()) not in (b"\r\n", b""):
                    if h.lower().startswith(b"content-length:"):
                        length = int(h.split(b":")[1])
                f.read(length)
                stamps.append(time.monotonic_ns())
                conn.sendall(HEAD + BODY)
        finally:
            conn.close()
    sock.settimeout(0.2)
    while not done.is_set():
        try:
            conn, _ = sock.accept()
        except socket.timeout:
            continue
        threading.Thread(target=handle, args=(conn,), daemon=True).start()


def server_process(port, n, out):
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(4096)
    stamps, done = [], threading.Event()
    threading.Thread(target=serve, args=(sock, stamps, done), daemon=True).start()
    while len(stamps) < n + 1:
        time.sleep(0.05)
    done.set()
    out.put(sorted(stamps)[1:])  # the warm-up's first


async def burst(erf, url, n):
    import aiohttp
    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, ttl_dns_cache=300, use_dns_cache=True,
                                     keepalive_timeout=60, enable_cleanup_closed=True, force_close=False, ssl=False)
    session = aiohttp.ClientSession(connector=connector, trust_env=True, timeout=aiohttp.ClientTimeout(total=600))
    prompt = " ".join(["word"] * 1000)
    inputs = [erf.RequestFuncInput(prompt=prompt, api_url=url, prompt_len=1000, output_len=2, model="m") for _ in range(n)]
    await erf.async_request_openai_completions(request_func_input=inputs[0], session=session)
    t0 = time.monotonic_ns()
    tasks = [asyncio.create_task(erf.async_request_openai_completions(request_func_input=i, session=session))
             for i in inputs]
    outs = await asyncio.gather(*tasks)
    await session.close()
    if not all(o.success for o in outs):
        raise SystemExit(f"requests failed: {[o.error for o in outs if not o.success][:3]}")
    # `time.perf_counter` is CLOCK_MONOTONIC on Linux, as `time.monotonic_ns`. Releases before
    # 0.11 keep no `start_time`.
    clocks = sorted(int(o.start_time * 1e9) for o in outs if getattr(o, "start_time", None))
    return t0, clocks, sum(o.ttft for o in outs) / n


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    path = f"{sys.argv[1]}/vllm/benchmarks/lib/endpoint_request_func.py"
    spec = importlib.util.spec_from_file_location("endpoint_request_func", path)
    erf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(erf)
    sizes = [int(a) for a in sys.argv[2:]] or [16, 64, 300, 1000]
    print(f"{'n':>6} {'clock step':>11} {'first / n':>10} {'send step':>10} {'mean TTFT':>10}")
    for n in sizes:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        out = multiprocessing.Queue()
        server = multiprocessing.Process(target=server_process, args=(port, n, out), daemon=True)
        server.start()
        time.sleep(0.5)
        t0, clocks, ttft = asyncio.run(burst(erf, f"http://127.0.0.1:{port}/v1/completions", n))
        arrivals = out.get(timeout=60)
        server.join(timeout=5)
        ms, steps = 1e-6, max(1, n - 1)
        clock = f"{(clocks[-1] - clocks[0]) * ms / steps:>11.3f}" if len(clocks) == n else f"{'-':>11}"
        print(f"{n:>6} {clock} {(arrivals[0] - t0) * ms / n:>10.3f} "
              f"{(arrivals[-1] - arrivals[0]) * ms / steps:>10.3f} {ttft * 1e3:>10.1f}")
    print(json.dumps({"vllm_source": sys.argv[1]}))


if __name__ == "__main__":
    main()
