"""Precompute the GAMP-RIE experiments of chapter 5 (``book/05_amp.md``).

Runs GAMP-RIE (:func:`aim_tutorial.gamp_rie`) on many independent instances and
stores the final errors, iteration counts and timings in small JSON files in
``aim_tutorial/data/`` (one a part), each with a header holding the parameters,
the seed, the package and JAX versions and the date. The chapter reads them and
overlays a small live run.

Parts:
  softmax   softmax channel, rho = 0.5, T = 2, 3, 4, d = 100, alpha grid, 3 instances each
  softmax150  softmax, rho = 0.5, T = 2 and 3, d = 150, mid-range alpha (0.13 for T = 2), 4 instances
  hardmax   hardmax channel (exact score), T = 2, rho = 0.5, d = 80, alpha grid, 8 instances each, adaptive damping
  finite    finite-size scaling: softmax T = 2, rho = 0.5, alpha = 0.13, d = 50..400 (7 sizes, 8 instances
            up to d = 200, then 4 and 3), with the time per iteration against d and the load average
  speed     softmax T = 3, d = 150, alpha = 0.05: wall time after compilation and peak memory,
            each measured in a fresh process

The instances of a sweep point run as one program spread over every visible device on a GPU or
TPU (``experiments.amp_runs``), one after another on a CPU; the finite-size part, which times each
run, always runs them one after another.

Every run uses the RIE's edge rule (``rie_outside="edge"``, gamp_rie's default; recorded in each
file's header). A part resumes from its file when it exists: delete the file to start it afresh.

Usage:
    python scripts/amp_experiments.py softmax softmax150 hardmax finite speed
    python scripts/amp_experiments.py --rie-outside continuation softmax   # amp_softmax_continuation.json
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np

import aim_tutorial as aim
from aim_tutorial.counting import alpha_scale
from aim_tutorial.experiments import amp_run, amp_runs

SEED = 2025
RHO = 0.5
RIE_OUTSIDE = "edge"  # gamp_rie's default; --rie-outside continuation writes amp_PART_continuation.json
DATA = Path(aim.__file__).resolve().parent / "data"
PART_IDS = {"softmax": 1, "hardmax": 2, "finite": 3, "speed": 4, "softmax150": 5}


TITLES = {"softmax": "GAMP-RIE against the state evolution, softmax, T = 2, 3, 4 (chapter 5)",
          "softmax150": "GAMP-RIE against the state evolution, softmax at d = 150 (chapter 5)",
          "hardmax": "GAMP-RIE against the state evolution, hardmax (chapter 5)",
          "finite": "GAMP-RIE's error against d at one alpha: the finite-size study (chapter 5)",
          "speed": "GAMP-RIE's wall time and memory against the published implementation (chapter 5)"}


def header(part, params):
    title = TITLES[part] + (", with the RIE continued off the support" if RIE_OUTSIDE != "edge" else "")
    return aim.datafiles.make_header(
        title, command=aim.datafiles.command_line("scripts/amp_experiments.py"), seed=SEED,
        params=dict(params, part=part, rie_outside=RIE_OUTSIDE),
        notes=[f"machine: {os.cpu_count()} CPU cores, {jax.devices()[0].platform}"])


def instance_key(part, *idx):
    """The key of one instance (teacher, data, AMP initialisation: aim.make_instance), from SEED."""
    k = jax.random.fold_in(jax.random.key(SEED), PART_IDS[part])
    for i in idx:
        k = jax.random.fold_in(k, int(i))
    return k


def make_instance(part, d, T, alpha, channel, idx):
    """Teacher, data and AMP initialisation key of one instance."""
    S, X, y, _, k_init = aim.make_instance(instance_key(part, *idx), d, RHO, alpha, T, channel=channel)
    return S, X, y, k_init


_FIELDS = ("error", "mmse_pred", "n_iter", "converged", "diverged", "status", "wall_s")


def run_one(part, d, T, alpha, channel, idx, **kw):
    r = amp_run(instance_key(part, *idx), d, RHO, alpha, T, channel=channel, rie_outside=RIE_OUTSIDE, **kw)
    return {k: r[k] for k in _FIELDS}


def run_point(part, d, T, alpha, channel, idxs, **kw):
    """The instances ``idxs`` of one sweep point: on a GPU or TPU as one program spread over every
    visible device (``experiments.amp_runs``: ``amp_device.gamp_rie_batch``, the same results up to
    rounding, ``wall_s`` the batch's time over its instances), on a CPU one after another."""
    runs = amp_runs([instance_key(part, *idx) for idx in idxs], d, RHO, alpha, T, channel=channel,
                    rie_outside=RIE_OUTSIDE, **kw)
    return [{k: r[k] for k in _FIELDS} for r in runs]


def load_previous(part):
    """Results already stored for ``part`` (the script resumes where it stopped)."""
    path = DATA / f"amp_{part}{SUFFIX}.json"
    return aim.datafiles.read(str(path)).content if path.exists() else {}


def save(part, params, body):
    DATA.mkdir(exist_ok=True)
    path = DATA / f"amp_{part}{SUFFIX}.json"
    aim.datafiles.write_document(str(path), body, header(part, params))
    print(f"wrote {path}", flush=True)


def part_softmax():
    params = dict(d=100, rho=RHO, T=[2, 3, 4], n_instances=8, max_iter=60, damping=0.5, init="prior",
                  alpha_T2=[0.13, 0.05, 0.20, 0.09, 0.16, 0.11],
                  note="alpha for T is alpha_T2 * 4 / (T^2 + T - 2): the SE depends on alpha (T^2 + T - 2) only")
    out = load_previous("softmax").get("curves", {str(T): [] for T in params["T"]})
    for ia, a2 in enumerate(params["alpha_T2"]):
        for T in params["T"]:
            alpha = a2 * 4 / alpha_scale(T)
            if any(abs(p["alpha"] - alpha) < 1e-12 for p in out[str(T)]):
                continue
            runs = run_point("softmax", params["d"], T, alpha, "softmax",
                             [(T, ia, s) for s in range(params["n_instances"])], max_iter=params["max_iter"])
            out[str(T)].append(dict(alpha=alpha, runs=runs))
            e = [r["error"] for r in runs]
            print(f"softmax T={T} alpha={alpha:.4f}: {np.mean(e):.4f} +- {np.std(e):.4f}", flush=True)
            save("softmax", params, {"curves": out})


def part_softmax150():
    params = dict(d=150, rho=RHO, T=[2, 3], n_instances=8, max_iter=60, damping=0.5, init="prior", alpha_T2=0.13)
    out = {}
    for T in params["T"]:
        alpha = params["alpha_T2"] * 4 / alpha_scale(T)
        runs = run_point("softmax150", params["d"], T, alpha, "softmax",
                         [(T, s) for s in range(params["n_instances"])], max_iter=params["max_iter"])
        out[str(T)] = dict(alpha=alpha, runs=runs)
        e = [r["error"] for r in runs]
        print(f"softmax d=150 T={T} alpha={alpha:.4f}: {np.mean(e):.4f} +- {np.std(e):.4f}", flush=True)
        save("softmax150", params, {"points": out})


def part_hardmax():
    # adaptive damping from 0, not the default 0.5: half damping from the start is slower at large alpha
    # (see "damping_demo") and no damping oscillates at small alpha (chapter 5)
    params = dict(d=80, rho=RHO, T=2, n_instances=8, max_iter=150, damping=0.0, adaptive_damping=True, tol=1e-6,
                  init="prior", score="exact", alpha=[0.2, 0.4, 0.6779, 1.0, 1.6, 2.5])
    rows = load_previous("hardmax").get("curve", [])
    for ia, alpha in enumerate(params["alpha"]):
        if any(abs(p["alpha"] - alpha) < 1e-12 for p in rows):
            continue
        runs = run_point("hardmax", params["d"], 2, alpha, "hardmax", [(ia, s) for s in range(params["n_instances"])],
                         max_iter=params["max_iter"], damping=params["damping"],
                         adaptive_damping=params["adaptive_damping"], tol=params["tol"])
        rows.append(dict(alpha=alpha, runs=runs))
        e = [r["error"] for r in runs]
        print(f"hardmax alpha={alpha:.4f}: {np.mean(e):.4f} +- {np.std(e):.4f}", flush=True)
        save("hardmax", params, {"curve": rows})
    # the same instance (alpha = 1.6, first seed) with damping 0.5, 0.2 and adaptive from 0: the error history
    damping_runs = load_previous("hardmax").get("damping_demo", [])
    if not damping_runs:
        ia = params["alpha"].index(1.6)
        for damping, adaptive in ((0.5, False), (0.2, False), (0.0, True)):
            S, X, y, k_init = make_instance("hardmax", params["d"], 2, 1.6, "hardmax", (ia, 0))
            res = aim.gamp_rie(X, y, RHO, channel="hardmax", key=k_init, S_true=S, damping=damping,
                               rie_outside=RIE_OUTSIDE,
                               adaptive_damping=adaptive, max_iter=params["max_iter"], tol=1e-9,
                               stall_patience=None, patience=params["max_iter"])
            damping_runs.append(dict(alpha=1.6, damping=damping, adaptive=adaptive, status=res.status,
                                     error=res.history.error.tolist(), mmse_pred=res.history.mmse_pred.tolist()))
            print(f"hardmax alpha=1.6, damping {damping} (adaptive: {adaptive}): error {res.error:.4f} "
                  f"after {res.n_iter} iterations ({res.status})", flush=True)
        save("hardmax", params, {"curve": rows, "damping_demo": damping_runs})


def part_finite():
    # 7 sizes, at least 3 instances each, so that the finite-size trend is fitted with error bars;
    # the load average is recorded with each size (timings on a shared machine are upper bounds)
    params = dict(d=[50, 70, 100, 140, 200, 280, 400], rho=RHO, T=2, alpha=0.13,
                  n_instances=[8, 8, 8, 8, 8, 4, 3], max_iter=60, damping=0.5, init="prior")
    rows = [r for r in load_previous("finite").get("sizes", [])
            if r["d"] in params["d"] and len(r["runs"]) == params["n_instances"][params["d"].index(r["d"])]]
    for d, n_inst in zip(params["d"], params["n_instances"]):
        if any(r["d"] == d for r in rows):
            continue
        run_one("finite", d, 2, params["alpha"], "softmax", (999, d), max_iter=2)  # compile (warm-up)
        runs = [run_one("finite", d, 2, params["alpha"], "softmax", (d, s), max_iter=params["max_iter"])
                for s in range(n_inst)]
        rows.append(dict(d=d, runs=runs, load_average=[round(x, 2) for x in os.getloadavg()]))
        rows.sort(key=lambda r: r["d"])
        e = [r["error"] for r in runs]
        tpi = [r["wall_s"] / r["n_iter"] for r in runs]
        print(f"finite d={d}: {np.mean(e):.4f} +- {np.std(e):.4f}; {np.median(tpi) * 1e3:.1f} ms/iteration",
              flush=True)
        save("finite", params, {"sizes": rows})


SPEED_CHILD = r"""
import json, resource, sys, time
import jax, aim_tutorial as aim
d, T, alpha, seed = 150, 3, 0.05, int(sys.argv[1])
S, X, y, _, k3 = aim.make_instance(jax.random.key(seed), d, 0.5, alpha, T)
jax.block_until_ready((X, y))
t0 = time.perf_counter(); aim.gamp_rie(X, y, 0.5, key=k3, S_true=S, max_iter=3, rie_outside=sys.argv[2]); t_compile = time.perf_counter() - t0
c0 = time.process_time(); t0 = time.perf_counter()
res = aim.gamp_rie(X, y, 0.5, key=k3, S_true=S, rie_outside=sys.argv[2]); jax.block_until_ready(res.S_hat)
wall = time.perf_counter() - t0; cpu = time.process_time() - c0
print(json.dumps(dict(wall_s=wall, cpu_s=cpu, first_call_s=t_compile, n_iter=res.n_iter, error=res.error, status=res.status,
                      converged=res.converged, peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)))
"""


def part_speed():
    params = dict(d=150, T=3, alpha=0.05, rho=RHO, repeats=3,
                  published=dict(wall_s=106, memory_gb=5.5, source="the paper's published implementation on the same instance, as timed in the project's issue tracker"))
    runs = []
    for s in range(params["repeats"]):
        out = subprocess.run([sys.executable, "-c", SPEED_CHILD, str(SEED + s), RIE_OUTSIDE], capture_output=True, text=True,
                             check=True)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print("speed", runs[-1], flush=True)
    save("speed", params, {"runs": runs})


SUFFIX = ""

if __name__ == "__main__":
    args = sys.argv[1:]
    if "--rie-outside" in args:  # the RIE continued off the support, as in the paper's code
        i = args.index("--rie-outside")
        RIE_OUTSIDE = args[i + 1]
        if RIE_OUTSIDE not in ("edge", "continuation"):
            sys.exit("--rie-outside must be 'edge' or 'continuation'")
        SUFFIX = "" if RIE_OUTSIDE == "edge" else "_" + RIE_OUTSIDE
        del args[i:i + 2]
    parts = args or ["softmax", "softmax150", "hardmax", "finite", "speed"]
    for p in parts:
        {"softmax": part_softmax, "softmax150": part_softmax150, "hardmax": part_hardmax, "finite": part_finite, "speed": part_speed}[p]()
