"""float32 against float64 for gradient descent: wall time and error, on one instance of the book.

Usage (from the repository root):
    python benchmarks/precision.py --out benchmarks/precision.json            # 32 students x 1000 Adam steps, d = 100
    python benchmarks/precision.py --steps 200 --out /tmp/precision.json      # a shorter run
    python benchmarks/precision.py --gamp --out benchmarks/precision_gamp.json  # GAMP-RIE (below)

``--gamp``: GAMP-RIE (:func:`aim_tutorial.gamp_rie`, ``dtype=``) in float32 and float64 on instances
like chapter 5's (every channel, both sides of the hardmax transition, ``T = 3``), three seeds
each: the error, the iterations and the status of each dtype, and the largest difference of the
errors against the spread of the errors over the seeds.

The instance is ``aim.make_instance(jax.random.key(0), d, 0.5, alpha, T=2)`` with
``x = alpha * 4 = 0.4`` (softmax, T = 2: ``alpha = x / 4``), the students start from the
instance's algorithm key, and :func:`aim_tutorial.train_gd` (Adam, lr 0.1) runs once per dtype
as a warm-up (compilation: the "cold" time), then ``--repeats`` times (median reported), each
ended by ``block_until_ready()``; both dtypes in the same process, alternating, so that a change
of the machine's load touches both. Both dtypes start from the same students (drawn in float64,
then cast: :func:`aim_tutorial.config.algorithm_dtype`). The errors are computed in float64 from
the returned matrices: the error of the average of the ``n_init`` students,
``||mean_k S_k - S||_F^2 / d`` (:func:`aim_tutorial.gd.averaged_errors`), and the mean single-student
error ``mean_k ||S_k - S||_F^2 / d``. The table goes to stdout, every number to ``--out`` (JSON).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # the package of this checkout


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d", type=int, default=100)
    parser.add_argument("--x", type=float, default=0.4, help="x = alpha (T^2 + T - 2) = 4 alpha at T = 2")
    parser.add_argument("--n-init", type=int, default=32)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", required=True, help="path of the JSON file written")
    parser.add_argument("--gamp", action="store_true", help="GAMP-RIE instead of gradient descent")
    args = parser.parse_args(argv)
    if args.gamp:
        return gamp(args)

    import jax
    import numpy as np

    import aim_tutorial as aim

    T, rho = 2, 0.5
    alpha = args.x / 4.0
    inst = aim.make_instance(jax.random.key(0), args.d, rho, alpha, T=T)
    S = np.asarray(inst.S, dtype=np.float64)
    load_before = os.getloadavg()

    def run(dtype):
        t0 = time.perf_counter()
        res = aim.train_gd(inst.key, inst.X, inst.y, rho, n_init=args.n_init, steps=args.steps, lr=args.lr,
                           S_true=inst.S, progress=False, dtype=dtype)
        jax.block_until_ready((res.S_students, res.loss, res.error_mean))
        return time.perf_counter() - t0, res

    dtypes = ("float32", "float64")
    cold, times, results = {}, {dt: [] for dt in dtypes}, {}
    for dt in dtypes:
        cold[dt], results[dt] = run(dt)
    for _ in range(args.repeats):
        for dt in dtypes:
            t, res = run(dt)
            times[dt].append(t)
            assert np.array_equal(np.asarray(res.S_hat), np.asarray(results[dt].S_hat)), "not deterministic"

    rows = {}
    for dt in dtypes:
        res = results[dt]
        Ss = np.asarray(res.S_students, dtype=np.float64)
        avg = float(aim.gd.averaged_errors(Ss, S, Ks=[args.n_init])[0])
        single = float(np.mean(np.sum((Ss - S) ** 2, axis=(1, 2)) / args.d))
        rows[dt] = dict(dtype=str(res.S_hat.dtype), cold_s=cold[dt], times_s=times[dt],
                        median_s=statistics.median(times[dt]),
                        per_step_ms=1e3 * statistics.median(times[dt]) / args.steps,
                        error_averaged=avg, error_single_mean=single,
                        final_loss_mean=float(np.mean(np.asarray(res.final_loss, dtype=np.float64))),
                        n_diverged=int(np.sum(res.diverged)))
    f32, f64 = rows["float32"], rows["float64"]
    summary = dict(
        speedup_float32=f64["median_s"] / f32["median_s"],
        diff_error_averaged=f32["error_averaged"] - f64["error_averaged"],
        diff_error_single_mean=f32["error_single_mean"] - f64["error_single_mean"],
        max_abs_diff_S_hat=float(np.max(np.abs(np.asarray(results["float32"].S_hat, dtype=np.float64)
                                                - np.asarray(results["float64"].S_hat)))),
    )
    summary["errors_within_1e-3"] = bool(abs(summary["diff_error_averaged"]) < 1e-3
                                         and abs(summary["diff_error_single_mean"]) < 1e-3)

    print(f"train_gd: d = {args.d}, rho = {rho}, T = {T}, x = {args.x} (alpha = {alpha:g}, n = {inst.n}), "
          f"{args.n_init} students x {args.steps} Adam steps (lr {args.lr}), median of {args.repeats} after a warm-up; "
          f"{jax.default_backend()}, {os.cpu_count()} cores, load {load_before[0]:.2f}")
    print(f"{'dtype':8s} {'cold s':>8s} {'median s':>9s} {'ms/step':>8s} {'err(avg)':>12s} {'err(single)':>12s}")
    for dt in dtypes:
        r = rows[dt]
        print(f"{dt:8s} {r['cold_s']:8.2f} {r['median_s']:9.2f} {r['per_step_ms']:8.2f} {r['error_averaged']:12.6f} "
              f"{r['error_single_mean']:12.6f}")
    print(f"float32 speed-up {summary['speedup_float32']:.2f}x; error differences (float32 - float64): averaged "
          f"{summary['diff_error_averaged']:.2e}, single {summary['diff_error_single_mean']:.2e} "
          f"(within 1e-3: {summary['errors_within_1e-3']}); max |S_hat32 - S_hat64| {summary['max_abs_diff_S_hat']:.2e}")

    out = dict(
        what="train_gd float32 against float64 (benchmarks/precision.py)",
        command=" ".join([os.path.basename(sys.executable), *sys.argv]),
        written=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        params=dict(d=args.d, rho=rho, T=T, x=args.x, alpha=alpha, n=inst.n, n_init=args.n_init, steps=args.steps,
                    lr=args.lr, repeats=args.repeats, instance="make_instance(jax.random.key(0), d, rho, alpha, T)"),
        machine=dict(backend=jax.default_backend(), devices=[str(dv) for dv in jax.devices()],
                     cpu_count=os.cpu_count(), platform=platform.platform(), load_before=load_before,
                     load_after=os.getloadavg()),
        versions=dict(python=platform.python_version(), jax=jax.__version__, numpy=np.__version__),
        results=rows,
        summary=summary,
    )
    with open(args.out, "w") as fh:
        json.dump(out, fh, indent=2)
        fh.write("\n")
    return out


# (channel, d, alpha, T, noise): chapter 5's settings (softmax on both sides of nothing, the hardmax
# below and above its perfect-recovery threshold 0.68, T = 3, the noisy linear channel)
GAMP_CASES = [("softmax", 100, 0.05, 2, 0.0), ("softmax", 100, 0.13, 2, 0.0), ("softmax", 100, 0.3, 2, 0.0),
              ("softmax", 150, 0.05, 3, 0.0), ("hardmax", 80, 0.2, 2, 0.0), ("hardmax", 80, 0.6779, 2, 0.0),
              ("hardmax", 80, 1.0, 2, 0.0), ("linear", 100, 0.1, 2, 0.5)]


def gamp(args):
    """GAMP-RIE in float32 against float64 (``--gamp``)."""
    import jax
    import numpy as np

    import aim_tutorial as aim

    rho, seeds = 0.5, (0, 1, 2)
    rows = []
    for ch, d, alpha, T, noise in GAMP_CASES:
        per = {"float32": [], "float64": []}
        for seed in seeds:
            inst = aim.make_instance(jax.random.key(seed), d, rho, alpha, T, channel=ch, noise=noise)
            for dt in per:
                t0 = time.perf_counter()
                r = aim.gamp_rie(inst.X, inst.y, rho, channel=ch, noise=noise, key=inst.key, S_true=inst.S,
                                 dtype=dt, max_iter=100)
                jax.block_until_ready(r.S_hat)
                per[dt].append(dict(seed=seed, error=float(r.error), n_iter=int(r.n_iter), status=r.status,
                                    seconds=time.perf_counter() - t0, dtype=str(r.S_hat.dtype)))
        e32 = np.array([p["error"] for p in per["float32"]])
        e64 = np.array([p["error"] for p in per["float64"]])
        row = dict(channel=ch, d=d, alpha=alpha, T=T, noise=noise, runs=per,
                   max_abs_diff_error=float(np.max(np.abs(e32 - e64))),
                   seed_spread_error=float(np.std(e64, ddof=1)),
                   same_status=all(a["status"].split(":")[0] == b["status"].split(":")[0]
                                   for a, b in zip(per["float32"], per["float64"])))
        rows.append(row)
        print(f"{ch:8s} d = {d:3d} alpha = {alpha:<6g} T = {T} noise = {noise}: error float64 "
              f"{', '.join(f'{e:.5f}' for e in e64)}; |float32 - float64| <= {row['max_abs_diff_error']:.1e} "
              f"(seed spread {row['seed_spread_error']:.1e}); same status: {row['same_status']}", flush=True)
    worst = max(r["max_abs_diff_error"] for r in rows)
    print(f"largest |error float32 - error float64| over {len(rows)} settings x {len(seeds)} seeds: {worst:.1e} "
          f"(within 1e-3: {worst < 1e-3})")
    out = dict(
        what="gamp_rie float32 against float64 (benchmarks/precision.py --gamp)",
        command=" ".join([os.path.basename(sys.executable), *sys.argv]),
        written=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        params=dict(rho=rho, seeds=list(seeds), max_iter=100,
                    instance="make_instance(jax.random.key(seed), d, rho, alpha, T, channel, noise)"),
        machine=dict(backend=jax.default_backend(), cpu_count=os.cpu_count(), platform=platform.platform()),
        versions=dict(python=platform.python_version(), jax=jax.__version__, numpy=np.__version__),
        results=rows, summary=dict(max_abs_diff_error=worst, within_1e_3=bool(worst < 1e-3)),
    )
    with open(args.out, "w") as fh:
        json.dump(out, fh, indent=2)
        fh.write("\n")
    return out


if __name__ == "__main__":
    main()
