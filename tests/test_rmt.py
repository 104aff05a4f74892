"""Tests of aim_tutorial.rmt: free convolution, support, RIE and the denoising MMSE."""

import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate

import aim_tutorial as aim
from aim_tutorial import _rmt_support, rmt

# Spec section 2 (values rounded to 5 decimals: tolerance 5e-6 plus rounding slack).
REFERENCE = {
    0.5: {0.01: 0.00742, 0.1: 0.06654, 0.6: 0.28390, 1.0: 0.39695, 10.0: 0.89393},
    1.0: {0.01: 0.00948, 0.1: 0.08055, 0.6: 0.32532, 1.0: 0.44387, 10.0: 0.90189},
}

# 20-digit values from scripts/rmt_reference.py (mpmath, 40 digits, tanh-sinh):
# an independent implementation of the same formula.
HIGH_PRECISION = {
    (0.01, 0.5): 0.0074227277004130854308,
    (0.1, 0.5): 0.066541493202608414475,
    (0.6, 0.5): 0.28390214130308217661,
    (1.0, 0.5): 0.39694863594503922294,
    (10.0, 0.5): 0.89392768966658171511,
}


def _moment(delta, rho, k):
    """int x^k mu(x) dx by scipy quadrature over each support interval."""
    total = 0.0
    for a, b in aim.support_edges(delta, rho):
        val, _ = integrate.quad(lambda x: x**k * aim.spectral_density(x, delta, rho), a, b, limit=400,
                                epsabs=1e-13, epsrel=1e-12)
        total += val
    return total


@pytest.mark.parametrize("rho", [0.5, 1.0])
def test_reference_values(rho):
    deltas = np.array(sorted(REFERENCE[rho]))
    got = aim.mmse_denoising(deltas, rho)
    want = np.array([REFERENCE[rho][d] for d in deltas])
    np.testing.assert_allclose(got, want, atol=5.1e-6, rtol=0)


def test_high_precision_reference():
    # the package's quadrature targets relative accuracy 1e-12; 1e-10 leaves margin
    for (delta, rho), want in HIGH_PRECISION.items():
        assert abs(aim.mmse_denoising(delta, rho) - want) < 1e-10, (delta, rho)


def test_support_edges_examples():
    two = aim.support_edges(0.01, 0.5)
    assert len(two) == 2
    np.testing.assert_allclose(np.array(two), [[-0.147, 0.132], [0.147, 4.125]], atol=1e-3)
    one = aim.support_edges(0.05, 0.5)
    np.testing.assert_allclose(np.array(one), [[-0.341, 4.142]], atol=1e-3)
    # rho >= 1: always one interval; small delta, rho = 1: starts at about -2 sqrt(delta)^... < 0
    assert len(aim.support_edges(1e-3, 2.0)) == 1


def test_density_vanishes_outside_support_and_positive_inside():
    for delta, rho in [(0.01, 0.5), (0.05, 0.5), (0.3, 2.0)]:
        edges = aim.support_edges(delta, rho)
        for a, b in edges:
            inner = np.linspace(a, b, 203)[1:-1]
            assert np.all(aim.spectral_density(inner, delta, rho) > 0)
        lo, hi = edges[0][0], edges[-1][1]
        outside = np.concatenate([np.linspace(lo - 1, lo - 1e-6, 50), np.linspace(hi + 1e-6, hi + 1, 50)])
        if len(edges) == 2:
            outside = np.concatenate([outside, np.linspace(edges[0][1] + 1e-7, edges[1][0] - 1e-7, 20)])
        assert np.all(aim.spectral_density(outside, delta, rho) == 0)


@pytest.mark.parametrize("delta,rho", [(0.01, 0.5), (0.05, 0.5), (0.7, 0.3), (0.2, 1.0), (2.0, 3.0)])
def test_density_moments(delta, rho):
    # free convolution adds means and variances: mean sqrt(rho), second moment 1 + rho + delta
    assert abs(aim.spectral_integral(delta, rho, power=1) - 1) < 1e-11
    assert abs(_moment(delta, rho, 1) - np.sqrt(rho)) < 1e-8
    assert abs(_moment(delta, rho, 2) - (1 + rho + delta)) < 1e-8


def test_density_limits():
    # delta -> 0: the law of S (Marchenko-Pastur) away from its edges; rho -> inf: a semicircle
    law = aim.marchenko_pastur_density(np.linspace(0.5, 3.0, 11), 0.5)
    dens = aim.spectral_density(np.linspace(0.5, 3.0, 11), 1e-6, 0.5)
    np.testing.assert_allclose(dens, law.density, rtol=2e-3)
    assert law.atom == 0.5
    rho, delta = 1e6, 0.5
    x = np.linspace(-1.5, 1.5, 7)
    np.testing.assert_allclose(aim.spectral_density(np.sqrt(rho) + x, delta, rho),
                               aim.semicircle_density(x, 1 + delta), atol=2e-3)


@pytest.mark.slow
def test_stieltjes_against_quadrature():
    delta, rho = 0.05, 0.5
    for z in [1 + 0.1j, 0.1 + 0.01j, -0.3 + 0.5j, 2 - 0.2j, 0.14 + 1e-3j, 10 + 0j + 1e-9j]:
        ref = 0
        for a, b in aim.support_edges(delta, rho):
            def f(t, part, z=z):
                return part(aim.spectral_density(t, delta, rho) / (z - t))

            ref += integrate.quad(f, a, b, args=(np.real,), limit=400)[0]
            ref += 1j * integrate.quad(f, a, b, args=(np.imag,), limit=400)[0]
        assert abs(aim.stieltjes(z, delta, rho) - ref) < 1e-9, z
    # far away G ~ 1/z + sqrt(rho)/z^2
    z = 1e3 + 1j
    assert abs(aim.stieltjes(z, delta, rho) - (1 / z + np.sqrt(rho) / z**2)) < 1e-8


@pytest.mark.slow
def test_hilbert_transform_against_principal_value():
    delta, rho = 0.3, 0.5
    (a, b), = aim.support_edges(delta, rho)
    for x in [a - 0.5, 0.1, 1.0, 2.5, b + 0.2]:
        if a < x < b:
            pv = integrate.quad(lambda t: aim.spectral_density(t, delta, rho), a, b, weight="cauchy",
                                wvar=x, limit=400)[0]
            ref = -pv  # quad's cauchy weight is 1/(t - x)
        else:
            ref = integrate.quad(lambda t, x=x: aim.spectral_density(t, delta, rho) / (x - t), a, b, limit=400)[0]
        assert abs(aim.hilbert_transform(x, delta, rho) - ref) < 1e-8, x
    # real part of the boundary value, and Im G = pi mu
    G = aim.stieltjes(np.array([0.5, 1.5]), delta, rho)
    np.testing.assert_allclose(G.imag / np.pi, aim.spectral_density(np.array([0.5, 1.5]), delta, rho))


def test_two_formulas_agree():
    # delta - (4 pi^2/3) delta^2 int mu^3  ==  1 - int mu (xi - sqrt(rho))^2  (Pythagoras for the posterior mean)
    for rho in (0.2, 1.0, 3.0):
        for delta in (0.3, 1.0, 1.5, 4.0):
            direct = delta - 4 * np.pi**2 / 3 * delta**2 * aim.spectral_integral(delta, rho, power=3)
            owner, A, B, D, S = rmt._support_items(np.array([delta]), np.array([rho]))
            xi2 = rmt._integrate_items(A, B, D, S, "xi2", owner=owner)[0].sum()
            assert abs(direct - (1 - xi2)) < 1e-10, (delta, rho)


def test_mmse_limits():
    # small delta: slope 2 rho - rho^2 (rho <= 1), 1 (rho >= 1); the correction is O(delta)
    for rho, slope in [(0.2, 0.36), (0.5, 0.75), (2.0, 1.0)]:
        assert abs(aim.mmse_denoising(1e-6, rho) / 1e-6 - slope) < 1e-5
    # rho = 1: correction O(delta^(2/3))
    assert abs(aim.mmse_denoising(1e-8, 1.0) / 1e-8 - 1) < 1e-4
    # large delta: 1 - 1/delta - (1/rho - 1)/delta^2 + O(delta^-3) (the second term observed
    # numerically); the
    # xi-form of the formula keeps full accuracy up to delta = 1e12
    for rho in (0.1, 1.0, 5.0, 100.0):
        for delta in (1e3, 1e5, 1e8, 1e12):
            got = (1 - aim.mmse_denoising(delta, rho)) * delta - 1
            assert abs(got - (1 / rho - 1) / delta) < 30 * (1 + 1 / rho) / delta**2 + 1e-13 * delta, (rho, delta)
    # rho -> inf: delta/(1 + delta), gap O(1/rho)
    for delta in (0.1, 0.5, 2.0):
        assert abs(aim.mmse_denoising(delta, 1e4) - delta / (1 + delta)) < 1e-5
    # rho -> 0 at t = rho delta fixed: t(2 - t) below 1, 1 above; gap O(rho)
    for t in (0.25, 0.5, 2.0):
        want = t * (2 - t) if t < 1 else 1.0
        assert abs(aim.mmse_denoising(t / 1e-4, 1e-4) - want) < 1e-3


@pytest.mark.slow
def test_mmse_monotone_and_bounded():
    deltas = np.logspace(-6, 4, 120)
    for rho in (0.05, 0.5, 1.0, 4.0):
        m = aim.mmse_denoising(deltas, rho)
        assert np.all(np.diff(m) > 0)
        assert np.all(m < np.minimum(deltas, 1.0))  # better than Y itself and than sqrt(rho) I
        assert np.all(m <= deltas / (1 + deltas) + 1e-12)  # better than the best linear estimator


def test_mmse_vectorised_and_continuous_across_switches():
    deltas = np.array([0.02, 0.5, 1.0, 1.0 + 1e-9, 3.0])
    rhos = np.array([0.5, 1.0, 2.0])
    grid = aim.mmse_denoising(deltas[:, None], rhos[None, :])
    assert grid.shape == (5, 3)
    for i, d in enumerate(deltas):
        for j, r in enumerate(rhos):
            assert grid[i, j] == pytest.approx(aim.mmse_denoising(float(d), float(r)), abs=1e-14)
    # the two formulas meet at delta = 1; the small-delta switch at 1e-9
    assert abs(grid[3] - grid[2]).max() < 1e-8
    below, above = aim.mmse_denoising(np.array([0.999999e-9, 1.000001e-9]), 0.5)
    assert abs(below / above - 1) < 1e-4
    assert isinstance(aim.mmse_denoising(0.3, 0.5), float)


