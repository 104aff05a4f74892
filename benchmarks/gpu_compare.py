"""The GPU's paper-scale GAMP-RIE runs (float32) against the same instances rerun here in float64.

Usage (from the repository root, on a CPU):
    python benchmarks/gpu_compare.py --out benchmarks/gpu/cpu_float64.json
    python benchmarks/gpu_compare.py --gpu-dir benchmarks/gpu/full_precision \
        --stored benchmarks/gpu/cpu_float64.json --out benchmarks/gpu/full_precision/compare.json

With ``--stored`` nothing is rerun: the figures found in ``--gpu-dir`` (a later GPU run of the same
instances, e.g. at another matrix-product precision) are compared with the float64 errors that an
earlier run of this script stored.

``benchmarks/gpu/`` holds the files that ``python -m aim_tutorial reproduce amp-se`` and
``amp-hardmax --scale paper`` wrote on one NVIDIA H200 (``scripts/device_paper_run.py``), where the
algorithms ran in float32, the platform's default (:func:`aim_tutorial.config.algorithm_dtype`;
XLA's default precision on that GPU computes float32 matrix products with TF32 tensor cores).
This script reruns every GAMP-RIE instance of those files on this machine in float64, with the
same keys (``reproduce._key(seed, alpha index, instance)``, as ``reproduce`` draws them), the
same options and one instance after another (``amp_runs(..., batch=False)``), and writes both
errors side by side with the largest difference and the spread of the errors over the seeds.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # the package of this checkout

FIGURES = {"amp-se": "softmax", "amp-hardmax": "hardmax"}


def _gpu_runs(data, alpha: float, seeds: int) -> tuple:
    """The GAMP-RIE errors and iteration counts of a figure's file at ``alpha``, seed by seed."""
    import numpy as np

    kind, al, seed = data.column("kind"), data.column("alpha"), data.column("seed")
    rows = [(kind == 1) & np.isclose(al, alpha) & (seed == s) for s in range(seeds)]
    return ([float(data.column("mmse")[r][0]) for r in rows], [int(data.column("n_iter")[r][0]) for r in rows])


def compare(fig: str, folder: str) -> dict:
    import numpy as np

    from aim_tutorial import reproduce

    data = reproduce.read_data(os.path.join(folder, f"{fig}.csv"))
    p, channel = data.params, FIGURES[fig]
    points = []
    for i, a in enumerate(p["alphas"]):
        t0 = time.perf_counter()
        keys = [reproduce._key(p["seed"], i, s) for s in range(p["seeds"])]
        runs = reproduce.amp_runs(keys, p["d"], p["rho"], a, p["T"], channel=channel, max_iter=p["max_iter"],
                                  batch=False, dtype="float64", **reproduce._amp_options(channel))
        e_gpu, it_gpu = _gpu_runs(data, a, p["seeds"])
        e_cpu = [r["error"] for r in runs]
        points.append(dict(alpha=a, error_gpu_float32=e_gpu, error_cpu_float64=e_cpu,
                           n_iter_gpu=it_gpu, n_iter_cpu=[r["n_iter"] for r in runs],
                           status_cpu=[r["status"] for r in runs],
                           max_abs_diff=float(np.max(np.abs(np.subtract(e_gpu, e_cpu)))),
                           seed_spread=float(np.std(e_cpu, ddof=1)), cpu_s=time.perf_counter() - t0))
        print(f"  {fig} alpha = {a}: max |float32 (GPU) - float64 (CPU)| = {points[-1]['max_abs_diff']:.1e}, "
              f"seed spread {points[-1]['seed_spread']:.1e}, {points[-1]['cpu_s']:.1f} s here", flush=True)
    return dict(figure=fig, channel=channel, d=p["d"], rho=p["rho"], T=p["T"], seeds=p["seeds"],
                max_iter=p["max_iter"], gpu_device=data.params.get("device", ""), points=points,
                max_abs_diff=max(q["max_abs_diff"] for q in points),
                cpu_seconds=sum(q["cpu_s"] for q in points))


def compare_stored(fig: str, folder: str, stored: dict) -> dict:
    """``fig``'s GPU errors in ``folder`` against the float64 errors of the same instances in ``stored``
    (a file this script wrote): nothing is rerun."""
    import numpy as np

    from aim_tutorial import reproduce

    data = reproduce.read_data(os.path.join(folder, f"{fig}.csv"))
    p = data.params
    ref = next(f for f in stored["figures"] if f["figure"] == fig)
    for k in ("d", "rho", "T", "seeds", "max_iter"):
        if p[k] != ref[k]:
            raise ValueError(f"{fig}: {k} = {p[k]} in {folder}, {ref[k]} in the stored float64 runs")
    points = []
    for q in ref["points"]:
        e_gpu, it_gpu = _gpu_runs(data, q["alpha"], p["seeds"])
        points.append(dict(alpha=q["alpha"], error_gpu_float32=e_gpu, error_cpu_float64=q["error_cpu_float64"],
                           n_iter_gpu=it_gpu, n_iter_cpu=q["n_iter_cpu"],
                           max_abs_diff=float(np.max(np.abs(np.subtract(e_gpu, q["error_cpu_float64"])))),
                           seed_spread=q["seed_spread"]))
        print(f"  {fig} alpha = {q['alpha']}: max |float32 (GPU) - float64 (CPU)| = "
              f"{points[-1]['max_abs_diff']:.1e}, seed spread {q['seed_spread']:.1e}", flush=True)
    return dict(figure=fig, channel=FIGURES[fig], d=p["d"], rho=p["rho"], T=p["T"], seeds=p["seeds"],
                max_iter=p["max_iter"], points=points, max_abs_diff=max(q["max_abs_diff"] for q in points))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpu-dir", default=os.path.join(HERE, "gpu"), help="the GPU run's files")
    p.add_argument("--out", required=True, help="path of the JSON file written")
    p.add_argument("--stored", default=None,
                   help="a JSON file this script wrote: compare with its float64 errors instead of rerunning")
    a = p.parse_args(argv)
    import jax

    if a.stored is not None:
        with open(a.stored) as f:
            stored = json.load(f)
        figs = [f for f in FIGURES if os.path.exists(os.path.join(a.gpu_dir, f"{f}.csv"))]
        if not figs:
            p.error(f"no figure of {sorted(FIGURES)} in {a.gpu_dir}")
        res = dict(what="GAMP-RIE: a GPU run's float32 errors against the float64 errors stored in "
                        + os.path.relpath(a.stored, os.path.dirname(HERE)),
                   command="python benchmarks/gpu_compare.py " + " ".join(sys.argv[1:] if argv is None else argv),
                   written=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                   stored_written=stored["written"], figures=[compare_stored(f, a.gpu_dir, stored) for f in figs])
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)
        print(f"wrote {a.out}")
        return 0

    res = dict(what="GAMP-RIE: the GPU's float32 paper-scale runs against float64 on this machine",
               command="python benchmarks/gpu_compare.py " + " ".join(sys.argv[1:] if argv is None else argv),
               written=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               machine=dict(backend=jax.default_backend(), cpu_count=os.cpu_count(), platform=platform.platform()),
               versions=dict(python=platform.python_version(), jax=jax.__version__),
               figures=[compare(fig, a.gpu_dir) for fig in FIGURES])
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
