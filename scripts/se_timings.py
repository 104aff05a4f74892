"""Time the state-evolution solvers (chapter 4): the figures quoted in the chapter and the report.

Run: ``python scripts/se_timings.py`` (CPU; pin to 2 cores with ``taskset -c 0,1`` to match CI).
Prints wall-clock and CPU seconds, after a warm-up where stated, with ``block_until_ready`` implied
(the solvers return numpy arrays).
"""

import functools
import time

import jax
import numpy as np

import aim_tutorial as aim

from aim_tutorial import state_evolution as se


def timed(label, f):
    t0, c0 = time.perf_counter(), time.process_time()
    out = f()
    print(f"{label}: wall {time.perf_counter() - t0:.3f} s, cpu {time.process_time() - c0:.3f} s", flush=True)
    return out


def softmax_g(h, beta):
    return jax.nn.softmax(beta * h, axis=-1)


def main():
    grid = np.linspace(1e-4, 0.25, 256)
    timed("softmax, 256 points, cold (tabulates mmse_rho for rho = 0.5)", lambda: aim.solve_state_evolution(grid, 0.5))
    timed("softmax, 256 points, warm", lambda: aim.solve_state_evolution(grid, 0.5))
    se.clear_tables()
    hm = np.geomspace(0.02, 10.0, 30)
    timed("hardmax exact, 30 points, rho = 0.5, cold (all one-off set-up)",
          lambda: aim.solve_state_evolution(hm, 0.5, channel="hardmax"))
    timed("hardmax exact, 30 points, warm", lambda: aim.solve_state_evolution(hm, 0.5, channel="hardmax"))
    a = np.linspace(0.01, 0.3, 20)
    g = functools.partial(softmax_g, beta=1.0)
    r = timed("generic (softmax + label noise 1e-2), T = 2, 20 points, n_omega = 1024, n_zeta = 4096, n_m = 12",
              lambda: aim.generic_state_evolution(jax.random.key(0), a, 0.5, g, label_noise=1e-2,
                                                  n_omega=1024, n_zeta=4096, n_m=12))
    print("   max mmse_std:", float(np.max(r.mmse_std)), " min ESS:", r.min_ess)


if __name__ == "__main__":
    main()