@pytest.mark.slow
def test_rie_monte_carlo(key):
    # error of the RIE at d = 300 against the formula: finite-size gap O(1/d), 0.02 leaves margin
    d, rho, delta = 300, 0.5, 0.5
    k1, k2 = jax.random.split(key)
    S = aim.sample_teacher(k1, d, rho)
    Y = S + np.sqrt(delta) * aim.sample_goe(k2, d)
    S_hat = aim.rie_denoise(Y, delta, rho)
    assert isinstance(S_hat, jax.Array) and S_hat.shape == (d, d)
    assert float(jnp.max(jnp.abs(S_hat - S_hat.T))) < 1e-12
    err = float(jnp.sum((S_hat - S) ** 2) / d)
    assert abs(err - aim.mmse_denoising(delta, rho)) < 0.02
    assert err < float(jnp.sum((Y - S) ** 2) / d) / 2
    # NumPy in, NumPy out; the same result
    S_np = aim.rie_denoise(np.asarray(Y), delta, rho)
    assert isinstance(S_np, np.ndarray)
    np.testing.assert_allclose(S_np, np.asarray(S_hat), atol=1e-12)


def test_rie_known_cases():
    # S = sqrt(rho) I + tiny: the RIE of a pure semicircle returns the centre
    d, delta = 5, 0.5
    lam = np.array([-0.3, 0.1, 0.7])
    xi = aim.rie_eigenvalues(lam + np.sqrt(1e8), delta, 1e8)
    # for rho -> inf the prior is sqrt(rho) I + GOE (variance 1): linear shrinkage lam/(1+delta)
    np.testing.assert_allclose(xi - np.sqrt(1e8), lam / (1 + delta), atol=1e-3)
    Y = np.diag(np.arange(d, dtype=float))
    out = aim.rie_denoise(Y, 0.1, 1.0)
    np.testing.assert_allclose(np.diag(out), aim.rie_eigenvalues(np.arange(d), 0.1, 1.0), atol=1e-12)


@pytest.mark.parametrize("f", [aim.mmse_denoising, lambda d, r: aim.spectral_integral(d, r, 1)],
                         ids=["mmse_denoising", "spectral_integral"])
def test_delta_and_rho_arrays_are_checked_entry_by_entry(f):
    # an entry 0 (or -0.0, or between -1 and 0) is refused, in delta and in rho alike
    for bad in ([0.1, 0.0], [0.1, -0.0], [0.1, -0.5]):
        with pytest.raises(ValueError, match=r"delta must have entries in \(0, inf\)"):
            f(np.array(bad), 0.5)
        with pytest.raises(ValueError, match=r"rho must have entries in \(0, inf\)"):
            f(0.1, np.array(bad))
    # an empty array is a valid batch of no settings
    assert np.shape(f(np.array([]), 0.5)) == (0,)
    # a Python int beyond float's exact range is a number like any other (not an object array)
    assert f(2**80, 0.5) == f(float(2**80), 0.5)
    assert f(0.1, 2**70) == f(0.1, float(2**70))  # (2**80 > RHO_MAX = 1e24)


def test_evaluation_points_accept_any_real_scalar():
    big = 2**80  # a Python int that NumPy would hold as an object array
    assert float(aim.semicircle_density(big, 1.0)) == 0.0
    assert aim.marchenko_pastur_density(big, 0.5).density == 0.0
    assert aim.spectral_density(big, 0.1, 0.5) == 0.0
    for f in (aim.semicircle_density, lambda x: aim.marchenko_pastur_density(x, 0.5)):
        for bad in (True, None, "1.0"):  # refused as what they are, with what x may be
            with pytest.raises(TypeError, match="x must be a finite real number or array, got"):
                f(bad)
        with pytest.raises(TypeError, match="x must be a real number, got the boolean"):
            f(np.array(True))


def test_invalid_arguments():
    Y = np.eye(3)
    with pytest.raises(ValueError, match="delta"):
        aim.mmse_denoising(0.0, 0.5)
    with pytest.raises(ValueError, match="delta"):
        aim.mmse_denoising(np.array([0.1, -1.0]), 0.5)
    with pytest.raises(ValueError, match="rho"):
        aim.mmse_denoising(0.1, -0.5)
    with pytest.raises(ValueError, match="delta"):
        aim.spectral_density([0.0], np.nan, 0.5)
    with pytest.raises(ValueError, match="rho"):
        aim.support_edges(0.1, 0.0)
    with pytest.raises(ValueError, match="delta"):
        aim.rie_denoise(Y, -0.1, 0.5)
    with pytest.raises(ValueError, match="symmetric"):
        aim.rie_denoise(np.array([[0.0, 1.0], [0.0, 0.0]]), 0.1, 0.5)
    with pytest.raises(ValueError, match="square"):
        aim.rie_denoise(np.ones((2, 3)), 0.1, 0.5)
    with pytest.raises(ValueError, match="rho"):
        aim.marchenko_pastur_density([1.0], 0.0)


def test_unconverged_quadrature_is_reported(monkeypatch):
    # one round of panels cannot reach rtol = 1e-12 on the narrow bump at small delta
    original = rmt._integrate_items

    def one_round(*args, **kwargs):
        return original(*args, **{**kwargs, "max_rounds": 1})

    monkeypatch.setattr(rmt, "_integrate_items", one_round)
    with pytest.warns(RuntimeWarning, match="did not reach its tolerance"):
        aim.mmse_denoising(1e-3, 1.0)


# ---------------------------------------------------------------------------
# issue 17: large noise, extremes, validation


def _rie_error(seed, d, delta, rho):
    k1, k2 = jax.random.split(jax.random.key(seed))
    S = np.asarray(aim.sample_teacher(k1, d, rho))
    Y = S + np.sqrt(delta) * np.asarray(aim.sample_goe(k2, d))
    return float(np.sum((aim.rie_denoise(Y, delta, rho) - S) ** 2) / d)


def test_rie_large_noise_regression():
    # d = 40, delta = 1e6 (and 1e10) gave an error of 1381 (1.4e7) against an MMSE of 1: the
    # eigenvalues outside the limiting support were "cleaned" by lambda - 2 delta h(lambda). Over
    # 8 seeds the error is 0.96 +- 0.07 at d = 40 (the finite-size spread of ||S - E S||^2/d).
    for delta in (1e6, 1e10):
        err = _rie_error(0, 40, delta, 0.5)
        assert abs(err - aim.mmse_denoising(delta, 0.5)) < 0.3, (delta, err)


def test_rie_outside_support_goes_to_edge_value():
    rho, delta = 0.5, 1e6
    (a, b), = aim.support_edges(delta, rho)
    s = np.sqrt(rho)
    g_a, g_b = (aim.stieltjes(np.array([a, b]), delta, rho)).real
    xi_a, xi_b = aim.rie_eigenvalues(np.array([a, b]), delta, rho)
    # the edge values a - 2 delta g_c, with g_c = G(a) the critical point of the inverse function
    # (exact): about sqrt(rho) -+ 2/sqrt(1 + delta) (the semicircle), up to O(1/(sqrt(rho) delta))
    assert abs(xi_a - (s - 2 / np.sqrt(1 + delta))) < 1e-5 and abs(xi_b - (s + 2 / np.sqrt(1 + delta))) < 1e-5
    # G from the cubic at the edge is accurate to ~sqrt(eps) only: 2 delta times that
    assert abs(xi_b - (b - 2 * delta * g_b)) < 1e-3 and abs(xi_a - (a - 2 * delta * g_a)) < 1e-3
    out = aim.rie_eigenvalues(np.array([a - 100.0, a * (1 + 1e-3), b * (1 + 1e-3), b + 1e5, 1e300]), delta, rho)
    np.testing.assert_array_equal(out, [xi_a, xi_a, xi_b, xi_b, xi_b])
    # just inside: continuous with the edge value
    inner = aim.rie_eigenvalues(np.array([a + 1e-6 * (b - a), b - 1e-6 * (b - a)]), delta, rho)
    assert xi_a <= inner[0] < xi_a + 1e-5 and xi_b - 1e-5 < inner[1] <= xi_b
    # a gap between two support intervals: the nearer edge
    (a1, b1), (a2, b2) = aim.support_edges(0.01, 0.5)
    xi = aim.rie_eigenvalues(np.array([b1, b1 + 0.1 * (a2 - b1), a2 - 0.1 * (a2 - b1), a2]), 0.01, 0.5)
    assert xi[0] == xi[1] and xi[2] == xi[3] and xi[1] < xi[2]


@pytest.mark.parametrize("delta,rho", [(0.01, 0.5), (0.3, 0.5), (1.0, 2.0), (1e6, 0.5), (1e12, 3.0), (1e17, 0.5)])
def test_rie_continuous_and_monotone_across_edges(delta, rho):
    edges = aim.support_edges(delta, rho)
    for a, b in edges:
        for e in (a, b):
            x = e + (b - a) * np.array([-1e-4, -1e-6, -1e-9, 0.0, 1e-9, 1e-6, 1e-4])
            xi = aim.rie_eigenvalues(x, delta, rho)
            # lambda - 2 delta h(lambda) cancels: its rounding is ~1e-16 |lambda|, and the roots of
            # the cubic are accurate to ~sqrt(eps) at an edge (a double root): 1e-8 |lambda|
            assert np.all(np.diff(xi) >= -1e-8 * (1 + np.abs(x[:-1]))), (e, xi)
            # continuity: the jump over 1e-9 of the width is O(sqrt(1e-9)) of the cleaned range
            scale = 2 * np.sqrt(1e-9) * (1 + (b - a) / (1 + delta))
            assert np.max(np.abs(np.diff(xi[2:5]))) < scale, (e, xi)
    lo, hi = edges[0][0], edges[-1][1]
    x = np.linspace(lo - 0.5 * (hi - lo), hi + 0.5 * (hi - lo), 2001)
    xi = aim.rie_eigenvalues(x, delta, rho)
    tol = 1e-8 * (1 + np.abs(x[:-1])) + 1e-14 * np.max(np.abs(x))
    assert np.all(np.isfinite(xi)) and np.all(np.diff(xi) >= -tol)


def test_rie_unchanged_inside_support():
    # inside the support the cleaned value is lambda - 2 delta h(lambda) to the last bit
    for delta, rho in [(0.05, 0.5), (0.3, 1.0), (1.0, 4.0)]:
        (a, b), = aim.support_edges(delta, rho)[-1:]
        lam = np.linspace(a, b, 101)[1:-1]
        np.testing.assert_array_equal(aim.rie_eigenvalues(lam, delta, rho),
                                      lam - 2 * delta * aim.hilbert_transform(lam, delta, rho))


