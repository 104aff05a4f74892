"""The GAMP-RIE timings that issue 19 sets targets for, on this machine.

    python benchmarks/gamp_targets.py small   # softmax T = 3, d = 150, alpha = 0.05; hardmax T = 2,
                                              # d = 80, alpha = 1: cold and warm (median of 3)
    python benchmarks/gamp_targets.py big     # softmax T = 2, d = 400, alpha = 0.13, 80 iterations

Prints one JSON line (``RESULT{...}``): per case the cold time (the first run: compilation and
the cached tables), the warm time, the iterations, the error and the status. To compare two
versions of the package in the same session, run it with ``PYTHONPATH`` pointing at each
checkout (``git worktree add /tmp/old HEAD~1``), one after the other.
"""

import json
import statistics
import sys
import time

import jax

import aim_tutorial as aim


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


def main(which):
    if which == "small":
        out = {"softmax_T3_d150_alpha0.05": timed(150, 0.05, 3, "softmax"),
               "hardmax_T2_d80_alpha1": timed(80, 1.0, 2, "hardmax")}
    elif which == "big":
        out = {"softmax_T2_d400_alpha0.13_80it": timed(400, 0.13, 2, "softmax", repeats=1, max_iter=80,
                                                        tol=1e-300, min_iter=80, patience=10**6)}
    else:
        raise SystemExit("usage: python benchmarks/gamp_targets.py small|big")
    print("RESULT" + json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "small")
