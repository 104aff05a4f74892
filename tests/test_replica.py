"""Tests of aim_tutorial.replica (chapter 3): Gaussian equivalence and the prior term psi_rho."""

import jax
import numpy as np
import pytest

import aim_tutorial as aim
from aim_tutorial import replica

# reference values of mmse_rho(Delta), eq. (eq-rmt-mmse), 5 significant digits (scripts/rmt_reference.py
# recomputes them with mpmath)
MMSE_TABLE = {
    (0.5, 0.01): 0.00742, (0.5, 0.1): 0.06654, (0.5, 0.6): 0.28390, (0.5, 1.0): 0.39695, (0.5, 10.0): 0.89393,
    (1.0, 0.01): 0.00948, (1.0, 0.1): 0.08055, (1.0, 0.6): 0.32532, (1.0, 1.0): 0.44387, (1.0, 10.0): 0.90189,
}


def test_index_variances_and_upper_triangle():
    assert replica.index_variances(1).tolist() == [2.0]
    assert replica.index_variances(3).tolist() == [2.0, 1.0, 1.0, 2.0, 1.0, 2.0]
    h = np.arange(9.0).reshape(3, 3)
    assert replica.upper_triangle(h).tolist() == [0.0, 1.0, 2.0, 4.0, 5.0, 8.0]
    with pytest.raises(ValueError, match="T"):
        replica.index_variances(0)
    with pytest.raises(ValueError, match="h"):
        replica.upper_triangle(np.zeros((2, 3)))


@pytest.mark.slow
def test_equivalent_indices_covariance(key):
    # Cov(h^a_ij, h^b_ij) = Q_ab C_ij, distinct entries uncorrelated; n = 40000 samples give
    # standard errors of about sqrt(2/n) * 2 ~ 0.014 on a covariance of size 2: tolerance 0.06.
    Q = np.array([[1.5, 0.9], [0.9, 1.2]])
    T = 3
    h = replica.sample_equivalent_indices(key, Q, 40000, T)
    assert h.shape == (40000, 2, T, T)
    assert np.allclose(h, np.swapaxes(h, -1, -2))
    v = np.asarray(replica.upper_triangle(h)).reshape(40000, -1)  # (n, 2 * D), replica-major
    emp = np.cov(v.T)
    theory = np.kron(Q, np.diag(replica.index_variances(T)))
    assert np.abs(emp - theory).max() < 0.06


def test_equivalent_indices_validation(key):
    with pytest.raises(ValueError, match="Q"):
        replica.sample_equivalent_indices(key, np.array([[1.0, 2.0], [2.0, 1.0]]), 3, 2)
    with pytest.raises(ValueError, match="n"):
        replica.sample_equivalent_indices(key, np.eye(2), 0, 2)


@pytest.mark.slow
def test_true_indices_match_equivalent_covariance(key):
    # teacher S and a correlated student S' (W' = sqrt(1-e) W + sqrt(e) W_new): the joint
    # covariance of (h, h') is exactly Tr(S S')/d C at any d (a property of Gaussian quadratic forms).
    d, rho, n, T = 60, 0.5, 20000, 2
    k1, k2, k3 = jax.random.split(key, 3)
    r = aim.teacher_width(d, rho)
    W = jax.random.normal(k1, (d, r))
    W2 = np.sqrt(0.5) * W + np.sqrt(0.5) * jax.random.normal(k2, (d, r))
    S, S2 = W @ W.T / np.sqrt(r * d), W2 @ W2.T / np.sqrt(r * d)
    X = aim.sample_tokens(k3, n, T, d)
    h = replica.upper_triangle(aim.attention_indices(X, S))
    h2 = replica.upper_triangle(aim.attention_indices(X, S2))
    emp = np.cov(np.concatenate([h, h2], axis=1).T)
    Q = np.array([[np.sum(S * S), np.sum(S * S2)], [np.sum(S * S2), np.sum(S2 * S2)]]) / d
    theory = np.kron(Q, np.diag(replica.index_variances(T)))
    # relative standard error of a sample covariance ~ sqrt(2/n) = 0.01; kurtosis at d = 60 adds a little
    assert np.abs(emp - theory).max() < 0.08 * theory.max()


@pytest.mark.parametrize("rho,delta", sorted(MMSE_TABLE))
def test_spectrum_moments_and_mmse_table(rho, delta):
    sp = replica.denoising_spectrum(delta, rho)
    assert sp.converged
    m1 = float(np.sum(sp.weights * sp.x))
    m2 = float(np.sum(sp.weights * sp.x**2))
    assert abs(m1 - np.sqrt(rho)) < 1e-8  # E S = sqrt(rho) I, the noise is centred
    assert abs(m2 - (1 + rho + delta)) < 1e-8  # Q0 + Delta
    assert abs(replica._mmse_from_spectrum(sp, delta) - MMSE_TABLE[(rho, delta)]) < 6e-6


def test_support_edges_spec():
    # the support edges chapter 2 checks (eq. (eq-rmt-edges)): rho = 0.5, Delta = 0.01: [-0.147, 0.132]
    # and [0.147, 4.125]; Delta = 0.05: [-0.341, 4.142]
    two = replica.denoising_spectrum(0.01, 0.5).intervals
    one = replica.denoising_spectrum(0.05, 0.5).intervals
    assert two.shape == (2, 2) and one.shape == (1, 2)
    assert np.allclose(two, [[-0.147, 0.132], [0.147, 4.125]], atol=1.5e-3)
    assert np.allclose(one, [[-0.341, 4.142]], atol=1.5e-3)