def test_rie_continuation_is_the_edge_rule_on_the_support():
    """The two outside rules differ only off the support: on it both are lambda - 2 delta h(lambda),
    to the last bit (the continuation through _rie_bulk, the edge rule through its own Stieltjes
    transform); off it the continuation is the formula continued, not the edge's value."""
    for delta, rho in [(0.05, 0.5), (0.3, 1.0), (1.0, 4.0), (3.0, 0.25)]:
        edges = aim.support_edges(delta, rho)
        lam = np.concatenate([np.linspace(a, b, 41)[1:-1] for a, b in edges])
        np.testing.assert_array_equal(aim.rie_eigenvalues(lam, delta, rho, outside="continuation"),
                                      aim.rie_eigenvalues(lam, delta, rho, outside="edge"))
        far = np.array([edges[0][0] - 1.0, edges[-1][1] + 1.0])
        cont = aim.rie_eigenvalues(far, delta, rho, outside="continuation")
        np.testing.assert_allclose(cont, far - 2 * delta * aim.hilbert_transform(far, delta, rho), rtol=1e-13)
        assert np.all(np.abs(cont - aim.rie_eigenvalues(far, delta, rho)) > 1e-6)


def _rel(a, b):
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b)) / np.maximum(np.abs(np.asarray(b)), 1e-300)))


@pytest.mark.parametrize("rho", [1e-6, 0.5, 1.0, 4.0, 1e6])
def test_asymptotic_branches_join(rho):
    s = np.sqrt(rho)
    # huge delta: the semicircle of variance 1 + delta against the cubic, on both sides of the switch
    sw = float(rmt._huge(s))
    lo, hi = sw * (1 - 1e-12), sw * (1 + 1e-12)
    r = np.sqrt(1 + sw)
    x = s + r * np.array([-2.5, -1.5, -0.3, 0.7, 1.9, 3.0])
    z = x + 1j * r * np.array([0.1, -0.2, 1.0, 0.01, -3.0, 0.5])
    assert _rel(aim.stieltjes(x, lo, rho), aim.stieltjes(x, hi, rho)) < 1e-8
    assert _rel(aim.stieltjes(z, lo, rho), aim.stieltjes(z, hi, rho)) < 1e-8
    assert _rel(aim.support_edges(lo, rho), aim.support_edges(hi, rho)) < 1e-8
    # the cleaned values: the cubic's lambda - 2 delta h(lambda) cancels to ~1e-16 |lambda| (absolute)
    xi_lo, xi_hi = aim.rie_eigenvalues(x, lo, rho), aim.rie_eigenvalues(x, hi, rho)
    assert np.max(np.abs(xi_lo - xi_hi)) < 1e-13 * np.max(np.abs(x)), (xi_lo, xi_hi)
    assert _rel(xi_lo[[0, -1]], xi_hi[[0, -1]]) < 1e-8  # outside: the edge values, no cancellation
    assert _rel(aim.spectral_integral(lo, rho), aim.spectral_integral(hi, rho)) < 1e-8
    # far field: the moment series against the cubic at _FAR spectral radii
    for delta in (1e-3, 1.0, 1e6):
        R = rmt._FAR * float(rmt._radius(delta, s))
        w = np.array([-R, R]) * (1 + np.array([[-1e-12], [1e-12]]))
        G = aim.hilbert_transform(s + w, delta, rho)
        assert _rel(G[0], G[1]) < 1e-8, delta
        zc = s + R * np.exp(1j * np.array([0.3, 2.0])) * np.array([[1 - 1e-12], [1 + 1e-12]])
        Gc = aim.stieltjes(zc, delta, rho)
        assert _rel(Gc[0], Gc[1]) < 1e-8, delta
    # small delta: the scaled and deflated cubic against the companion matrix, away from the edges
    lo, hi = rmt._DELTA_DEFLATE * (1 - 1e-12), rmt._DELTA_DEFLATE * (1 + 1e-12)
    edges = aim.support_edges(hi, rho)
    a, b = edges[-1]
    x = np.concatenate([a + (b - a) * np.array([0.1, 0.5, 0.9]), [a - 1.0, b + 1.0]])
    assert _rel(aim.stieltjes(x, lo, rho), aim.stieltjes(x, hi, rho)) < 1e-8
    assert _rel(aim.stieltjes(x + 0.1j, lo, rho), aim.stieltjes(x + 0.1j, hi, rho)) < 1e-8
    # tiny delta: the edges from the Newton polygon of the quartic against np.roots
    lo, hi = rmt._DELTA_TINY * (1 - 1e-12), rmt._DELTA_TINY * (1 + 1e-12)
    assert _rel(aim.support_edges(lo, rho), aim.support_edges(hi, rho)) < 1e-8
    # the MMSE: the large-delta expansion against the quadrature at its switch
    sw = float(rmt._large_delta_switch(rho))
    m = aim.mmse_denoising(np.array([sw * (1 - 1e-12), sw * (1 + 1e-12)]), rho)
    assert abs(m[0] - m[1]) < 1e-14


def test_extremes_are_finite():
    deltas = 10.0 ** np.array([-300, -200, -100, -40, -20, -10, 0, 10, 14, 40, 100, 200, 300])
    for rho in (1e-6, 0.5, 1.0, 1e6):
        m = aim.mmse_denoising(deltas, rho)
        assert np.all(np.isfinite(m)) and np.all(m >= 0) and np.all(m <= np.minimum(deltas, 1.0)), rho
        for delta in deltas:
            edges = aim.support_edges(delta, rho)
            flat = np.array(edges).ravel()
            assert np.all(np.isfinite(flat)) and np.all(np.diff(flat) > 0), (delta, rho, edges)
            x = np.array([-1e300, -1e10, flat[0], 0.0, np.sqrt(rho), flat[-1], 1e10, 1e300, 1.7e308])
            for f in (aim.spectral_density, aim.hilbert_transform, aim.rie_eigenvalues, aim.stieltjes):
                v = f(x, delta, rho)
                assert np.all(np.isfinite(v)), (f.__name__, delta, rho, v)
            assert np.all(aim.spectral_density(x, delta, rho) >= 0)
            G = aim.stieltjes(x + 1j * np.abs(x) + 1j, delta, rho)
            assert np.all(np.isfinite(G)) and np.all(G.imag <= 0), (delta, rho, G)
    assert aim.mmse_denoising(1e300, 0.5) == 1.0
    assert abs(aim.hilbert_transform(1e300, 1.0, 0.5) - 1e-300) < 1e-310


def test_tiny_delta_bump_and_mass():
    # rho < 1 at tiny delta: the zero eigenvalues form a semicircle of variance delta (1 - rho),
    # narrower than the rounding of x - sqrt(rho) below delta ~ 1e-30; its mass is kept
    for delta in (1e-25, 1e-100, 1e-300):
        (a0, b0), (a1, b1) = aim.support_edges(delta, 0.5)
        assert abs(b0 / (2 * np.sqrt(delta * 0.5)) - 1) < 1e-6 and abs(a0 / b0 + 1) < 1e-6
        assert abs(aim.spectral_integral(delta, 0.5, power=1) - 1) < 1e-9


def test_spectral_integral_huge_delta_is_semicircle():
    # int sc_v^3 = 8 * (3 pi / 16) / (2 pi)^3 / v = 3 / (4 pi^2 v)... checked against the quadrature
    for p in (1, 2, 3):
        got = aim.spectral_integral(1e20, 0.5, power=p)
        want = aim.spectral_integral(1e13, 0.5, power=p) * (1 + 1e13) ** ((p - 1) / 2) / (1 + 1e20) ** ((p - 1) / 2)
        assert abs(got / want - 1) < 1e-9, p


BAD_POSITIVE = [0.0, -1.0, float("nan"), float("inf"), -float("inf"), True, False, "1", None, 1 + 1j, [0.5]]
BAD_ARRAY = [None, "abc", [1.0, float("nan")], np.array([np.inf]), np.array([True, False]), [1.0, None],
             {"a": 1}]


def _call_table(key):
    Y = np.eye(3)
    return {
        "delta": [lambda v: aim.mmse_denoising(v, 0.5), lambda v: aim.spectral_density(0.0, v, 0.5),
                  lambda v: aim.stieltjes(1j, v, 0.5), lambda v: aim.hilbert_transform(1.0, v, 0.5),
                  lambda v: aim.support_edges(v, 0.5), lambda v: aim.rie_eigenvalues(1.0, v, 0.5),
                  lambda v: aim.rie_denoise(Y, v, 0.5), lambda v: aim.spectral_integral(v, 0.5),
                  lambda v: aim.semicircle_density(0.0, v)],
        "rho": [lambda v: aim.mmse_denoising(0.1, v), lambda v: aim.spectral_density(0.0, 0.1, v),
                lambda v: aim.stieltjes(1j, 0.1, v), lambda v: aim.hilbert_transform(1.0, 0.1, v),
                lambda v: aim.support_edges(0.1, v), lambda v: aim.rie_eigenvalues(1.0, 0.1, v),
                lambda v: aim.rie_denoise(Y, 0.1, v), lambda v: aim.spectral_integral(0.1, v),
                lambda v: aim.marchenko_pastur_density(0.0, v)],
    }


@pytest.mark.parametrize("name", ["delta", "rho"])
def test_invalid_scalars_name_the_argument(name, key):
    for f in _call_table(key)[name]:
        for bad in BAD_POSITIVE:
            if isinstance(bad, list) and f.__code__.co_names[-1] in ("mmse_denoising", "spectral_integral"):
                continue  # these two take arrays
            with pytest.raises((ValueError, TypeError), match=name):
                f(bad)


def test_invalid_arrays_name_the_argument(key):
    calls = {
        **POINT_CALLS,  # x, z, lam, Y (defined with the property tests below)
        "delta": [lambda v: aim.mmse_denoising(v, 0.5), lambda v: aim.spectral_integral(v, 0.5)],
        "rho": [lambda v: aim.mmse_denoising(0.1, v), lambda v: aim.spectral_integral(0.1, v)],
    }
    for name, fs in calls.items():
        for f in fs:
            for bad in BAD_ARRAY + [float("nan"), float("inf")]:
                with pytest.raises((ValueError, TypeError), match=name):
                    f(bad)
    for bad in ([1 + 1j], 2j):  # complex where a real is expected
        with pytest.raises(TypeError, match="x"):
            aim.spectral_density(bad, 0.1, 0.5)
    with pytest.raises(ValueError, match="z"):
        aim.stieltjes(np.array([1j, complex(np.nan, 1)]), 0.1, 0.5)
    with pytest.raises(ValueError, match="delta"):
        aim.mmse_denoising(np.array([0.1, -1.0]), 0.5)
    with pytest.raises(ValueError, match="delta.*rho"):
        aim.mmse_denoising(np.ones(2), np.ones(3))
    with pytest.raises(ValueError, match="Y"):
        aim.rie_denoise(np.array([[np.nan, 0.0], [0.0, 1.0]]), 0.1, 0.5)
    for bad in (0, -1.0, float("nan"), float("inf"), 1.0, True, "1e-6", None):
        with pytest.raises((ValueError, TypeError), match="rtol"):
            aim.spectral_integral(0.1, 0.5, rtol=bad)
    for bad in (0, -1, 1.5, True, "3", None, "xi2"):
        with pytest.raises((ValueError, TypeError), match="power"):
            aim.spectral_integral(0.1, 0.5, power=bad)
    for bad in (0, -3, 2.0, True, "3", None):
        with pytest.raises((ValueError, TypeError), match="d"):
            aim.sample_goe(key, bad)
    for bad in (None, 0, np.zeros(2)):
        with pytest.raises(TypeError, match="key"):
            aim.sample_goe(bad, 3)
    # empty arrays of points are valid
    assert aim.spectral_density(np.zeros(0), 0.1, 0.5).shape == (0,)
    assert aim.rie_eigenvalues(np.zeros((0, 2)), 0.1, 0.5).shape == (0, 2)


