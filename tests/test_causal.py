"""Tests of the causal softmax channel (aim_tutorial/channels/causal.py, chapter 8).

The registry's identity tests (tests/test_channel_registry.py) run on it as on every channel;
here: the output map, the decomposition h = M + sum_a c_a E_a, log Z_out against an independent
Gaussian integral, the score as its gradient, the state evolution as the softmax's at a rescaled
alpha, the threshold, the error on the outputs, and hostile inputs.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import aim_tutorial as aim
from aim_tutorial import channels as chs
from aim_tutorial.channels import causal
from aim_tutorial.counting import alpha_scale, dof_fraction


def _draw(key, n, T, q, Vp, beta):
    k1, k2 = jax.random.split(key)
    omega = math.sqrt(q) * chs.symmetric_gaussian(k1, (n, T, T))
    h = omega + math.sqrt(Vp) * chs.symmetric_gaussian(k2, (n, T, T))
    return omega, h, causal.causal_softmax(h, beta)


@pytest.mark.parametrize("T", [1, 2, 4])
def test_output_is_the_masked_softmax(key, T):
    h = np.asarray(chs.symmetric_gaussian(key, (6, T, T)))
    y = np.asarray(aim.apply_channel(jnp.asarray(h), "causal_softmax", beta=1.7))
    for a in range(T):  # row a: softmax over b <= a, zeros after
        e = np.exp(1.7 * h[:, a, : a + 1])
        np.testing.assert_allclose(y[:, a, : a + 1], e / e.sum(axis=-1, keepdims=True), rtol=1e-13)
        assert np.all(y[:, a, a + 1:] == 0)
    # differentiable, with a finite gradient (gradient descent needs it)
    g = jax.grad(lambda h: jnp.sum(causal.causal_softmax(h, 1.7) ** 2))(jnp.asarray(h))
    assert bool(jnp.all(jnp.isfinite(g)))


@pytest.mark.parametrize("T", [2, 3, 5])
def test_h_is_M_plus_one_constant_a_row(key, T):
    """h - M is constant on the support of each E_a (row a on and below the diagonal and its mirror)."""
    _, h, y = _draw(key, 5, T, 0.8, 0.5, 1.3)
    D = np.asarray(h - causal.log_ratio_matrix(y, 1.3))
    for i in range(T):
        for j in range(T):
            a = max(i, j)
            np.testing.assert_allclose(D[:, i, j], D[:, a, a], atol=1e-12)


def _log_z_direct(y, omega, Vp, beta):
    """log int N(M + B c; omega, Sigma) dc over the T constants, by linear algebra on the T(T+1)/2
    upper-triangle coordinates (variances 2V' on the diagonal, V' off it): an independent route."""
    T = omega.shape[-1]
    iu, ju = np.triu_indices(T)
    r = np.asarray(causal.log_ratio_matrix(y, beta))[iu, ju] - omega[iu, ju]
    s2 = Vp * np.where(iu == ju, 2.0, 1.0)
    B = (np.maximum(iu, ju)[:, None] == np.arange(T)[None, :]).astype(float)  # E_a in coordinates
    P = np.diag(1 / s2)
    A = B.T @ P @ B
    b = B.T @ P @ r
    quad = r @ P @ r - b @ np.linalg.solve(A, b)
    n = len(r)
    return (-(n - T) / 2 * math.log(2 * math.pi) - 0.5 * np.sum(np.log(s2))
            - 0.5 * np.linalg.slogdet(A)[1] - 0.5 * quad)


@pytest.mark.parametrize("T", [2, 3, 4])
def test_log_partition_is_the_gaussian_integral(key, T):
    omega, _, y = _draw(key, 4, T, 0.7, 0.6, 0.9)
    Vp = 0.45
    got = np.asarray(aim.log_partition("causal_softmax", y, omega, 0.4, beta=0.9, noise=0.1))
    for i in range(4):
        assert got[i] == pytest.approx(_log_z_direct(np.asarray(y[i]), np.asarray(omega[i]), Vp, 0.9),
                                       abs=1e-11)


@pytest.mark.parametrize("T", [2, 3, 4])
def test_score_is_the_symmetric_gradient(key, T):
    omega, _, y = _draw(key, 6, T, 0.7, 0.6, 1.3)
    G = aim.output_score("causal_softmax", y, omega, 0.5, beta=1.3, noise=0.2)
    Ga = aim.symmetric_gradient(
        lambda w: aim.log_partition("causal_softmax", y, w, 0.5, beta=1.3, noise=0.2).sum(), omega)
    np.testing.assert_allclose(G, Ga, atol=1e-12)
    # the measured directions: the score is orthogonal to every E_a
    idx = np.maximum.outer(np.arange(T), np.arange(T))
    for a in range(T):
        np.testing.assert_allclose(np.sum(np.where(idx == a, np.asarray(G), 0.0), axis=(-1, -2)), 0, atol=1e-12)


@pytest.mark.parametrize("T", [2, 3, 4])
def test_state_evolution_is_the_softmax_at_rescaled_alpha(T):
    alpha = np.array([0.02, 0.05, 0.1, 0.2, 0.4, 0.8])
    r = T * (T - 1) / (T * T + T - 2)
    for rho, noise, beta in ((0.5, 0.0, 1.0), (0.2, 0.1, 3.0), (1.0, 0.0, 0.5)):
        c = aim.solve_state_evolution(alpha, rho, T, channel="causal_softmax", noise=noise, beta=beta)
        s = aim.solve_state_evolution(alpha * r, rho, T, channel="softmax", noise=noise, beta=beta)
        np.testing.assert_allclose(c.mmse, s.mmse, atol=1e-12)
        assert np.all(c.mmse[alpha >= dof_fraction(rho) / (T * (T - 1))] == 0) or noise > 0
    # threshold and counting
    assert aim.perfect_recovery_threshold(0.5, T, channel="causal_softmax") == pytest.approx(
        dof_fraction(0.5) / (T * (T - 1)), rel=1e-12)
    assert aim.perfect_recovery_threshold(0.5, T, channel="causal_softmax", noise=0.1) is None
    assert alpha_scale(T, "causal") == T * (T - 1)


@pytest.mark.slow
def test_label_error_T2_quadrature_against_monte_carlo():
    """T = 2 quadrature (half the softmax's) against the Monte Carlo estimator over 6 seeds."""
    q, rho = 0.9, 0.5
    quad = aim.label_space_error(q, rho, 2, channel="causal_softmax", beta=2.0)
    mc = np.array([float(causal._label_mc_jit(jax.random.key(s), q, 1 + rho - q, 2, 2.0, 512)) for s in range(6)])
    assert abs(mc.mean() - quad) < 4 * mc.std(ddof=1) / math.sqrt(6)
    soft = aim.label_space_error(q, rho, 2, channel="softmax", beta=2.0)
    assert quad == pytest.approx(soft / 2, rel=1e-14)
    v = aim.label_space_error(q, rho, 3, channel="causal_softmax", key=jax.random.key(0), n_samples=4096)
    assert 0 < v < 3
    with pytest.raises(ValueError, match="key"):
        aim.label_space_error(q, rho, 3, channel="causal_softmax")


@pytest.mark.slow
def test_sampler_and_gamp_rie_run(key):
    S = aim.sample_teacher(jax.random.key(1), 16, 0.5)
    X, y = aim.sample_data(jax.random.key(2), S, n=60, T=3, channel="causal_softmax", beta=1.0)
    y = np.asarray(y)
    assert np.all(np.triu(y[0], 1) == 0) and np.allclose(y.sum(-1), 1)
    res = aim.gamp_rie(X, y, 0.5, channel="causal_softmax", key=jax.random.key(3), S_true=S, max_iter=5)
    assert np.isfinite(res.history.error[-1])


def test_hostile_inputs():
    T = 3
    w = np.zeros((T, T))
    y = np.asarray(causal.causal_softmax(jnp.zeros((T, T))))
    aim.output_score("causal_softmax", y, w, 1.0)
    up = y.copy()
    up[0, 2] = 1e-3
    with pytest.raises(ValueError, match="y must be causal-softmax outputs: 0 above the diagonal"):
        aim.output_score("causal_softmax", up, w, 1.0)
    neg = y.copy()
    neg[2, 0], neg[2, 1] = -0.1, y[2, 1] + 0.1 + y[2, 0]
    with pytest.raises(ValueError, match="negative"):
        aim.log_partition("causal_softmax", neg, w, 1.0)
    zero = y.copy()
    zero[1] = [1.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="exactly 0"):
        aim.output_score("causal_softmax", zero, w, 1.0)
    half = y * 0.5
    with pytest.raises(ValueError, match="y"):
        aim.output_score("causal_softmax", half, w, 1.0)
    with pytest.raises(ValueError, match="log_outputs"):
        aim.output_score("causal_softmax", y, w, 1.0, log_outputs=True)
    with pytest.raises(ValueError, match="T must be"):
        aim.output_score("causal_softmax", np.ones((1, 1)), np.zeros((1, 1)), 1.0)
    with pytest.raises(ValueError, match="beta"):
        aim.solve_state_evolution(0.1, 0.5, 2, channel="causal_softmax", beta=0.0)
    with pytest.raises(ValueError, match="kind must be"):
        alpha_scale(3, "masked")