def test_log_energy_semicircle():
    # rho -> 0 with the spectrum of S shrinking to sqrt(rho) -> 0: the semicircle of variance Delta,
    # Sigma = log(Delta)/2 - 1/4. At rho = 1e-6 the signal shifts Sigma by O(sqrt(rho)) = 1e-3.
    for delta in (0.5, 2.0):
        assert abs(replica.log_energy(delta, 1e-6) - (np.log(delta) / 2 - 0.25)) < 5e-3


def test_log_energy_converges():
    a = replica.log_energy(0.6, 0.5, n_nodes=64)
    b = replica.log_energy(0.6, 0.5, n_nodes=1024)
    assert abs(a - b) < 1e-12  # exponential convergence of the Chebyshev expansion


@pytest.mark.parametrize("rho", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("q_hat", [0.3, 2.0, 20.0, 200.0])
def test_psi_derivative_is_overlap(rho, q_hat):
    # I-MMSE: psi'(q_hat) = (Q0 - mmse(1/q_hat))/4, the free-entropy side (log energy) against the
    # estimation side (free Fisher information). Central differences, step 1e-3 q_hat: error O(1e-6 q'').
    eps = 1e-3 * q_hat
    fd = (replica.denoising_free_entropy(q_hat + eps, rho) - replica.denoising_free_entropy(q_hat - eps, rho)) / (2 * eps)
    delta = 1 / q_hat
    mmse = replica._mmse_from_spectrum(replica.denoising_spectrum(delta, rho), delta)
    assert abs(fd - (1 + rho - mmse) / 4) < 1e-6


def test_mutual_information_limits():
    # small snr: I ~ (Q0 - rho)/(4 Delta) = 1/(4 Delta); and I is increasing in 1/Delta
    delta = 200.0
    assert abs(replica.denoising_mutual_information(delta, 0.5) * 4 * delta - 1) < 5e-3
    I = [replica.denoising_mutual_information(dd, 0.5) for dd in (10.0, 1.0, 0.1)]
    assert 0 < I[0] < I[1] < I[2]
    assert replica.denoising_free_entropy(0.0, 0.5) == 0.0


def test_validation():
    with pytest.raises(ValueError, match="delta"):
        replica.log_energy(0.0, 0.5)
    with pytest.raises(ValueError, match="rho"):
        replica.denoising_spectrum(1.0, -1.0)
    with pytest.raises(ValueError, match="q_hat"):
        replica.denoising_free_entropy(-1.0, 0.5)


@pytest.mark.parametrize("rho", [0.5, 2.0])
def test_psi_derivative_matches_package_mmse(rho):
    # the same I-MMSE check against chapter 2's aim.mmse_denoising (an independent quadrature)
    for q_hat in (0.5, 5.0, 50.0):
        eps = 1e-3 * q_hat
        fd = (aim.denoising_free_entropy(q_hat + eps, rho) - aim.denoising_free_entropy(q_hat - eps, rho)) / (2 * eps)
        assert abs(fd - (1 + rho - aim.mmse_denoising(1 / q_hat, rho)) / 4) < 1e-7


def _rho_merge(delta):
    """The rho at which the two intervals of the support of mu_delta merge (bisection on their count)."""
    lo, hi = 0.3, 0.99
    assert len(aim.support_edges(delta, lo)) == 2 and len(aim.support_edges(delta, hi)) == 1
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if len(aim.support_edges(delta, mid)) == 2:
            lo = mid
        else:
            hi = mid
    return hi


def test_mutual_information_just_past_merging():
    # just past the merging of the two intervals (delta = 0.01: rho_c = 0.5569237...) the density
    # has a thin neck, and the Chebyshev rule did not reach 1e-10 at 16384 nodes ("spectral
    # quadrature did not converge"). Split at the neck with the Euler-Maclaurin end correction it
    # converges at 2048 nodes; the value agrees with the unsplit rule at 2^19 nodes
    # (0.9183553228100867) to 4e-11.
    delta = 0.01
    rc = _rho_merge(delta)
    assert abs(rc - 0.55692370916) < 1e-9
    sp = replica.denoising_spectrum(delta, rc * (1 + 1e-3))
    assert sp.converged and sp.intervals.shape == (2, 2) and sp.intervals[0, 1] == sp.intervals[1, 0]
    I = replica.denoising_mutual_information(delta, rc * (1 + 1e-3))
    assert abs(I - 0.9183553228100867) < 1e-9
    # continuous and increasing in rho across the merging (the neck closer still at 1e-4)
    I_m = replica.denoising_mutual_information(delta, rc * (1 - 1e-3))
    I_p4 = replica.denoising_mutual_information(delta, rc * (1 + 1e-4))
    assert I_m < I_p4 < I and I - I_m < 1e-3


@pytest.mark.parametrize("rho", [1e-4, 0.5, 10.0])
def test_mutual_information_large_delta(rho):
    # 0.5 Sigma - log(delta)/4 + 1/8 cancels to ~1e-16 delta log(delta) relative: at delta = 1e16 it
    # gave 0 or -1.8e-15. Above 1e4 max(1, rho^-1/2) the I-MMSE expansion is used; it joins the
    # log-energy formula (1e-9 relative here) and stays positive up to delta = 1e300.
    sw = replica._MI_LARGE_DELTA * max(1.0, rho**-0.5)
    a = replica.denoising_mutual_information(sw * (1 - 1e-12), rho)
    b = replica.denoising_mutual_information(sw * (1 + 1e-12), rho)
    assert abs(a / b - 1) < 1e-8
    for delta in (1e16, 1e100, 1e300):
        val = replica.denoising_mutual_information(delta, rho)
        assert val > 0 and abs(val * 4 * delta - 1) < 1e-12
    with pytest.raises(ValueError, match="delta"):
        replica.denoising_mutual_information(float("nan"), rho)