# ---------------------------------------------------------------------------
# property tests (Hypothesis): valid inputs over many decades give finite results with the
# documented invariants; invalid ones a ValueError/TypeError naming the argument

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

DELTAS = st.floats(-300, 300).map(lambda e: 10.0**e)
RHOS = st.floats(-6, 6).map(lambda e: 10.0**e)
REALS = st.floats(allow_nan=False, allow_infinity=False)
FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(x=st.lists(REALS, min_size=1, max_size=6), delta=DELTAS, rho=RHOS)
def test_property_pointwise_functions_finite(x, delta, rho):
    x = np.array(x)
    dens = aim.spectral_density(x, delta, rho)
    assert np.all(np.isfinite(dens)) and np.all(dens >= 0)
    assert np.all(np.isfinite(aim.hilbert_transform(x, delta, rho)))
    G = aim.stieltjes(x, delta, rho)
    assert np.all(np.isfinite(G)) and np.all(G.imag >= 0)  # G(x - i0): Im G = pi mu >= 0
    mp = aim.marchenko_pastur_density(x, rho)
    assert np.all(np.isfinite(mp.density)) and np.all(mp.density >= 0) and 0 <= mp.atom < 1
    sc = aim.semicircle_density(x, delta)
    assert np.all(np.isfinite(sc)) and np.all(sc >= 0)


@FAST
@given(re=REALS, im=REALS.filter(lambda v: v != 0), delta=DELTAS, rho=RHOS)
def test_property_stieltjes_off_axis(re, im, delta, rho):
    G = aim.stieltjes(complex(re, im), delta, rho)
    assert np.isfinite(G) and G.imag * im <= 0  # Im G Im z < 0 (or an underflow to 0)
    assert abs(G) <= 1 / abs(im) * (1 + 1e-9)  # |G(z)| <= 1 / |Im z|


@FAST
@given(delta=DELTAS, rho=RHOS)
def test_property_support_edges_sorted(delta, rho):
    edges = aim.support_edges(delta, rho)
    flat = np.array(edges).ravel()
    assert 1 <= len(edges) <= 2 and np.all(np.isfinite(flat)) and np.all(np.diff(flat) > 0)
    # the mean sqrt(rho) lies in the convex hull of the support
    assert flat[0] <= np.sqrt(rho) <= flat[-1]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(delta=DELTAS, rho=RHOS)
def test_property_mmse_bounds(delta, rho):
    # 0 <= mmse <= min(delta, 1): Y is an estimator with error delta, E S = sqrt(rho) I one with
    # error E||S - E S||^2/d = (1 + rho) - rho = 1
    m = aim.mmse_denoising(delta, rho)
    assert np.isfinite(m) and 0 <= m <= min(delta, 1.0) * (1 + 1e-12)


@FAST
@given(u=st.lists(st.floats(-1.5, 1.5), min_size=2, max_size=12), far=st.lists(REALS, max_size=3),
       delta=DELTAS, rho=RHOS)
def test_property_rie_finite_and_monotone(u, far, delta, rho):
    # points spread over the support and beyond (u in units of its width), and anywhere on the line
    edges = aim.support_edges(delta, rho)
    lo, hi = edges[0][0], edges[-1][1]
    lam = np.sort(np.concatenate([lo + (np.array(u) + 0.25) * (hi - lo) * 2 / 1.5, far]))
    xi = aim.rie_eigenvalues(lam, delta, rho)
    assert np.all(np.isfinite(xi))
    tol = 1e-8 * (1 + np.abs(lam[:-1])) + 1e-13 * (hi - lo + np.abs(lo))
    assert np.all(np.diff(xi) >= -tol), (lam, xi)
    # the cleaned values stay within the cleaned values of the extreme edges
    ends = aim.rie_eigenvalues(np.array([lo, hi]), delta, rho)
    assert np.all(xi >= ends[0] - tol.max()) and np.all(xi <= ends[1] + tol.max())


BAD_SCALAR = st.sampled_from([0.0, -1.0, -1e-300, float("nan"), float("inf"), -float("inf"), True, False,
                              "0.5", None, 1 + 2j, b"1"])
BAD_POINTS = st.sampled_from([float("nan"), float("inf"), None, "x", [1.0, float("nan")], [[np.inf]], True,
                              np.array([True]), [1.0, None], {1: 2}])
SCALAR_CALLS = {
    "delta": [lambda v: aim.mmse_denoising(v, 0.5), lambda v: aim.spectral_density([0.0], v, 0.5),
              lambda v: aim.stieltjes(1j, v, 0.5), lambda v: aim.hilbert_transform(1.0, v, 0.5),
              lambda v: aim.support_edges(v, 0.5), lambda v: aim.rie_eigenvalues(1.0, v, 0.5),
              lambda v: aim.rie_denoise(np.eye(2), v, 0.5), lambda v: aim.spectral_integral(v, 0.5),
              lambda v: aim.semicircle_density(0.0, v)],
    "rho": [lambda v: aim.mmse_denoising(0.1, v), lambda v: aim.spectral_density([0.0], 0.1, v),
            lambda v: aim.stieltjes(1j, 0.1, v), lambda v: aim.hilbert_transform(1.0, 0.1, v),
            lambda v: aim.support_edges(0.1, v), lambda v: aim.rie_eigenvalues(1.0, 0.1, v),
            lambda v: aim.rie_denoise(np.eye(2), 0.1, v), lambda v: aim.spectral_integral(0.1, v),
            lambda v: aim.marchenko_pastur_density(0.0, v)],
}
POINT_CALLS = {
    "x": [lambda v: aim.spectral_density(v, 0.1, 0.5), lambda v: aim.hilbert_transform(v, 0.1, 0.5),
          lambda v: aim.marchenko_pastur_density(v, 0.5), lambda v: aim.semicircle_density(v, 1.0)],
    "z": [lambda v: aim.stieltjes(v, 0.1, 0.5)],
    "lam": [lambda v: aim.rie_eigenvalues(v, 0.1, 0.5)],
    "Y": [lambda v: aim.rie_denoise(v, 0.1, 0.5)],
}


@settings(max_examples=30, deadline=None)
@given(name=st.sampled_from(sorted(SCALAR_CALLS)), k=st.integers(0, 8), bad=BAD_SCALAR)
def test_property_invalid_scalars(name, k, bad):
    with pytest.raises((ValueError, TypeError), match=name):
        SCALAR_CALLS[name][k](bad)


@settings(max_examples=30, deadline=None)
@given(name=st.sampled_from(sorted(POINT_CALLS)), k=st.integers(0, 3), bad=BAD_POINTS)
def test_property_invalid_points(name, k, bad):
    fs = POINT_CALLS[name]
    with pytest.raises((ValueError, TypeError), match=name):
        fs[k % len(fs)](bad)


# --------------------------------------------------------------------------- found by mutation testing


@pytest.mark.parametrize("delta", [0.1, 1.0, 10.0])
@pytest.mark.parametrize("rho", [0.3, 0.5, 2.0])
def test_far_field_series_agrees_with_the_cubic(delta, rho):
    """The moment series of G far from the support (used beyond 1e4 times its radius) against
    the root of the cubic, where both hold: at 30 radii the series' truncation is measured at
    4e-10 (bound (radius/|w|)^5 = 4e-8); a wrong c3 or c4 moves it by 1e-8 or more."""
    from aim_tutorial import rmt

    s = np.sqrt(rho)
    w = np.array([30.0, -30.0, 100.0]) * rmt._radius(delta, s)
    series, exact = rmt._G_series(w, delta, s), rmt._G_real_axis_exact(w, delta, s)
    np.testing.assert_allclose(series, exact, rtol=2e-9)


@pytest.mark.parametrize("rho", [0.2, 0.5, 1.0, 2.0])
def test_large_delta_expansion_joins_the_quadrature(rho):
    """Just below the switch the MMSE is the quadrature, just above it the expansion: they agree
    to rounding (measured 3e-16 to 2e-15), so a wrong 1/(rho delta^2) term (1e-12) shows."""
    from aim_tutorial import rmt

    sw = float(rmt._large_delta_switch(rho))
    below, above = rmt.mmse_denoising(sw * (1 - 1e-9), rho), rmt.mmse_denoising(sw * (1 + 1e-9), rho)
    assert abs(above - below) < 1e-14


@pytest.mark.parametrize("delta, rho", [(0.05, 0.3), (0.5, 0.5), (2.0, 2.0)])
def test_stieltjes_off_the_axis_is_the_integral_of_the_density(delta, rho):
    """G(z) at complex z (the root chosen by subordination) against int mu(x) / (z - x) dx by
    adaptive quadrature over the support: agreement measured to 1e-11, tolerance 1e-9."""
    z = np.array([1.0 + 0.5j, -0.3 + 0.2j, 3.0 - 1.0j, 0.8 + 0.05j])
    G = aim.stieltjes(z, delta, rho)
    for zk, Gk in zip(z, G):
        total = 0j
        for a, b in aim.support_edges(delta, rho):
            def part(x, f):
                return f(aim.spectral_density(np.array([x]), delta, rho)[0] / (zk - x))
            total += integrate.quad(part, a, b, args=(np.real,), limit=400, epsabs=1e-13)[0]
            total += 1j * integrate.quad(part, a, b, args=(np.imag,), limit=400, epsabs=1e-13)[0]
        assert abs(Gk - total) < 1e-9, (zk, Gk, total)


def test_sample_goe_variances_and_memory(key, monkeypatch):
    """Z = (A + A^T)/sqrt(2d): off-diagonal variance 1/d, diagonal 2/d (d = 400: 79800 and 400
    entries, within 4 standard errors); d = 1 is valid; the memory guard counts 2 d^2 entries."""
    d = 400
    Z = np.asarray(aim.sample_goe(key, d))
    off = Z[np.triu_indices(d, 1)]
    assert abs(off.var() * d - 1) < 4 * np.sqrt(2 / off.size)
    assert abs(np.diag(Z).var() * d / 2 - 1) < 4 * np.sqrt(2 / d)
    np.testing.assert_array_equal(Z, Z.T)
    assert aim.sample_goe(key, 1).shape == (1, 1)
    monkeypatch.setenv("AIM_MAX_BYTES", str(8 * 2 * 10 * 10))
    assert aim.sample_goe(key, 10).shape == (10, 10)
    with pytest.raises(ValueError, match="sample_goe"):
        aim.sample_goe(key, 11)


