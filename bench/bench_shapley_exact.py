"""Exact Shapley values from a precomputed value table: compstrength.attribution vs shap's
ExactExplainer vs shapiq's ExactComputer, on the same random game, side by side.

Each (method, n) runs in a fresh subprocess, so that its peak memory (ru_maxrss growth over the
process after imports and the table) is its own. Every method gets the same value table; shap and
shapiq read it through a model on binary mask matrices (row -> bitmask -> table lookup, vectorised).
A competitor whose estimated time at the next n exceeds --limit seconds is skipped there.

    .venv/bin/python bench/bench_shapley_exact.py [--ns 10 14 16 18 20] [--limit 120] [--repeat 7]
"""
import argparse, json, os, platform, resource, subprocess, sys, time, tracemalloc

import numpy as np

METHODS = ("ours", "shap", "shapiq")


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


def runner(method: str, n: int, t: np.ndarray):
    bits = 1 << np.arange(n, dtype=np.int64)
    game = lambda M: t[(np.asarray(M) > 0.5).astype(np.int64) @ bits]
    if method == "ours":
        import compstrength.attribution as A
        def run():
            A._PC_CACHE.clear()  # count the popcount table in every run
            return A.attribute_table(t, range(n)).to_numpy()
    elif method == "shap":
        import shap
        def run():
            ex = shap.explainers.Exact(game, np.zeros((1, n)))
            return ex(np.ones((1, n)), max_evals=(1 << n) + 1, silent=True).values[0]
    else:
        import shapiq
        def run():
            sv = shapiq.ExactComputer(game, n_players=n)("SV")
            return np.array([sv[(i,)] for i in range(n)])
    return run


def worker(method: str, n: int, seed: int, repeat: int):
    runner(method, 4, np.random.default_rng(99).random(16))()  # warm-up: imports, numba compilation
    t = np.random.default_rng(seed).random(1 << n)
    run = runner(method, n, t)
    base = rss_mb()
    times = []
    for _ in range(repeat if method == "ours" else 1):
        t0 = time.perf_counter(); phi = run(); times.append(time.perf_counter() - t0)
    print(json.dumps(dict(seconds=float(np.median(times)), rss_mb=rss_mb() - base, phi=phi.tolist())), flush=True)
    tracemalloc.start(); run(); traced = tracemalloc.get_traced_memory()[1] / 2**20; tracemalloc.stop()  # a separate, untimed run
    print(json.dumps(dict(peak_mb=traced)), flush=True)


def run_worker(method, n, seed, repeat, timeout):
    cmd = [sys.executable, __file__, "--worker", method, "--n", str(n), "--seed", str(seed), "--repeat", str(repeat)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        out, err, rc = p.stdout, p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:  # the timed run may have finished before the traced one
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err, rc = f"timed out after {timeout:.0f} s", None
    res = {}
    for line in out.splitlines():
        if line.startswith("{"): res.update(json.loads(line))
    if "seconds" not in res: return dict(error=err.strip().splitlines()[-1] if err.strip() else f"exit {rc}")
    if "peak_mb" not in res: res["mem_note"] = f"memory run: {err.strip().splitlines()[-1] if err.strip() else rc}"
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ns", type=int, nargs="+", default=[10, 14, 16, 18, 20])
    ap.add_argument("--limit", type=float, default=120.0, help="skip a competitor whose estimated time exceeds this")
    ap.add_argument("--repeat", type=int, default=7, help="runs of ours per n (median reported)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--worker"); ap.add_argument("--n", type=int)
    a = ap.parse_args()
    if a.worker: return worker(a.worker, a.n, a.seed, a.repeat)

    import numpy, shap
    methods = ["ours", "shap"]
    try:
        import shapiq; methods.append("shapiq")
        from importlib.metadata import version; shapiq_v = version("shapiq")
    except ImportError:
        shapiq_v = None
        print("shapiq is not installed: its column is skipped (pip install shapiq to include it)")
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, python {platform.python_version()}, "
          f"numpy {numpy.__version__}, shap {shap.__version__}, shapiq {shapiq_v}")
    print("# random game, values U(0,1) seeded; seconds: ours = median of", a.repeat, "runs, competitors one run;",
          "each after a warm-up call on a 4-player game (imports, numba compilation);",
          "peak MB: tracemalloc peak of one more, untimed run (numpy allocations; not numba-internal ones);",
          "RSS MB: growth of the process's max RSS during the timed runs\n")
    last: dict = {}
    rows = []
    for n in a.ns:
        res = {}
        for m in methods:
            if m in last:
                n0, s0 = last[m]
                est = s0 * 2 ** (n - n0) * n / n0
                if est > a.limit:
                    res[m] = dict(error=f"skipped: est. {est:.0f} s > {a.limit:.0f} s"); continue
            r = run_worker(m, n, a.seed, a.repeat, timeout=1.5 * a.limit)
            res[m] = r
            if "seconds" in r: last[m] = (n, r["seconds"])
        ok = {m: np.array(r["phi"]) for m, r in res.items() if "phi" in r}
        diff = max((np.abs(ok[m] - ok["ours"]).max() for m in ok if m != "ours"), default=float("nan")) if "ours" in ok else float("nan")
        rows.append((n, res, diff))
        line = f"n={n:2d}: " + ", ".join(f"{m} {r['seconds']:.3f} s" if "seconds" in r else f"{m} {r['error']}" for m, r in res.items())
        print(line, flush=True)

    print()
    head = f"{'n':>3} {'coalitions':>10} {'ours s':>8} {'shap s':>9} {'shapiq s':>9} {'shap/ours':>10} {'shapiq/ours':>12} {'ours MB':>8} {'shap MB':>8} {'shapiq MB':>10} {'RSS MB o/s/q':>14} {'max|diff|':>10}"
    print(head); print("-" * len(head))
    notes = []
    for n, res, diff in rows:
        def sec(m): return f"{res[m]['seconds']:.4f}" if "seconds" in res.get(m, {}) else "—"
        def mb(m): return f"{res[m]['peak_mb']:.1f}" if "peak_mb" in res.get(m, {}) else "—"
        rss = "/".join(f"{res[m]['rss_mb']:.0f}" if "rss_mb" in res.get(m, {}) else "—" for m in METHODS)
        def ratio(m):
            if "seconds" not in res.get(m, {}) or "seconds" not in res["ours"]: return "—"
            return f"{res[m]['seconds'] / res['ours']['seconds']:.0f}x"
        for m in ("shap", "shapiq"):
            if m in res and "error" in res[m]: notes.append(f"n={n} {m}: {res[m]['error']}")
            if m in res and "mem_note" in res[m]: notes.append(f"n={n} {m}: {res[m]['mem_note']}")
        print(f"{n:>3} {1 << n:>10} {sec('ours'):>8} {sec('shap'):>9} {sec('shapiq'):>9} {ratio('shap'):>10} {ratio('shapiq'):>12} "
              f"{mb('ours'):>8} {mb('shap'):>8} {mb('shapiq'):>10} {rss:>14} {diff:>10.1e}")
    for s in notes: print("  " + s)


if __name__ == "__main__":
    main()
