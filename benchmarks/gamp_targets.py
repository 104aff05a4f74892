"""The GAMP-RIE timings that issue 19 sets targets for, on this machine.

    python benchmarks/gamp_targets.py small   # softmax T = 3, d = 150, alpha = 0.05; hardmax T = 2,
                                              # d = 80, alpha = 1: cold and warm (median of 7)
    python benchmarks/gamp_targets.py big     # softmax T = 2, d = 400, alpha = 0.13, 80 iterations
    python benchmarks/gamp_targets.py batch   # 8 instances at d = 80 (softmax T = 2, alpha = 0.3;
                                              # hardmax T = 2, alpha = 1): one after another with
                                              # gamp_rie, and as one program (amp_device.gamp_rie_batch)

Prints a line ``CASE name {...}`` as each case finishes (so that a run stopped at a time limit
keeps the cases it finished), then one JSON line (``RESULT{...}``): per case the cold time (the
first run: compilation and the cached tables), the warm time, the iterations, the error and the
status. To compare two
versions of the package in the same session, run it with ``PYTHONPATH`` pointing at each
checkout (``git worktree add /tmp/old HEAD~1``), one after the other.
"""

import json
import resource
import statistics
import sys
import time

import jax

import aim_tutorial as aim


def _cpu_seconds():
    """CPU time of this process so far, every thread, user and system."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def timed(d, alpha, T, channel, repeats=3, **kw):
    inst = aim.make_instance(jax.random.key(0), d, 0.5, alpha, T, channel=channel)

    def run():
        res = aim.gamp_rie(inst.X, inst.y, 0.5, channel=channel, S_true=inst.S, key=inst.key, **kw)
        jax.block_until_ready(res.S_hat)
        return res

    t0 = time.perf_counter()
    run()
    cold = time.perf_counter() - t0
    warm = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        res = run()
        warm.append(time.perf_counter() - t0)
    return dict(cold=cold, warm=statistics.median(warm), iters=int(res.n_iter), error=float(res.error),
                status=res.status.split(":")[0])


def batch(d, alpha, T, channel, B=8, repeats=3):
    """``B`` instances (seeds 0..B-1) run by ``gamp_rie`` one after another, then by
    ``gamp_rie_batch`` (same keys: the same results; on a CPU its default ``streams``, one per core);
    cold (first) and warm (median) times of each, and the process's CPU time of the warm runs
    (median; ``cpu`` the batch's, ``seq_cpu`` the sequential runs')."""
    import jax.numpy as jnp

    from aim_tutorial.amp_device import _cores, gamp_rie_batch

    insts = [aim.make_instance(jax.random.key(s), d, 0.5, alpha, T, channel=channel) for s in range(B)]
    X, y, S = (jnp.stack([getattr(i, f) for i in insts]) for f in ("X", "y", "S"))
    keys = [i.key for i in insts]

    def sequential():
        return [aim.gamp_rie(i.X, i.y, 0.5, channel=channel, S_true=i.S, key=i.key) for i in insts]

    def batched():
        return gamp_rie_batch(X, y, 0.5, channel=channel, S_true=S, keys=keys)

    # the cold run of each, then the warm runs taking turns (sequential, batch, sequential, ...), so
    # that a shared machine's slow spells fall on both; the process's CPU time (every thread) beside
    # the wall time of each run
    fns = dict(sequential=sequential, batch=batched)
    times, cpu, res = {name: [] for name in fns}, {name: [] for name in fns}, {}
    for _ in range(repeats + 1):
        for name, fn in fns.items():
            c0, t0 = _cpu_seconds(), time.perf_counter()
            res[name] = fn()
            jax.block_until_ready(res[name][-1].S_hat)
            times[name].append(time.perf_counter() - t0)
            cpu[name].append(_cpu_seconds() - c0)
    out = {name: dict(cold=times[name][0], warm=statistics.median(times[name][1:]),
                      cpu=statistics.median(cpu[name][1:]),
                      iters=[int(r.n_iter) for r in res[name]], errors=[float(r.error) for r in res[name]],
                      status=[r.status.split(":")[0] for r in res[name]]) for name in fns}
    same = all(a == b for a, b in zip(out["sequential"]["iters"], out["batch"]["iters"]))
    seq_iter = out["sequential"]["warm"] / sum(out["sequential"]["iters"])
    return dict(cold=out["batch"]["cold"], warm=out["batch"]["warm"], seq_cold=out["sequential"]["cold"],
                cpu=out["batch"]["cpu"], seq_cpu=out["sequential"]["cpu"], cores=_cores(), streams=min(B, _cores()),
                seq_per_iteration=seq_iter,
                seq_warm=out["sequential"]["warm"], speedup=out["sequential"]["warm"] / out["batch"]["warm"],
                iters=sum(out["batch"]["iters"]), status=f"{B} instances, same iterations: {same}",
                max_error_diff=max(abs(a - b) for a, b in zip(out["sequential"]["errors"], out["batch"]["errors"])))


def main(which):
    cases = {
        # seven warm runs of the small cases (a quarter of a second each): their median is
        # steadier against the load of a shared machine than that of three
        "small": {"softmax_T3_d150_alpha0.05": lambda: timed(150, 0.05, 3, "softmax", repeats=7),
                  "hardmax_T2_d80_alpha1": lambda: timed(80, 1.0, 2, "hardmax", repeats=7)},
        "big": {"softmax_T2_d400_alpha0.13_80it": lambda: timed(400, 0.13, 2, "softmax", repeats=1, max_iter=80,
                                                                 tol=1e-300, min_iter=80, patience=10**6)},
        "batch": {"batch8_softmax_T2_d80_alpha0.3": lambda: batch(80, 0.3, 2, "softmax"),
                  "batch8_hardmax_T2_d80_alpha1": lambda: batch(80, 1.0, 2, "hardmax", repeats=3)},
    }
    if which not in cases:
        raise SystemExit("usage: python benchmarks/gamp_targets.py small|big|batch")
    out = {}
    for name, run in cases[which].items():
        out[name] = run()
        # each case as soon as it is done, so that a run stopped at a time limit keeps it
        print(f"CASE {name} " + json.dumps(out[name]), flush=True)
    print("RESULT" + json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "small")