def test_densities_at_small_scale_and_at_zero():
    """The semicircle of a small variance (delta = 0.01: height 1/(pi sqrt(delta)) at 0, radius 0.2)
    against its formula, and 0 outside; Marchenko-Pastur at rho = 1, whose support starts at x = 0,
    is 0 (not 0/0) there and matches its formula inside."""
    delta = 0.01
    x = np.array([-0.3, -0.2, -0.1, 0.0, 0.05, 0.19, 0.2, 0.25])
    ref = np.where(np.abs(x) < 0.2, np.sqrt(np.clip(4 * delta - x**2, 0, None)) / (2 * np.pi * delta), 0.0)
    np.testing.assert_allclose(aim.semicircle_density(x, delta), ref, rtol=1e-14, atol=1e-300)
    assert float(aim.semicircle_density(0.0, delta)) == pytest.approx(1 / (np.pi * np.sqrt(delta)), rel=1e-14, abs=0)
    law = aim.marchenko_pastur_density(np.array([0.0, 1.0, 2.0, 4.0, 5.0]), 1.0)
    np.testing.assert_allclose(law.density, [0.0, np.sqrt(3) / (2 * np.pi), 1 / (2 * np.pi), 0.0, 0.0],
                               rtol=1e-14, atol=1e-300)
    assert law.atom == 0.0


def test_scalars_in_python_floats_out():
    """A scalar argument gives a Python float (a complex for stieltjes), an array argument an
    array of its shape: the documented return types."""
    for f in (lambda x: aim.hilbert_transform(x, 0.1, 0.5), lambda x: aim.spectral_density(x, 0.1, 0.5),
              lambda x: aim.rie_eigenvalues(x, 0.1, 0.5)):
        assert type(f(1.0)) is float
        assert np.shape(f(np.array([1.0, 2.0]))) == (2,)
    assert type(aim.stieltjes(1.0 + 0.5j, 0.1, 0.5)) is complex
    assert type(aim.spectral_integral(0.1, 0.5)) is float
    assert np.shape(aim.spectral_integral(np.array([0.1, 0.2]), 0.5)) == (2,)


# ----------------------------------------------------------------------------------------------
# the roots against mpmath (60 digits, 3000 bits of extra precision for roots 1e300 apart): the
# companion matrix with Newton steps, below delta = 1e-6 the scaled and deflated cubic, below 1e-20
# the Newton polygon of the quartic. Measured: 6e-16 relative for every root away from the edges.
# ----------------------------------------------------------------------------------------------

try:
    import mpmath
except ImportError:  # pragma: no cover - pinned in requirements.txt
    mpmath = None
needs_mpmath = pytest.mark.skipif(mpmath is None, reason="mpmath (requirements.txt) is not installed")
_DELTAS_ALL = [1e-300, 1e-100, 1e-40, 1e-22, 3e-21, 1e-19, 1e-12, 1e-6, 0.3, 5.0, 1e4]


def _mp_roots(coeffs):
    with mpmath.workdps(60):
        return [complex(r) for r in mpmath.polyroots([mpmath.mpmathify(c) for c in coeffs], maxsteps=3000,
                                                     extraprec=3000)]


@needs_mpmath
@pytest.mark.parametrize("delta", _DELTAS_ALL)
def test_cubic_roots_match_high_precision(delta):
    """Every root of the cubic, at real and complex w off the edges, to 1e-14 relative."""
    worst = 0.0
    for rho in (0.25, 0.5, 1.0, 2.0):
        s = np.sqrt(rho)
        for w in (-3.0, -1.0, -s + 1e-3, -0.2, 0.5, 1.5, 4.7, 1e3, 2.0 + 0.5j, -1.0 + 1e-3j, 0.3 - 2j):
            r = rmt._cubic_roots(np.array([w]), delta, s)[0]
            ref = _mp_roots([delta, -(s + w + delta * s), w * s + 1, -s])
            for x in ref:
                worst = max(worst, np.min(np.abs(r - x)) / abs(x))
            # and no root twice (each root of the reference has its own)
            assert len({int(np.argmin(np.abs(r - x))) for x in ref}) == 3
    assert worst <= 1e-14, worst


@needs_mpmath
def test_cubic_roots_newton_polish_on_a_grid():
    """The two Newton steps after the companion matrix, on lines of w just above the real axis and
    on it, where the eigenvalues alone are off by up to 3e-13 relative (rho = 0.1, delta = 10):
    every root within 1e-14 of mpmath's (measured: at most 3e-15, a few ulps)."""
    worst = 0.0
    for delta in (0.01, 1.0, 10.0):
        for rho in (0.1, 0.5):
            s = np.sqrt(rho)
            w = np.concatenate([np.linspace(-3.0, 6.0, 25) + 1e-3j, np.linspace(-3.0, 6.0, 25) + 0j])
            r = rmt._cubic_roots(w, delta, s)
            for wi, ri in zip(w, r):
                with mpmath.workdps(40):
                    ref = [complex(x) for x in mpmath.polyroots(
                        [mpmath.mpf(delta), -(mpmath.mpf(s) + mpmath.mpc(wi) + mpmath.mpf(delta) * mpmath.mpf(s)),
                         mpmath.mpc(wi) * mpmath.mpf(s) + 1, -mpmath.mpf(s)], maxsteps=200, extraprec=200)]
                worst = max(worst, max(np.min(np.abs(np.asarray(ref) - x)) / abs(x) for x in ri))
    assert worst <= 1e-14, worst


@pytest.mark.parametrize("rho", [0.003, 0.01, 0.1, 0.5])
def test_spectral_integral_at_tiny_delta_is_normalised(rho):
    """Below delta = 1e-18 the bump of the atom is narrower than the rounding of w and is integrated
    as a semicircle; the bulk, 4 to 16 wide here, is not: the total mass is still 1."""
    for delta in (1e-20, 1e-30):
        assert abs(aim.spectral_integral(delta, rho, power=1) - 1.0) < 1e-12


@needs_mpmath
@pytest.mark.parametrize("delta", [1e-300, 1e-60, 1e-22])
def test_cubic_roots_deflated_on_a_grid(delta):
    """The scaled companion matrix, the Vieta pair and their Newton steps, on lines of real and
    complex w (near the edges of S's spectrum too): every root within 1e-14 of mpmath's."""
    worst = 0.0
    for rho in (0.1, 0.5, 2.0):
        s = np.sqrt(rho)
        w = np.concatenate([np.linspace(-4.0, 5.0, 19), np.linspace(-4.0, 5.0, 19) + 1e-3j,
                            [-s, -s + 1e-9, 1 / s - s, 2.0 - 3.0j, 1e6, -1e6 + 1j]])
        r = rmt._cubic_roots_deflated(w, np.full(w.shape, delta), np.full(w.shape, s))
        for wi, ri in zip(w, r):
            ref = np.asarray(_mp_roots([delta, -(s + wi + delta * s), wi * s + 1, -s]))
            worst = max(worst, max(np.min(np.abs(ref - x)) / abs(x) for x in ri))
            assert len({int(np.argmin(np.abs(ri - x))) for x in ref}) == 3
    assert worst <= 1e-14, worst


def _mp_edges(delta, rho):
    """Support intervals (a, b, G(a), G(b)) in w = x - sqrt(rho) from mpmath: the real roots g of
    z'(G) = 0 (a quartic), the outer edges at the largest negative root and the smallest root in
    (0, s), a gap between two other roots where z' < 0 at their midpoint; w = z(g) - s."""
    with mpmath.workdps(60):
        d, s = mpmath.mpf(delta), mpmath.sqrt(mpmath.mpf(rho))
        q = mpmath.polyroots([d, -2 * d * s, d * s * s + s * s - 1, 2 * s, -s * s], maxsteps=3000, extraprec=3000)
        g = sorted(mpmath.re(r) for r in q if abs(mpmath.im(r)) <= mpmath.mpf(10) ** -40 * (1 + abs(r)))
        w = lambda x: 1 / x + x / (1 - x / s) + d * x  # noqa: E731
        zp = lambda x: -1 / x**2 + s**2 / (s - x) ** 2 + d  # noqa: E731
        g1, g2 = max(x for x in g if x < 0), min(x for x in g if 0 < x < s)
        others = [x for x in g if x not in (g1, g2)]
        cuts = [(w(hi), w(lo), hi, lo) for lo, hi in zip(others, others[1:])
                if not (lo < 0 < hi or lo < s < hi) and zp((lo + hi) / 2) < 0]
        edges, start, gs = [], w(g1), g1
        for a, b, ga, gb in sorted(cuts):
            edges.append((start, a, gs, ga))
            start, gs = b, gb
        edges.append((start, w(g2), gs, g2))
        return [tuple(float(v) for v in e) for e in edges]


@needs_mpmath
@pytest.mark.parametrize("delta", [1e-200, 1e-40, 1e-21, 1e-12, 1e-4, 0.01, 0.3, 5.0, 1e4, 1e20])
def test_support_edges_and_their_G_match_high_precision(delta):
    """The support intervals and G at their edges, with and without a gap, against mpmath: the
    edges to 2e-15 of the spectrum's scale, G at the edges to 1e-12 relative (measured: 1.7e-16
    and 1.9e-13, the conditioning of the quartic's roots)."""
    for rho in (0.05, 0.3, 0.5, 1.0, 2.0):
        got, ref = rmt._edges_g(delta, np.sqrt(rho)), _mp_edges(delta, rho)
        assert len(got) == len(ref), (rho, got, ref)
        scale = max(abs(ref[0][0]), abs(ref[-1][1]), 1.0)
        for e, r in zip(got, ref):
            assert abs(e[0] - r[0]) <= 2e-15 * scale and abs(e[1] - r[1]) <= 2e-15 * scale, (rho, e, r)
            assert abs(e[2] - r[2]) <= 1e-12 * abs(r[2]) and abs(e[3] - r[3]) <= 1e-12 * abs(r[3]), (rho, e, r)


