"""Tests of aim_tutorial.rmt: free convolution, support, RIE and the denoising MMSE."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate

import aim_tutorial as aim
from aim_tutorial import rmt

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
