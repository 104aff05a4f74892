"""High-precision reference values of the denoising MMSE (checks aim_tutorial.rmt).

Needs only mpmath (``pip install mpmath``); independent of the package's code:
the cubic of eq. (eq-rmt-cubic) and the quartic of the support edges are solved
with ``mpmath.polyroots`` at 40 digits, and ``int mu^3`` is integrated with
tanh-sinh quadrature (``mpmath.quad``), which handles the square-root edges.

    python scripts/rmt_reference.py            # prints delta, rho, mmse (20 digits)
"""

import itertools

import mpmath as mp

mp.mp.dps = 40

POINTS = [
    (0.01, 0.5), (0.1, 0.5), (0.6, 0.5), (1.0, 0.5), (10.0, 0.5),
    (0.01, 1.0), (0.1, 1.0), (0.6, 1.0), (1.0, 1.0), (10.0, 1.0),
    (1e-4, 0.5), (1e-3, 1.0), (100.0, 0.2), (0.05, 0.1), (0.3, 4.0), (2.0, 0.01),
]


def density(x, delta, s):
    # (delta/s) G^3 - (x/s + delta) G^2 + (x + 1/s - s) G - 1 = 0
    r = mp.polyroots([delta / s, -(x / s + delta), x + 1 / s - s, -1], maxsteps=200, extraprec=80)
    return max(abs(mp.im(g)) for g in r) / mp.pi


def edges(delta, s):
    # z'(G) = 0: delta G^4 - 2 delta s G^3 + (delta s^2 + s^2 - 1) G^2 + 2 s G - s^2 = 0
    q = mp.polyroots([delta, -2 * delta * s, delta * s * s + s * s - 1, 2 * s, -s * s], maxsteps=200, extraprec=80)
    g = sorted(mp.re(v) for v in q if abs(mp.im(v)) < mp.mpf(10) ** -25)
    z = [1 / v + s / (1 - v / s) + delta * v for v in g]
    zp = lambda v: -1 / v**2 + s**2 / (s - v) ** 2 + delta
    g1 = max(v for v in g if v < 0)
    g2 = min(v for v in g if 0 < v < s)
    a, b = 1 / g1 + s / (1 - g1 / s) + delta * g1, 1 / g2 + s / (1 - g2 / s) + delta * g2
    gaps = []
    others = [v for v in g if v not in (g1, g2)]
    for lo, hi in itertools.pairwise(others):
        if not (lo < 0 < hi or lo < s < hi) and zp((lo + hi) / 2) < 0:
            za, zb = [1 / v + s / (1 - v / s) + delta * v for v in (hi, lo)]
            if a < za < zb < b:
                gaps.append((za, zb))
    pts = [a]
    for za, zb in sorted(gaps):
        pts += [za, zb]
    pts.append(b)
    del z
    return [(pts[2 * i], pts[2 * i + 1]) for i in range(len(pts) // 2)]


def mmse(delta, rho):
    delta, rho = mp.mpf(delta), mp.mpf(rho)
    s = mp.sqrt(rho)
    total = 0
    for a, b in edges(delta, s):
        # split each interval to help tanh-sinh with interior peaks (rho ~ 1, small delta)
        w = b - a
        cuts = [a] + [a + w * f for f in (mp.mpf(10) ** -6, mp.mpf(10) ** -4, mp.mpf(10) ** -2, mp.mpf(1) / 2)] + [b]
        total += mp.quad(lambda x: density(x, delta, s) ** 3, cuts)
    return delta - 4 * mp.pi**2 / 3 * delta**2 * total


if __name__ == "__main__":
    for dl, rh in POINTS:
        print(f"{dl!r:>8} {rh!r:>5} {mp.nstr(mmse(dl, rh), 20)}", flush=True)