def test_G_S_phys_is_the_physical_root_of_its_quadratic():
    """The Stieltjes transform of the (shifted) law of S off the real axis: a root of
    (z/s) G^2 - (z + 1/s - s) G + 1 = 0 (to rounding), with Im G Im z < 0, and ~ 1/z far away."""
    z = np.array([0.3 + 1e-3j, -0.7 - 0.2j, 2.0 + 1.5j, -3.0 + 0.01j, 0.05 - 4j, 7.0 - 1e-6j])
    for rho in (0.2, 0.5, 1.0, 3.0):
        s = np.sqrt(rho)
        G = rmt._G_S_phys(z, s)
        terms = np.abs(z / s) * np.abs(G) ** 2 + np.abs(z + 1 / s - s) * np.abs(G) + 1
        assert np.all(np.abs((z / s) * G**2 - (z + 1 / s - s) * G + 1) <= 1e-13 * terms)
        assert np.all(G.imag * z.imag < 0)
        far = 1e7 * np.exp(1j * np.linspace(0.2, 2.9, 6))
        np.testing.assert_allclose(rmt._G_S_phys(far, s) * far, 1.0, atol=1e-6)


@needs_mpmath
@pytest.mark.parametrize("delta", _DELTAS_ALL)
def test_G_on_the_real_axis_is_the_physical_root(delta):
    """G(x - i0) against the root that the rule picks among the high-precision roots: on the
    support the one with the largest imaginary part (Im G = pi mu > 0), off it the real root with
    z'(G) < 0 that continues 1/x (z' evaluated in 60 digits)."""
    for rho in (0.25, 0.5, 2.0):
        s = np.sqrt(rho)
        edges = rmt.support_edges(delta, rho)
        lo, hi = edges[0][0], edges[-1][1]
        xs = [lo - 1.0, lo - 1e-3, 0.5 * (lo + hi), 0.9 * hi + 0.1 * lo, hi + 1e-3, hi + 2.0]
        xs += [a + 0.3 * (b - a) for a, b in edges]
        got = rmt._G_real_axis(np.array(xs) - s, delta, s)
        for x, g in zip(xs, got):
            w = x - s
            ref = _mp_roots([delta, -(s + w + delta * s), w * s + 1, -s])
            cut = [r for r in ref if abs(r.imag) > 1e-13 * abs(r)]
            if cut:
                want = max(cut, key=lambda r: r.imag)
            else:
                with mpmath.workdps(60):
                    zp = [float(-1 / mpmath.mpf(r.real) ** 2 + mpmath.mpf(s) ** 2 / (mpmath.mpf(s) - mpmath.mpf(r.real)) ** 2
                                + mpmath.mpf(delta)) for r in ref]
                want = ref[int(np.argmin(zp))].real
            assert abs(g - want) <= 1e-12 * abs(want), (rho, x, g, want)


def _mp_G_near_edge(z, delta, rho):
    """G at the point that the module sees (s = fl(sqrt rho), w = fl(z - s)), in 100 digits: the
    three roots of the cubic by Cardano's formula (a closed form: fast, and independent of the
    float solvers; its cancellations, up to 25 digits at delta = 1e-20, are far inside 100).
    Real z: G(x - i0), the root with Im G > 0 on the cut, else the real root of least z'(G) (the
    rule of test_G_on_the_real_axis_is_the_physical_root); complex z: the root with Im G Im z < 0
    that solves the subordination G = G_S(z - delta G) with G_S's physical branch."""
    s_f = float(np.sqrt(rho))
    w_f = complex(z) - s_f
    with mpmath.workdps(100):
        d, s = mpmath.mpf(delta), mpmath.mpf(s_f)
        w = mpmath.mpc(w_f.real, w_f.imag) if w_f.imag else mpmath.mpf(w_f.real)
        a, b, c = -(s + w + d * s) / d, (w * s + 1) / d, -s / d  # monic: G^3 + a G^2 + b G + c
        p, q = b - a * a / 3, 2 * a**3 / 27 - a * b / 3 + c  # G = t - a/3: t^3 + p t + q = 0
        sq = mpmath.sqrt(q * q / 4 + p**3 / 27)
        u = max(-q / 2 + sq, -q / 2 - sq, key=abs)  # the sign without cancellation
        C = mpmath.cbrt(u) if mpmath.im(u) or u >= 0 else -mpmath.cbrt(-u)
        e3 = mpmath.exp(2j * mpmath.pi / 3)
        roots = [C * e3**k - p / (3 * C * e3**k) - a / 3 for k in range(3)]
        if not w_f.imag:
            cut = [r for r in roots if abs(mpmath.im(r)) > mpmath.mpf(10) ** -40 * abs(r)]
            if cut:
                g = max(cut, key=lambda r: mpmath.im(r))
            else:
                g = min((mpmath.re(r) for r in roots), key=lambda r: -1 / r**2 + s**2 / (s - r) ** 2 + d)
            return complex(g)
        zz = w + s
        best = None
        for r in roots:
            if mpmath.im(r) * mpmath.im(zz) >= 0:
                continue
            om = zz - d * r
            A, B = om / s, -(om + 1 / s - s)
            q = mpmath.sqrt(B * B - 4 * A)
            gs = [g for g in ((-B + q) / (2 * A), (-B - q) / (2 * A)) if mpmath.im(g) * mpmath.im(om) < 0]
            score = min(abs(r - g) for g in gs)
            if best is None or score < best[0]:
                best = (score, r)
        return complex(best[1])


def _near_edge_points(delta, rho):
    """Points 0, 1e-14, 1e-12, 1e-10 times max(|x_e|, sqrt(rho)) on both sides of each edge x_e
    of the support (from _mp_edges, x_e = z(g_e) in 60 digits)."""
    pts = []
    with mpmath.workdps(60):
        d, s = mpmath.mpf(delta), mpmath.sqrt(mpmath.mpf(rho))
        for _, _, ga, gb in _mp_edges(delta, rho):
            for g in (mpmath.mpf(ga), mpmath.mpf(gb)):
                xe = float(1 / g + s * s / (s - g) + d * g)
                sc = max(abs(xe), float(s))
                pts += [xe] + [xe + k * t * sc for t in (1e-14, 1e-12, 1e-10) for k in (-1, 1)]
    return np.array(pts)


@needs_mpmath
def test_G_within_rounding_of_the_edges_at_small_delta():
    """G(x - i0) (stieltjes, hilbert_transform, spectral_density) at points 0 to 1e-10 (relative)
    from each support edge, delta in 1e-20..1e-8, rho in 1e-4..10, and just off the axis, against
    _mp_G_near_edge. Regression: there the two roots that meet at the edge come out real and
    their z' is rounding noise of size 1e-12 / G^2, which the spurious root's z' ~ delta undercut
    for 1e-20 <= delta <~ 1e-8 (G ~ x/delta returned: 1.5e16 for 0.46 at the reproducer below,
    9.8e13 for 0.0101); a Newton step at the near-double root threw the companion matrix's roots up
    to 40 % off (values that are no root); and the companion matrix, with roots 1/delta apart, gave
    G off the axis 2e-4 off. Measured: 2.1e-8 relative on the axis (the sqrt(eps) of a double
    root), 8e-11 at 1e-9 off it; tolerances 1e-7 and 1e-9. (The reference is taken at the point the
    module sees, w = fl(x - sqrt(rho)): the square root at an edge amplifies the rounding of that
    input, to 1e-2 relative at the edges of the atom's bump near x = 0, and that is not tested.)"""
    # the reproducers of the report
    for x, delta, rho, want in [(1.478505426185217, 1e-16, 0.1, 0.4625), (98.01000000000101, 1e-12, 1e-4, 0.0101),
                                (98.01000000010322, 1e-8, 1e-4, 0.0101)]:
        assert abs(aim.hilbert_transform(x, delta, rho) - want) < 1e-3 * want
        xi = aim.rie_eigenvalues(x, delta, rho, outside="continuation")  # was -x at delta = 1e-16
        assert abs(xi - (x - 2 * delta * want)) < 1e-14 * x
    for delta in (1e-20, 1e-16, 1e-12, 1e-8):
        for rho in (1e-4, 0.1, 1.0, 10.0):
            x = _near_edge_points(delta, rho)
            ref = np.array([_mp_G_near_edge(v, delta, rho) for v in x])
            scale = np.abs(ref)
            G = np.asarray(aim.stieltjes(x, delta, rho))
            assert np.all(np.abs(G - ref) <= 1e-7 * scale), (delta, rho, x, G, ref)
            h = np.asarray(aim.hilbert_transform(x, delta, rho))
            assert np.all(np.abs(h - ref.real) <= 1e-7 * scale), (delta, rho, x, h, ref)
            mu = np.asarray(aim.spectral_density(x, delta, rho))
            assert np.all(np.abs(np.pi * mu - ref.imag) <= 1e-7 * scale), (delta, rho, x, mu, ref)
            # just off the axis, alternately above and below
            z = x + 1e-9j * (-1.0) ** np.arange(x.size) * np.maximum(np.abs(x), np.sqrt(rho))
            refz = np.array([_mp_G_near_edge(v, delta, rho) for v in z])
            Gz = np.asarray(aim.stieltjes(z, delta, rho))
            assert np.all(np.abs(Gz - refz) <= 1e-9 * np.abs(refz)), (delta, rho, z, Gz, refz)


@needs_mpmath
@pytest.mark.parametrize("delta", [1e-300, 1e-60, 1e-25, 1e-21, 1e-12, 0.3, 5.0])
def test_edges_are_the_critical_values_of_high_precision_critical_points(delta):
    """The support's edges (and G there) from the real roots of the quartic z'(g) = 0 computed in
    60 digits: the Newton polygon below delta = 1e-20, np.roots above."""
    for rho in (0.25, 0.5, 1.5):
        s = np.sqrt(rho)
        q = _mp_roots([delta, -2 * delta * s, delta * s * s + s * s - 1, 2 * s, -s * s])
        real = sorted(r.real for r in q if abs(r.imag) <= 1e-12 * abs(r))
        g1, g2 = max(g for g in real if g < 0), min(g for g in real if 0 < g < s)
        got = rmt._edges_x(delta, s)
        ga, gb = got[0][2], got[-1][3]
        assert abs(ga - g1) <= 1e-13 * abs(g1) and abs(gb - g2) <= 1e-13 * abs(g2), (rho, got, g1, g2)
        with mpmath.workdps(60):
            def x_of(g):
                g = mpmath.mpf(g)
                return float(1 / g + mpmath.mpf(s) ** 2 / (mpmath.mpf(s) - g) + mpmath.mpf(delta) * g)
        assert abs(got[0][0] - x_of(g1)) <= 1e-13 * max(1.0, abs(got[0][0]))
        assert abs(got[-1][1] - x_of(g2)) <= 1e-13 * max(1.0, abs(got[-1][1]))


