"""Draw the README figure: the Bayes-optimal error of the softmax AIM (T = 2) against alpha.

Usage: python scripts/readme_figure.py [--out docs/bayes_optimal_error.png]
"""

import argparse

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import aim_tutorial as aim  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="docs/bayes_optimal_error.png")
    args = parser.parse_args()
    aim.plotting.use_style()
    fig, ax = plt.subplots(figsize=(6, 3.6))
    alphas = np.linspace(1e-4, 0.3, 300)
    for rho in (0.1, 0.25, 0.5, 1.0, 2.0):
        res = aim.solve_state_evolution(alphas, rho, T=2, channel="softmax")
        assert np.all(res.converged)
        ax.plot(alphas, res.mmse, label=f"$\\rho = {rho}$")
        ax.plot([aim.alpha_perfect_recovery(rho, 2)], [0], "k|", ms=10)
    ax.plot(alphas, np.clip(1 - 4 * alphas, 0, None), "k--", lw=1, label="$\\rho\\to\\infty$")
    ax.set_xlabel("sample complexity $\\alpha = n/d^2$")
    ax.set_ylabel("Bayes-optimal error (mmse)")
    ax.legend(ncol=2)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