def test_zprime_is_the_derivative_of_the_inverse_function():
    """z'(G) of z(G) = 1/G + s^2/(s - G) + delta G, against mpmath's derivative at 40 digits (it
    decides the physical root off the support and the gaps of the support). The bound is the
    rounding of the three-term sum: a few ulps of the largest term."""
    import mpmath

    s, delta = np.sqrt(0.5), 0.3
    G = np.array([-2.0, -0.3, 0.2, 0.5, 1.3, 4.0, s * (1 - 1e-3)])
    with mpmath.workdps(40):
        sm = mpmath.mpf(s)  # the same float64 input
        exact = np.array([float(mpmath.diff(lambda g: 1 / g + sm * sm / (sm - g) + delta * g, mpmath.mpf(g)))
                          for g in G])
    scale = 1.0 / G**2 + s**2 / (s - G) ** 2 + delta
    assert np.all(np.abs(rmt._zprime(G, delta, s) - exact) <= 8 * np.finfo(float).eps * scale)


def _poly_with_roots(roots, lead):
    """Float coefficients (highest power first) of lead * prod (g - r), computed in 60 digits."""
    with mpmath.workdps(60):
        c = [mpmath.mpf(lead)]
        for r in roots:
            r = mpmath.mpf(r)
            c = [a - r * b for a, b in zip(c + [mpmath.mpf(0)], [mpmath.mpf(0)] + c)]
        return [float(x) for x in c]


@needs_mpmath
@pytest.mark.parametrize("roots", [
    [1e-12, 2e-12, -3.0, 1e9],          # a close pair, a root of order one, a large one
    [-1e-150, 5e-20, 1.0, 1e40],        # four groups, far apart
    [1e-8, -1e-4, 2.0, 3.0],            # groups within 1e4 of each other: merged
    [1e-30, -3e-30, 1e30, 2e30],        # two pairs 1e60 apart
    [-2.0, 1e-40, 1e-20, 1.0, 1e20],    # a quintic
    [7e-300, 1e-100, -1e100],           # the whole range of floats
    [1e-150, -1e-100, 1e-50, 1.0, -1e50, 1e100, 1e150],  # seven groups, 1e50 apart
    [1e-3, 2e-3, -5e-3, 1.0, 1e3, -1e6, 3e7],  # ratios about the 1e4 at which edges are merged
])
@pytest.mark.parametrize("lead", [1.0, 1e-25, 3e30])
def test_roots_scaled_finds_roots_many_decades_apart(roots, lead):
    """The Newton-polygon root finder (used for the edges below delta = 1e-20) on polynomials of
    known real roots: each to 1e-12 relative (measured: at most 5.5e-14 over these cases)."""
    coeffs = _poly_with_roots(roots, lead)
    if not all(0 < abs(c) < np.inf for c in coeffs):
        pytest.skip("a coefficient would overflow or underflow")
    got = rmt._roots_scaled(coeffs)
    assert got.size == len(roots)
    got = got[np.argsort(got.real)]
    ref = np.sort(np.array(roots, dtype=float))
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=0)


def test_cubic_roots_of_mixed_deltas_are_those_of_each_delta():
    """A batch with deltas on both sides of 1e-6 (the deflated solver below, the companion matrix
    above) gives each point the roots of its own delta."""
    w = np.array([0.5, 1.0, 2.0, -0.7])
    d = np.array([1e-25, 0.3, 1e-22, 5.0])
    s = np.full(4, np.sqrt(0.5))
    r = rmt._cubic_roots(w, d, s)
    for i in range(4):
        alone = rmt._cubic_roots(w[i:i + 1], d[i:i + 1], s[i:i + 1])[0]
        np.testing.assert_allclose(np.sort_complex(r[i]), np.sort_complex(alone), rtol=1e-14)


@pytest.mark.parametrize("v", [1.0, 2.5e-3, 1e10])
def test_semicircle_stieltjes_off_the_axis_is_the_closed_form(v):
    """G(z) = (z - s) / (2v) = 2 / (z + s), s = sqrt(z - 2r) sqrt(z + 2r), r = sqrt(v) (the product of
    principal roots is the branch with G ~ 1/z; the second form has no cancellation), on both
    sides of the real axis, inside and outside the support; the scaled evaluation (no overflow)
    chooses the root of the right sign of Im G."""
    r = np.sqrt(v)
    x = r * np.array([-3.0, -1.0, 0.0, 0.5, 1.9, 3.0])
    y = r * np.array([1e-20, -1e-20, 1e-3, -1e-3, 1.0, -1.0, 1e3, -1e3])  # (1e-20: below rounding)
    z = (x[:, None] + 1j * y[None, :]).ravel()
    ref = 2 / (z + np.sqrt(z - 2 * r) * np.sqrt(z + 2 * r))
    got = rmt._G_semicircle(z, v, real_axis=False)
    np.testing.assert_allclose(got, ref, rtol=1e-12)
    assert np.all(got.imag * z.imag < 0)


def test_stieltjes_below_the_axis_is_the_conjugate():
    """G(conj z) = conj G(z) (the law is real): a batch whose points all lie on the line Im z = -1,
    and a scalar on it, against the points at Im z = +1: the same roots of conjugate cubics, equal to
    rounding (1e-14 relative; measured: equal); Im G > 0 below the axis."""
    delta, rho = 0.05, 0.5
    x = np.array([-1.0, 0.3, 1.9, 4.0, 6.0])
    below, above = aim.stieltjes(x - 1j, delta, rho), aim.stieltjes(x + 1j, delta, rho)
    np.testing.assert_allclose(below, np.conj(above), rtol=1e-14)
    assert np.all(below.imag > 0)
    assert aim.stieltjes(1.9 - 1j, delta, rho) == pytest.approx(np.conj(above[2]), rel=1e-14, abs=0)


def test_stieltjes_within_rounding_of_the_real_axis():
    """Documented: for 0 < |Im z| <= 1e-13 / |G(x - i0)| (an imaginary part the cubic cannot resolve)
    stieltjes returns the boundary value G(x -+ i0) exactly, the bound included, on the support and
    off it (up to 300 from it, where the cubic is still used). Above the bound it is the root of the
    cubic: off the support its imaginary part is Im z G'(x) = Im z / z'(G(x)) to first order (the
    next term is 1e-26 smaller; measured within 5e-16 relative, tolerance 1e-13)."""
    delta, rho = 0.05, 0.5
    s = np.sqrt(rho)
    (a, b), = aim.support_edges(delta, rho)
    x = np.array([a - 3.0, a - 0.2, 0.5 * (a + b), b + 0.5, b + 10.0, b + 300.0])
    g0 = aim.stieltjes(x, delta, rho)  # G(x - i0)
    bound = 1e-13 * (1.0 / np.abs(g0))
    for f in (0.9, -0.9, 1.0, -1.0):
        y = f * bound
        np.testing.assert_array_equal(aim.stieltjes(x + 1j * y, delta, rho), np.where(y > 0, np.conj(g0), g0))
    off = g0.imag == 0
    assert np.count_nonzero(off) == 5
    for f in (1.5, -1.5):
        y = f * bound[off]
        G = aim.stieltjes(x[off] + 1j * y, delta, rho)
        np.testing.assert_allclose(G.imag, y / rmt._zprime(g0.real[off], delta, s), rtol=1e-13)
        np.testing.assert_allclose(G.real, g0.real[off], rtol=1e-15)


@needs_mpmath
@pytest.mark.parametrize("rho", [0.5, 1.0, 4.0])
def test_stieltjes_at_huge_delta_is_the_semicircle_of_variance_one_plus_delta(rho):
    """From delta = 1e14 max(1, 1e-4/rho) on, G off the real axis is the Stieltjes transform of the
    semicircle of variance v = 1 + delta centred at sqrt(rho) (the law of Y up to a relative
    1/(sqrt(rho) delta^{3/2}) = 1e-21): against its closed form 2 / (w + sqrt(w - 2r) sqrt(w + 2r)),
    r = sqrt(v), in 40 digits, to 1e-14 relative (measured: at most 9e-16). Near an edge a variance
    off by 1 in 1e14 moves G by 5e-14 to 2e-13."""
    s = np.sqrt(rho)
    delta = float(rmt._huge(s))
    assert delta == 1e14
    r = np.sqrt(1 + delta)
    z = s + r * np.array([0.5 + 0.5j, -1.0 - 0.3j, 2.0 + 1e-3j, 1.999 - 0.01j, 3.0 + 0.1j, 0.3 - 2.0j])
    got = aim.stieltjes(z, delta, rho)
    with mpmath.workdps(40):
        v = 1 + mpmath.mpf(delta)
        rr = mpmath.sqrt(v)
        ref = []
        for zk in z:
            w = mpmath.mpc(zk.real, zk.imag) - mpmath.mpf(s)
            ref.append(complex(2 / (w + mpmath.sqrt(w - 2 * rr) * mpmath.sqrt(w + 2 * rr))))
    np.testing.assert_allclose(got, np.array(ref), rtol=1e-14)


@needs_mpmath
def test_G_at_the_edge_of_the_bulk_of_a_tiny_rho():
    """G(x - i0) within 20 ulps of the right edge of the bulk of mass rho = 1e-12..1e-14 (delta = 1),
    against _mp_G_near_edge. There the Newton polish of the cubic's roots meets roots at which p'
    rounds to exactly 0 (a double root at the edge; at some of these 41 points at each rho): the
    step is skipped there, with no division by zero and no RuntimeWarning. Measured: 2.2e-8 relative
    (the sqrt(eps) of a double root); tolerance 1e-7, as for the edges at small delta. (These rho are
    below RHO_MIN, which the public functions refuse; the module's internals that they call are
    checked here, since a zero p' can occur at any double root.)"""
    import warnings

    eps = np.finfo(float).eps
    for rho in (1e-12, 1e-13, 1e-14):
        s = np.sqrt(rho)
        x = rmt._edges_x(1.0, s)[-1][1] * (1 + eps * np.arange(-20, 21))
        ref = np.array([_mp_G_near_edge(v, 1.0, rho) for v in x])
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            G = np.asarray(rmt._G_real_axis(x - s, 1.0, s))
        assert np.all(np.abs(G - ref) <= 1e-7 * np.abs(ref)), (rho, x, G, ref)


@needs_mpmath
def test_G_on_the_bulk_of_a_tiny_rho_is_not_the_root_near_x_over_delta():
    """G(x - i0) across the bulk of mass rho = 1e-12 (near w = 1/sqrt(rho) = 1e6) at delta = 100,
    against _mp_G_near_edge. The physical G is one of the two roots near s = 1e-6, whose
    imaginary part (~9e-13) is below their absolute rounding (eps times the third root,
    x/delta ~ 1e4): at some points they come out real, with z'(G) ~ +1e12 (rounding noise), far
    above the spurious root's z' = delta = 100. Their z' relative to its terms (1/G^2 +
    s^2/(s - G)^2 + delta, with s^2/(s - G)^2 ~ 1e12 for G within 1e-12 of s) is below 1: the
    pair is chosen, not x/delta (1e10 times too large). Tolerance 1e-5: that rounding, 4 eps
    1e4 / 1e-6 = 9e-6 relative (measured: 1.2e-6). (rho below RHO_MIN: the internals, as above.)"""
    delta, rho = 100.0, 1e-12
    s = np.sqrt(rho)
    a, b = rmt._edges_x(delta, s)[-1][:2]
    x = np.linspace(a, b, 401)
    ref = np.array([_mp_G_near_edge(v, delta, rho) for v in x])
    G = np.asarray(rmt._G_real_axis(x - s, delta, s))
    assert np.all(np.abs(G - ref) <= 1e-5 * np.abs(ref)), (x, G, ref)
    assert np.all(np.abs(G.real - ref.real) <= 1e-5 * np.abs(ref))


def test_quadrature_panel_budget(monkeypatch):
    """The adaptive quadrature halves every panel not yet accepted, 2 new panels each, as long as
    a round creates at most max_panels = 20000 panels; a round that would create more stops it and
    flags the items still refining as unconverged (the cap on its work and memory). A synthetic
    integrand makes the count exact: f = 1 + K cos(60 t) on [0, pi] (integral pi), with 10 first
    panels of width pi/10 (3 periods each) where the 10-point rule errs by 6.5e3 times the
    tolerance for K = 1e-3 (every panel of such an item is halved), and halves of 1.5 periods
    where it is exact to rounding (error 1.7e-4 of the tolerance: accepted); K = 0 gives f = 1,
    accepted at once. 1000 items with K = 1e-3 halve 10000 panels, 20000 new ones: within the
    budget, all converge to pi; 1001 (20020 panels) are flagged."""
    # the integrand is read where the quadrature lives (aim_tutorial/_rmt_support.py, issue 49)
    monkeypatch.setattr(_rmt_support, "_integrand", lambda t, a, b, delta, s, power: 1.0 + delta * np.cos(60.0 * t))
    for hard, conv in ((1000, True), (1001, False)):
        K = np.r_[np.full(hard, 1e-3), np.zeros(5)]
        one = np.ones(K.size)
        total, converged = rmt._integrate_items(0 * one, one, K, one, 1, n0=10)
        np.testing.assert_array_equal(converged, np.r_[np.full(hard, conv), np.ones(5, dtype=bool)])
        if conv:
            np.testing.assert_allclose(total, np.pi, rtol=1e-14)


def _mp_power_integral(delta, rho, power):
    """int mu_delta^power over the support, in 40 digits: mu(w) = max Im G / pi over the roots of the
    cubic (Cardano), by tanh-sinh quadrature over each interval of _mp_edges (split at its middle)."""
    with mpmath.workdps(40):
        d, s = mpmath.mpf(delta), mpmath.sqrt(mpmath.mpf(rho))
        e3 = mpmath.exp(2j * mpmath.pi / 3)

        def mu(w):
            a, b, c = -(s + w + d * s) / d, (w * s + 1) / d, -s / d
            p, q = b - a * a / 3, 2 * a**3 / 27 - a * b / 3 + c
            sq = mpmath.sqrt(q * q / 4 + p**3 / 27)
            u = max(-q / 2 + sq, -q / 2 - sq, key=abs)
            C = mpmath.cbrt(u) if mpmath.im(u) or u >= 0 else -mpmath.cbrt(-u)
            return max(0, max(mpmath.im(C * e3**k - p / (3 * C * e3**k)) for k in range(3))) / mpmath.pi

        return float(sum(mpmath.quad(lambda w: mu(w) ** power, [a, (a + b) / 2, b])
                         for a, b, _, _ in _mp_edges(delta, rho)))


@needs_mpmath
def test_spectral_integral_of_a_thin_bump_above_1e_18_is_the_quadrature():
    """At rho = 0.99, delta = 5e-12 the bump of the atom (mass 0.01) is 9e-7 wide, narrower than
    1e-6 |x - sqrt(rho)|; it is replaced by the semicircle of variance delta (1 - rho) only below
    delta = 1e-18, where the rounding of w = x - sqrt(rho) spoils the quadrature. Here the
    semicircle is off by 5e-6 (relative, power 3; the bulk is 2.5e-5 away); the quadrature matches
    mpmath (40 digits) to 1e-10, the rounding of w over the bump's width (1.1e-16 / 9e-7; measured
    4.8e-12 for power 3, 6.4e-12 for power 2)."""
    for power in (2, 3):
        want = _mp_power_integral(5e-12, 0.99, power)
        got = aim.spectral_integral(5e-12, 0.99, power=power)
        assert got == pytest.approx(want, rel=1e-10, abs=0), power


@pytest.mark.parametrize("call", [
    lambda r: aim.support_edges(1.0, r), lambda r: aim.stieltjes(1.0, 1.0, r),
    lambda r: aim.spectral_density(1.0, 1.0, r), lambda r: aim.hilbert_transform(1.0, 1.0, r),
    lambda r: aim.spectral_integral(1.0, r), lambda r: aim.mmse_denoising(1.0, r),
    lambda r: aim.rie_eigenvalues(np.array([1.0]), 1.0, r)])
def test_rho_outside_the_checked_range_is_refused(call):
    """rho is refused outside [RHO_MIN, RHO_MAX] = [1e-6, 1e24], with the range in the message: below
    ~1e-8 (and above ~1e26 at small delta) two roots of the edges' quartic, ~rho apart, fall below
    np.roots' accuracy, and the spectrum came out wrong without a word (support_edges(1, 1e-15): one
    interval instead of two; mmse_denoising(1, 1e-15) = 1 instead of 2e-15) or raised 'support edges
    not found'. At the limits themselves every function answers."""
    for bad in (1e-15, 0.99e-6, 1.01e24, 1e45):
        with pytest.raises(ValueError, match=r"rho must (be in|have entries in) \[1e-06, 1e\+24\]"):
            call(bad)
    for ok in (rmt.RHO_MIN, rmt.RHO_MAX):
        call(ok)
    with pytest.raises(ValueError, match=r"rho must have entries in \[1e-06, 1e\+24\]"):
        aim.mmse_denoising(np.array([1.0, 2.0]), np.array([0.5, 1e-7]))


@needs_mpmath
@pytest.mark.parametrize("power", [4, 5])
def test_spectral_integral_at_huge_delta_is_the_semicircle_of_variance_one_plus_delta(power):
    """From delta = 1e14 (rho = 1) the law of Y is the semicircle of variance 1 + delta (error
    1/(sqrt(rho) delta^{3/2}) = 1e-21 here), and int mu^p is its closed form 2^{p+1} B(1/2, p/2 + 1)
    (2 pi)^{-p} (1 + delta)^{(1-p)/2}, against mpmath. The bound is the rounding of the exp of a
    log-sum, eps times the size of its terms (5.8e-15 for p = 4, 7.7e-15 for p = 5; measured 1.6e-15
    and 2.2e-15); a variance of 2 + delta would be 1.5e-14 and 2e-14 off."""
    delta = 1e14
    with mpmath.workdps(40):
        v = 1 + mpmath.mpf(delta)
        p = mpmath.mpf(power)
        exact = float(2 ** (p + 1) * mpmath.beta(mpmath.mpf(1) / 2, p / 2 + 1) * (2 * mpmath.pi) ** (-p)
                      * v ** ((1 - p) / 2))
        size = float(abs(mpmath.log(2 ** (p + 1) * mpmath.beta(mpmath.mpf(1) / 2, p / 2 + 1) * (2 * mpmath.pi) ** (-p)))
                     + abs((1 - p) / 2 * mpmath.log(v)))
    got = aim.spectral_integral(delta, 1.0, power=power)
    assert got == pytest.approx(exact, rel=(size + 2) * np.finfo(float).eps, abs=0)


@pytest.mark.parametrize("rho", [1e-6, 0.5, 1.0, 1e3, 1e16, 1e24])
def test_delta_below_the_floor_is_refused_and_the_floor_is_finite(rho):
    """The spectral functions take delta >= DELTA_FLOOR max(rho, 1/rho) (below a frontier 2 to 3
    decades lower the cubic's coefficients overflowed: NumPy's LinAlgError from delta = 5.6e-285 at
    rho = 1e24, and at every rho at the subnormal 1e-310); at the floor every result is finite;
    mmse_denoising takes any delta > 0."""
    floor = rmt.DELTA_FLOOR * max(rho, 1.0 / rho)
    x = np.array([0.0, 0.5, 1.0, np.sqrt(rho)])
    calls = [lambda dl: rmt.stieltjes(x + 1e-3j, dl, rho), lambda dl: rmt.spectral_density(x, dl, rho),
             lambda dl: rmt.hilbert_transform(x, dl, rho), lambda dl: rmt.spectral_integral(dl, rho, power=3),
             lambda dl: rmt.rie_eigenvalues(x, dl, rho), lambda dl: rmt.rie_denoise(np.diag(x), dl, rho),
             lambda dl: np.asarray(rmt.support_edges(dl, rho))]
    for call in calls:
        with warnings.catch_warnings():
            # at rho = 1 and tiny delta the quadrature stops short of its tolerance, and says so
            # (spectral_integral's docstring): finite, not resolved
            warnings.filterwarnings("ignore", "spectral quadrature did not reach", RuntimeWarning)
            assert np.all(np.isfinite(np.asarray(call(floor))))
        for below in (0.5 * floor, 1e-310):
            with pytest.raises(ValueError, match=r"delta must be at least 1e-306 max\(rho, 1/rho\)"):
                call(below)
    for tiny in (0.5 * floor, 1e-310):
        assert np.isfinite(rmt.mmse_denoising(tiny, rho))


def test_complex_critical_points_stay_outside_the_edges():
    """The support's edges come from the real roots of the quartic z'(G) = 0. Where two roots are
    complex, their common real part lies outside (g1, 0) and (0, g2), the critical points of the
    outer edges: had it been inside, the edges would hang on which roots count as real
    (mutation triage of rmt's 1e-9 threshold). A grid of 12 rho x 61 delta."""
    pairs = 0
    for rho in (0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 0.99, 1.0, 1.5, 3.0):
        s = math.sqrt(rho)
        for delta in np.logspace(-12, 3, 61):
            q = np.roots([delta, -2 * delta * s, delta * s * s + s * s - 1, 2 * s, -s * s])
            real = np.abs(q.imag) <= 1e-9 * (1 + np.abs(q))
            g = np.sort(q[real].real)
            g1, g2 = g[g < 0].max(), g[(g > 0) & (g < s)].min()
            for x in q[~real].real:
                pairs += 1
                assert not (g1 < x < 0 or 0 < x < g2), (rho, delta, x, g1, g2)
            edges = rmt._edges_g_cached(float(delta), s)
            assert math.isclose(edges[0][2], g1) and math.isclose(edges[-1][3], g2), (rho, delta)
    assert pairs > 500
