"""Tests of aim_tutorial.channels: scores are gradients of log Z_out, closed forms, tails, Nishimori."""

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, stats
from scipy.stats import multivariate_normal

import aim_tutorial as aim
from aim_tutorial import channels as ch


def _sample(key, n, T, q, V):
    k1, k2 = jax.random.split(key)
    omega = math.sqrt(q) * ch.symmetric_gaussian(k1, (n, T, T))
    h = omega + math.sqrt(V) * ch.symmetric_gaussian(k2, (n, T, T))
    return omega, h


def test_symmetric_gaussian_variances(key):
    z = ch.symmetric_gaussian(key, (200_000, 3, 3))
    var = np.asarray(jnp.var(z, axis=0))
    # Var zeta_aa = 2, Var zeta_ab = 1; MC error ~ 2 sqrt(2/n) ~ 0.006
    np.testing.assert_allclose(np.diag(var), 2.0, atol=0.03)
    np.testing.assert_allclose(var[0, 1], 1.0, atol=0.02)
    np.testing.assert_array_equal(np.asarray(z), np.asarray(jnp.swapaxes(z, -1, -2)))


@pytest.mark.parametrize("T", [2, 3, 4])
def test_linear_score_closed_form_and_gradient(key, T):
    omega, h = _sample(key, 8, T, 0.7, 0.4)
    G = aim.output_score("linear", h, omega, 0.4, noise=0.2)
    np.testing.assert_allclose(G, (h - omega) / (2 * 0.5), rtol=1e-13)
    Ga = aim.symmetric_gradient(lambda w: aim.log_partition("linear", h, w, 0.4, noise=0.2).sum(), omega)
    np.testing.assert_allclose(G, Ga, atol=1e-12)


def test_linear_log_partition_is_normalised():
    # Z_out integrates to one over the T(T+1)/2 = 3 upper entries (T = 2); Gauss-Hermite is exact
    x, w = np.polynomial.hermite_e.hermegauss(20)
    w = w / w.sum()
    V = 0.3
    omega = np.array([[0.2, -0.1], [-0.1, 0.5]])
    s = np.sqrt([2 * V, V, 2 * V])  # proposal N(omega, diag(s^2)) = the density itself
    A, B, C = np.meshgrid(x, x, x, indexing="ij")
    ys = np.empty(A.shape + (2, 2))
    ys[..., 0, 0] = omega[0, 0] + s[0] * A
    ys[..., 1, 1] = omega[1, 1] + s[2] * C
    ys[..., 0, 1] = ys[..., 1, 0] = omega[0, 1] + s[1] * B
    lz = np.asarray(aim.log_partition("linear", ys, np.broadcast_to(omega, ys.shape), V))
    logprop = -0.5 * (A**2 + B**2 + C**2) - 1.5 * math.log(2 * math.pi) - np.log(s).sum()
    W = w[:, None, None] * w[None, :, None] * w[None, None, :]
    assert abs(np.sum(W * np.exp(lz - logprop)) - 1) < 1e-12


@pytest.mark.parametrize("T", [2, 3, 5])
def test_softmax_score_is_gradient_and_beta_free(key, T):
    omega, h = _sample(key, 6, T, 0.5, 0.3)
    Gs = []
    for beta in (0.3, 1.0, 7.0):
        y = aim.softmax(h, beta)
        G = aim.output_score("softmax", y, omega, 0.3, beta=beta)
        Ga = aim.symmetric_gradient(lambda w: aim.log_partition("softmax", y, w, 0.3, beta=beta).sum(), omega)
        np.testing.assert_allclose(G, Ga, atol=1e-10)
        Gs.append(np.asarray(G))
    # the measured combinations of h do not depend on beta
    np.testing.assert_allclose(Gs[0], Gs[2], atol=1e-9)
    # closed form: the projection of (h - omega)/(2V) orthogonal to 11^T
    R = (h - omega) / 0.6
    np.testing.assert_allclose(Gs[1], R - R.mean(axis=(-1, -2), keepdims=True), atol=1e-10)
    np.testing.assert_allclose(np.sum(Gs[1], axis=(-1, -2)), 0.0, atol=1e-10)


def test_softmax_tiny_probabilities_and_noise(key):
    # beta h ~ 600: probabilities down to e^-1200 underflow a quotient of probabilities; logits do not
    omega, h = _sample(key, 4, 3, 0.5, 0.3)
    beta = 200.0
    logits = jax.nn.log_softmax(beta * h, axis=-1)
    y = jnp.exp(logits)
    assert float(jnp.min(y)) < 1e-30
    G = aim.output_score("softmax", y, omega, 0.3, beta=beta, noise=0.4)
    R = (h - omega) / (2 * (0.3 + 0.2))
    ok = np.asarray(jnp.min(y, axis=(-1, -2)) > 0)
    np.testing.assert_allclose(np.asarray(G)[ok], np.asarray(R - R.mean(axis=(-1, -2), keepdims=True))[ok],
                               atol=1e-8)


@pytest.mark.slow
def test_log_phi2_against_scipy_and_tails():
    for c in (1 / 3, -1 / 3):
        for k1, k2 in [(0.0, 0.0), (1.2, -0.7), (-2.5, -1.5), (3.0, 0.5)]:
            ref = multivariate_normal(mean=[0, 0], cov=[[1, c], [c, 1]]).cdf([k1, k2])
            val = float(ch.hardmax._log_phi2(jnp.array(k1), jnp.array(k2), jnp.array(c)))
            assert abs(val - math.log(ref)) < 1e-6  # scipy's cdf is accurate to ~1e-8 absolute
        # tails: Phi2 -> Phi(k1) when k2 -> +inf, in log space far below float range
        for k1 in (-40.0, -400.0, -4000.0):
            val = float(ch.hardmax._log_phi2(jnp.array(k1), jnp.array(60.0 - k1), jnp.array(c)))  # k2 - c k1 >> 0
            ref = float(jax.scipy.special.log_ndtr(k1))
            assert abs(val - ref) < 1e-9 * abs(ref)
    # both arguments deep in the tail, negative correlation: finite and below the product bound
    v = float(ch.hardmax._log_phi2(jnp.array(-50.0), jnp.array(-60.0), jnp.array(-1 / 3)))
    assert np.isfinite(v) and v < float(jax.scipy.special.log_ndtr(-50.0) + jax.scipy.special.log_ndtr(-60.0))


def test_log_phi2_derivatives_are_the_closed_forms():
    """The custom JVP of log Phi_2 (d/dk1 = phi(k1) Phi((k2 - c k1)/s) / Phi_2, d/dc = phi_2 / Phi_2)
    against central differences of the quadrature itself, in the interior and both tails, both
    correlations: a wrong closed form (a sign, k1 for k2, s for s^2) fails by far more than the
    differences' error (measured below 3e-8 relative at h = 1e-5)."""
    f = ch.hardmax._log_phi2
    h = 1e-5
    for c in (1 / 3, -1 / 3):
        for k1, k2 in [(0.0, 0.0), (1.2, -0.7), (-2.5, -1.5), (3.0, 0.5), (-8.0, 2.0), (4.0, -9.0)]:
            args = [jnp.asarray(k1), jnp.asarray(k2), jnp.asarray(c)]
            grad = jax.grad(lambda a, b, cc: f(a, b, cc), argnums=(0, 1, 2))(*args)
            for i in range(3):
                up = [a + h if j == i else a for j, a in enumerate(args)]
                dn = [a - h if j == i else a for j, a in enumerate(args)]
                fd = (float(f(*up)) - float(f(*dn))) / (2 * h)
                assert float(grad[i]) == pytest.approx(fd, rel=3e-6, abs=1e-9), (c, k1, k2, i)


# log Phi_2(k1, k2; c) at c = +-1/3 from mpmath: Plackett's identity in theta at 60 digits and more
_PHI2_THIRD_REFERENCE = [
    (0.0, 0.0, 1 / 3, -1.1904423419940034), (0.0, 0.0, -1 / 3, -1.6300831869797252),
    (1.2, -0.7, -1 / 3, -1.6551674049676427), (3.0, 0.5, 1 / 3, -0.3694641899374343),
    (-2.5, -1.5, 1 / 3, -6.3631874461135731), (-2.5, -1.5, -1 / 3, -10.381328872902245),
    (-0.8, -0.56, -1 / 3, -3.4903313919703745), (-30.0, -8.0, 1 / 3, -454.33784607540438),
    (6.75, -20.13, -1 / 3, -207.20549282585038), (-21.67, 32.28, 1 / 3, -238.7914356511417),
    (-8.0, -12.0, -1 / 3, -160.19685221234507), (15.0, -15.0, 1 / 3, -116.1313848457117),
]


def test_log_phi2_third_against_high_precision_and_the_quadrature():
    """The hardmax's fast log Phi_2 (c = +-1/3; Drezner-Wesolowsky where it is accurate, the
    quadrature _log_phi2 elsewhere) against mpmath at 12 points that take both ways (measured error
    at most 3.1e-14 relative to max(1, |log Phi_2|), on a point the quadrature takes), and against
    _log_phi2 at 20,000 random points up to |k| = 60: measured 5.2e-15 with both |k| <= 19, 1.3e-11
    beyond (JAX's log_ndtr below -20, which _log_phi2 uses, is off by 2e-9 at -21). A wrong sign of
    c, a lost 1/2 pi or an accuracy rule that lets a cancelling difference through fails by far
    more (the difference with cancellation allowed was 1.8e-3)."""
    hm = ch.hardmax
    third, quad, fast = (jax.jit(f) for f in (hm._log_phi2_third, hm._log_phi2, hm._log_phi2_third_fast))
    k1, k2, c, ref = (jnp.asarray(v) for v in np.array(_PHI2_THIRD_REFERENCE).T)
    val = np.asarray(third(k1, k2, c))
    np.testing.assert_array_less(np.abs(val - np.asarray(ref)) / np.maximum(1, np.abs(np.asarray(ref))), 1e-13)
    _, ok = fast(k1, k2, c)
    assert np.any(ok) and not np.all(ok)  # both ways are taken
    rng = np.random.default_rng(3)
    m = 20_000
    k = rng.uniform(-1, 1, (2, m)) * rng.choice([4.0, 12.0, 30.0, 60.0], size=(2, m))
    cc = rng.choice([1 / 3, -1 / 3], m)
    args = (jnp.asarray(k[0]), jnp.asarray(k[1]), jnp.asarray(cc))
    new, old = np.asarray(third(*args)), np.asarray(quad(*args))
    diff = np.abs(new - old) / np.maximum(1, np.abs(old))
    inner = np.all(np.abs(k) <= 19, axis=0)
    assert diff[inner].max() < 5e-14 and diff.max() < 1e-10
    assert 0.01 < np.mean(~np.asarray(fast(*args)[1])) < 0.5
    # another correlation is not taken for +-1/3: the quadrature's values
    other = (args[0][:200], args[1][:200], jnp.asarray(np.where(cc[:200] > 0, 0.25, -0.25)))
    a, b = np.asarray(third(*other)), np.asarray(quad(*other))
    assert np.max(np.abs(a - b) / np.maximum(1, np.abs(b))) < 1e-12  # rounding: 2.3e-13 measured
    # every entry to the quadrature (both k negative at c = -1/3): pass after pass of a few, the
    # same values as _log_phi2 on all at once
    kk = -np.abs(k[:, :640])
    args = (jnp.asarray(kk[0]), jnp.asarray(kk[1]), jnp.full(640, -1 / 3))
    assert not np.any(np.asarray(fast(*args)[1])[kk[0] + kk[1] < -3])
    whole = np.asarray(quad(*args))
    np.testing.assert_allclose(third(*args), whole, rtol=1e-15, atol=0)
    # under vmap, in float32, and its derivatives are those of _log_phi2 (the closed forms)
    batch = jax.jit(jax.vmap(hm._log_phi2_third))(*(a.reshape(8, 80) for a in args))
    np.testing.assert_allclose(np.asarray(batch).ravel(), whole, rtol=1e-15, atol=0)
    f32 = third(*(a.astype(jnp.float32) for a in args))
    assert f32.dtype == jnp.float32
    np.testing.assert_allclose(f32, whole, rtol=2e-6)  # measured 2.3e-7 (float32's eps: 1.2e-7)
    pts = [jnp.asarray(v) for v in ([0.3, -2.5, 4.0], [-0.2, -1.5, -9.0], [1 / 3, -1 / 3, -1 / 3])]
    g_new, g_old = (jax.jit(jax.vmap(jax.grad(lambda x, y, z, f=f: f(x, y, z), argnums=(0, 1, 2))))(*pts)
                    for f in (hm._log_phi2_third, hm._log_phi2))
    np.testing.assert_allclose(g_new, g_old, rtol=1e-12)  # measured 7.2e-15


def test_hardmax_log_partition_is_the_probability_of_the_outcome(key):
    """exp log Z_out(y | omega, V) is the probability that the hardmax of h = omega + sqrt(V) zeta is
    y, counted over 400,000 draws at three omega: catches a wrong correlation of the two row
    differences (1/3), which the identities of the likelihood with itself cannot see."""
    V, n = 0.7, 400_000
    outcomes = np.array([[[1, 0], [1, 0]], [[1, 0], [0, 1]], [[0, 1], [1, 0]], [[0, 1], [0, 1]]], float)
    for i, om in enumerate([[[0.0, 0.0], [0.0, 0.0]], [[0.4, -0.3], [-0.3, 1.1]], [[-1.0, 0.6], [0.6, 0.2]]]):
        om = np.array(om)
        zeta = ch.symmetric_gaussian(jax.random.fold_in(key, i), (n, 2, 2))
        y = np.asarray(aim.hardmax(om + math.sqrt(V) * zeta))
        freq = np.array([np.mean(np.all(y == o, axis=(-1, -2))) for o in outcomes])
        p = np.exp(np.asarray(aim.log_partition("hardmax", outcomes, np.broadcast_to(om, (4, 2, 2)), V)))
        assert p.sum() == pytest.approx(1.0, abs=1e-12)
        se = np.sqrt(p * (1 - p) / n)
        assert np.all(np.abs(freq - p) < 4 * se), (freq, p, se)


@pytest.mark.slow
def test_hardmax_exact_score_is_finite_difference_of_log_partition(key):
    omega, h = _sample(key, 400, 2, 1.5, 0.2)
    y = aim.hardmax(h)
    V = 0.2
    G = np.asarray(aim.output_score("hardmax", y, omega, V))
    Gp = np.asarray(aim.output_score("hardmax", y, omega, V, score="published"))
    eps = 1e-5
    for (a, b) in [(0, 0), (1, 1), (0, 1)]:
        E = np.zeros((2, 2))
        E[a, b] = E[b, a] = 1.0
        fd = (aim.log_partition("hardmax", y, omega + eps * E, V)
              - aim.log_partition("hardmax", y, omega - eps * E, V)) / (2 * eps)
        target = G[:, a, b] * (1 if a == b else 2)  # g_ab = 2 Gamma_ab off the diagonal
        np.testing.assert_allclose(fd, target, atol=1e-6 * (1 + np.abs(target).max()))
        # the published expression is not this derivative
        pub = Gp[:, a, b] * (1 if a == b else 2)
        assert np.max(np.abs(np.asarray(fd) - pub)) > 0.1
    # and autodiff agrees
    Ga = aim.symmetric_gradient(lambda w: aim.log_partition("hardmax", y, w, V).sum(), jnp.asarray(omega))
    np.testing.assert_allclose(G, Ga, atol=1e-9)


def test_hardmax_score_and_log_partition_over_two_batch_axes(key):
    """Samples on two leading axes (3 x 4) give, entry for entry, what the same 12 samples on
    one axis give: the score's rows are stacked on the last axis, not on axis 1 (which is the
    last one only for a single batch axis)."""
    k1, k2 = jax.random.split(key)
    y = aim.hardmax(jax.random.normal(k1, (3, 4, 2, 2)))
    omega = ch.symmetric_gaussian(k2, (3, 4, 2, 2))
    G = aim.output_score("hardmax", y, omega, 0.3)
    flat = aim.output_score("hardmax", y.reshape(12, 2, 2), omega.reshape(12, 2, 2), 0.3)
    assert G.shape == (3, 4, 2, 2)
    np.testing.assert_array_equal(np.asarray(G).reshape(12, 2, 2), flat)
    L = aim.log_partition("hardmax", y, omega, 0.3)
    np.testing.assert_array_equal(np.asarray(L).ravel(), aim.log_partition("hardmax", y.reshape(12, 2, 2),
                                                                            omega.reshape(12, 2, 2), 0.3))


def test_hardmax_moments_between_their_large_t_nodes_and_as_floats():
    """At large t = q / V' both G(t) tables follow a power law: between the last 12 nodes of the
    table, G at the geometric midpoint is the geometric mean of its neighbours to 9e-11 (published)
    and 7.4e-9 (exact) as measured; interpolating G itself instead of log G (a slip of the
    table's log_values flag) is off by 8e-5 there. Scalars come back as Python floats."""
    hm = ch.hardmax
    t = hm._HM_T_LARGE[-12:]
    mid = np.sqrt(t[:-1] * t[1:])
    for score in ("exact", "published"):
        G = np.asarray(hm.hardmax_score_moment(mid, score))
        ends = np.sqrt(np.asarray(hm.hardmax_score_moment(t[:-1], score)) * hm.hardmax_score_moment(t[1:], score))
        np.testing.assert_allclose(G, ends, rtol=1e-7, atol=0)
    assert type(hm.hardmax_score_moment(0.3)) is float and type(hm.hardmax_expected_log_partition(0.3)) is float


def test_hardmax_score_finite_in_extreme_tails(key):
    omega, h = _sample(key, 500, 2, 1.0, 1.0)
    y = aim.hardmax(h)
    # confident and often wrong: omega 1000 times larger, V tiny
    G = aim.output_score("hardmax", y, 1000 * omega, 1e-4)
    assert bool(jnp.all(jnp.isfinite(G)))


def _phi2_reference(k1, k2, c):
    """``phi_2(k1, k2; c)`` and ``Phi_2(k1, k2; c)`` from SciPy: the density in closed form, the CDF as
    ``int_{-inf}^{k1} phi(x) Phi((k2 - c x)/s) dx`` by adaptive quadrature (relative error ~1e-13)."""
    s = math.sqrt(1 - c * c)
    pdf = math.exp(-(k1 * k1 - 2 * c * k1 * k2 + k2 * k2) / (2 * s * s)) / (2 * math.pi * s)
    cdf, _ = integrate.quad(lambda x: stats.norm.pdf(x) * stats.norm.cdf((k2 - c * x) / s), -np.inf, k1,
                            epsabs=0, epsrel=1e-13, limit=200)
    return pdf, cdf


def test_hardmax_scores_against_scipy_at_every_outcome():
    """Both hardmax scores entry by entry against SciPy, for the four outcomes y at three omega, at
    V = 0.2 (r = sqrt(3 V) != 1, so a missing or inverted 1/r shows): the exact score is
    Gamma_aa = s_a d_a / r, Gamma_12 = -(s_1 d_1 + s_2 d_2) / (2 r) with d_1 = phi(k1) Phi((k2 - c k1)/s)
    / Phi_2; the published one puts phi_2 / Phi_2 in place of both d_a. k_a = s_a (omega_aa - omega_12) / r,
    c = s_1 s_2 / 3. Measured agreement 5e-15 relative; the tolerance 1e-12 is the SciPy quadrature's
    requested error (1e-13) with margin. An error in the off-diagonal entry changes it by O(1)."""
    V = 0.2
    r = math.sqrt(3 * V)
    outcomes = np.array([[[1, 0], [1, 0]], [[1, 0], [0, 1]], [[0, 1], [1, 0]], [[0, 1], [0, 1]]], float)
    for om in ([[0.3, -0.2], [-0.2, 0.5]], [[-0.4, 0.6], [0.6, 0.1]], [[1.1, 0.0], [0.0, -0.7]]):
        om = np.array(om)
        omega = np.broadcast_to(om, (4, 2, 2))
        G = np.asarray(aim.output_score("hardmax", outcomes, omega, V))
        Gp = np.asarray(aim.output_score("hardmax", outcomes, omega, V, score="published"))
        for i, y in enumerate(outcomes):
            s1, s2 = (1.0 if y[0, 0] else -1.0), (1.0 if y[1, 1] else -1.0)
            k1, k2, c = s1 * (om[0, 0] - om[0, 1]) / r, s2 * (om[1, 1] - om[0, 1]) / r, s1 * s2 / 3
            sq = math.sqrt(1 - c * c)
            pdf, cdf = _phi2_reference(k1, k2, c)
            d1 = stats.norm.pdf(k1) * stats.norm.cdf((k2 - c * k1) / sq) / cdf
            d2 = stats.norm.pdf(k2) * stats.norm.cdf((k1 - c * k2) / sq) / cdf
            dp = pdf / cdf
            want = np.array([[s1 * d1, -(s1 * d1 + s2 * d2) / 2], [-(s1 * d1 + s2 * d2) / 2, s2 * d2]]) / r
            want_p = np.array([[s1 * dp, -(s1 + s2) * dp / 2], [-(s1 + s2) * dp / 2, s2 * dp]]) / r
            np.testing.assert_allclose(G[i], want, rtol=1e-12, atol=1e-15, err_msg=f"exact {om} {y}")
            np.testing.assert_allclose(Gp[i], want_p, rtol=1e-12, atol=1e-15, err_msg=f"published {om} {y}")


def test_hardmax_channel_callables_take_numpy_arrays():
    """The registered Channel object is public (``channels.get("hardmax")``) and its ``score`` and
    ``log_partition`` may be called directly, outside the jitted front end, on NumPy arrays of shape
    (..., 2, 2): they read s_a from y[a, a] and must agree with output_score / log_partition for the four
    outcomes, both scores (same arithmetic, eager instead of jitted: measured 7e-16 relative; 1e-13 allows
    for rounding)."""
    hm = ch.get("hardmax")
    V = 0.35
    outcomes = np.array([[[1, 0], [1, 0]], [[1, 0], [0, 1]], [[0, 1], [1, 0]], [[0, 1], [0, 1]]], float)
    omega = np.broadcast_to(np.array([[0.2, -0.5], [-0.5, 0.9]]), (4, 2, 2)).copy()
    for score in ("exact", "published"):
        G = np.asarray(hm.score(outcomes, omega, V, 1.0, score))
        np.testing.assert_allclose(G, np.asarray(aim.output_score("hardmax", outcomes, omega, V, score=score)),
                                   rtol=1e-13, atol=1e-15)
    lz = np.asarray(hm.log_partition(outcomes, omega, V, 1.0))
    np.testing.assert_allclose(lz, np.asarray(aim.log_partition("hardmax", outcomes, omega, V)), rtol=1e-13)
    assert np.exp(lz).sum() == pytest.approx(1.0, abs=1e-12)  # the four outcomes exhaust the probability


@pytest.mark.slow
def test_nishimori_identity_exact_vs_published(key):
    """E[g g] = -E[dg/domega] on the Nishimori line: holds for the score, fails for the published one."""
    q, V, n = 0.5, 0.6, 100_000
    omega, h = _sample(key, n, 2, q, V)
    y = aim.hardmax(h)
    out = {}
    for score in ("exact", "published"):
        G = aim.output_score("hardmax", y, omega, V, score=score)
        lhs = G[:, 0, 0] ** 2
        d = jax.grad(lambda w: aim.output_score("hardmax", y, w, V, score=score)[:, 0, 0].sum())(omega)
        rhs = -d[:, 0, 0]
        diff = lhs - rhs
        out[score] = (float(jnp.mean(diff)), float(jnp.std(diff)) / math.sqrt(n))
    m, se = out["exact"]
    assert abs(m) < 4 * se
    m, se = out["published"]
    assert abs(m) > 10 * se


@pytest.mark.slow
def test_generic_score_matches_linear_with_noise(key):
    # g = identity, iid noise on all T^2 entries of y: same as noise on h (diag s2, off s2/2)
    k1, k2, k3 = jax.random.split(key, 3)
    V, s2 = 0.4, 0.3
    omega, h = _sample(k1, 16, 2, 0.5, V)
    y = h + math.sqrt(s2) * jax.random.normal(k2, h.shape)
    res = aim.generic_output_score(k3, lambda x: x, y, omega, V, label_noise=s2, n_samples=200_000)
    ysym = (y + jnp.swapaxes(y, -1, -2)) / 2
    exact = aim.output_score("linear", ysym, omega, V, noise=s2)
    # MC error of the posterior mean: ~ sqrt(V / ESS) / (2V), ESS ~ 1e4
    np.testing.assert_allclose(res.score, exact, atol=0.05)
    assert float(jnp.min(res.ess)) > 1000
    lz = aim.log_partition("linear", ysym, omega, V, noise=s2)
    # log Z of the generic channel includes the density of the antisymmetric part of the noise
    anti = (y - jnp.swapaxes(y, -1, -2)) / 2
    extra = -jnp.sum(anti ** 2, axis=(-1, -2)) / (2 * s2) - 0.5 * math.log(math.pi * s2) - math.log(2)
    # log-mean-exp error ~ 1/sqrt(ESS) <= 0.03: 3 sigma
    np.testing.assert_allclose(res.log_partition, lz + extra, atol=0.1)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(channel="nope"),
        dict(V=0.0),
        dict(V=-1.0),
        dict(noise=-0.1),
        dict(beta=0.0),
        dict(score="wrong"),
        dict(score="published"),  # published is a hardmax switch
        dict(y=np.zeros((3, 2, 2))),
    ],
)
def test_invalid_arguments(kwargs):
    args = dict(channel="softmax", y=np.full((4, 2, 2), 0.5), omega=np.zeros((4, 2, 2)), V=0.5)
    args.update(kwargs)
    channel, y, omega, V = args.pop("channel"), args.pop("y"), args.pop("omega"), args.pop("V")
    with pytest.raises(ValueError):
        aim.output_score(channel, y, omega, V, **args)


def test_hardmax_needs_T2():
    with pytest.raises(ValueError, match="T must be 2"):
        aim.output_score("hardmax", np.eye(3), np.zeros((3, 3)), 1.0)


@pytest.mark.slow
def test_nishimori_identity_exactly_at_every_omega(key):
    """Summing over the four hardmax outputs: sum_y Z_out (g^2 + dg/domega) = 0 at every omega (no sampling)."""
    omega = 1.2 * ch.symmetric_gaussian(key, (500, 2, 2))
    V = 0.4
    labels = [np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([[1.0, 0.0], [1.0, 0.0]]),
              np.array([[0.0, 1.0], [0.0, 1.0]]), np.array([[0.0, 1.0], [1.0, 0.0]])]
    for score, small in (("exact", True), ("published", False)):
        for (a, b) in [(0, 0), (0, 1)]:
            tot = 0.0
            norm = 0.0
            for lab in labels:
                y = jnp.broadcast_to(jnp.asarray(lab), omega.shape)
                Z = jnp.exp(aim.log_partition("hardmax", y, omega, V))
                g = aim.output_score("hardmax", y, omega, V, score=score)[:, a, b]
                dg = jax.grad(lambda w: aim.output_score("hardmax", y, w, V, score=score)[:, a, b].sum())(omega)
                dg = dg[:, a, b] if a == b else dg[:, a, b] + dg[:, b, a]  # derivative along E_ab + E_ba
                mult = 1.0 if a == b else 2.0  # g_ab = 2 Gamma_ab, omega_ab enters twice
                tot = tot + Z * (mult * g) ** 2 + Z * mult * dg
                norm = norm + Z
            np.testing.assert_allclose(norm, 1.0, atol=1e-12)  # Z_out is a distribution over y
            worst = float(jnp.max(jnp.abs(tot)))
            assert (worst < 1e-9) if small else (worst > 1e-2)


# --------------------------------------------------------------------------- issue 17: hostile inputs


def test_softmax_log_outputs_match_probabilities_and_survive_underflow(key):
    """The softmax score from log-probabilities: bit-identical to the score from probabilities when none
    is 0; at beta = 1e4, where the probabilities underflow to exact zeros, finite and equal to the score
    at beta = 1 (it does not depend on beta); probabilities with zeros are refused, saying what to do."""
    omega, h = _sample(key, 6, 3, 0.5, 0.3)
    y = aim.softmax(h, 2.0)
    logy = jax.nn.log_softmax(2.0 * h, axis=-1)
    assert float(jnp.min(y)) > 0
    for fn in (aim.output_score, aim.log_partition):
        a = fn("softmax", y, omega, 0.3, beta=2.0, noise=0.1)
        b = fn("softmax", jnp.log(y), omega, 0.3, beta=2.0, noise=0.1, log_outputs=True)
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))  # same arithmetic, same bits
        big = fn("softmax", jax.nn.log_softmax(1e4 * h, axis=-1), omega, 0.3, beta=1e4, noise=0.1, log_outputs=True)
        one = fn("softmax", logy, omega, 0.3, beta=2.0, noise=0.1, log_outputs=True)
        assert bool(jnp.all(jnp.isfinite(big)))
        np.testing.assert_allclose(big, one, rtol=1e-9, atol=1e-9)
    y_big = aim.softmax(h, 1e4)
    assert float(jnp.min(y_big)) == 0.0
    with pytest.raises(ValueError, match=r"exactly 0.*log_outputs=True"):
        aim.output_score("softmax", y_big, omega, 0.3, beta=1e4)
    with pytest.raises(ValueError, match="log_outputs"):
        aim.log_partition("linear", h, omega, 0.3, log_outputs=True)


def _bad_y(name, y):
    y = np.array(y)
    if name == "softmax":
        y[0, 0, :2] = [1.1, -0.1]  # a negative probability, the row still sums to 1
    elif name == "hardmax":
        y[0, 0] = [0.5, 0.5]
    elif name == "relu":
        y[0, 0, 0] = -0.1
    elif name == "sigmoid":
        y[0, 0, 0] = 1.5
    else:  # linear: y = h is symmetric
        y[0, 0, 1] += 1.0
    return y


@pytest.mark.parametrize("name", ["softmax", "hardmax", "linear", "relu", "sigmoid"])
def test_output_score_refuses_invalid_inputs(key, name):
    """Issue 17: negative softmax y, non-symmetric omega, hardmax y that is not one-hot, relu y < 0, sigmoid
    y > 1, non-symmetric linear y, NaN, inf, V' <= 0, bad shapes: a ValueError naming the argument."""
    T = 2 if name == "hardmax" else 3
    omega, h = _sample(key, 4, T, 0.5, 0.3)
    y = np.asarray(ch.get(name).output(h, 1.0))
    omega = np.asarray(omega)
    nan_omega = omega.copy()
    nan_omega[1, 0, 0] = np.nan
    asym = omega.copy()
    asym[1, 0, 1] += 0.5
    inf_y = y.copy()
    inf_y[2, 1, 1] = np.inf
    cases = [
        (dict(y=_bad_y(name, y)), "y"), (dict(y=inf_y), "y"), (dict(y=y[:3]), "y"), (dict(y=y + 0j), "y"),
        (dict(omega=nan_omega), "omega"), (dict(omega=asym), "omega"), (dict(omega=omega[..., :1]), "omega"),
        (dict(V=0.0), "V"), (dict(V=-0.5), "V"), (dict(V=np.inf), "V"), (dict(V="1"), "V"),
        (dict(noise=-0.1), "noise"), (dict(beta=np.nan), "beta"), (dict(log_outputs="yes"), "log_outputs"),
    ]
    for fn in (aim.output_score, aim.log_partition):
        args = dict(y=y, omega=omega, V=0.3)
        fn(name, **args)  # the valid call
        for bad, arg in cases:
            with pytest.raises(ValueError, match=rf"(?<![\w.]){arg}(?!\w)"):
                fn(name, **{**args, **bad})


def test_public_helpers_check_their_arguments(key):
    """Issue 17: symmetric_gaussian, symmetric_gradient, prior_input, generic_output_score and the hardmax
    tables refuse bad arguments with an error naming them (they failed deep inside JAX or returned NaN)."""
    bad = [
        (lambda: ch.symmetric_gaussian(0, (3, 2, 2)), "key"),
        (lambda: ch.symmetric_gaussian(key, (3, 2, 3)), "shape"),
        (lambda: ch.symmetric_gaussian(key, 4), "shape"),
        (lambda: ch.symmetric_gaussian(key, (3, 2.0, 2)), r"shape\[1\]"),
        (lambda: ch.symmetric_gaussian(key, (-1, 2, 2)), r"shape\[0\]"),
        (lambda: aim.symmetric_gradient(3.0, np.zeros((2, 2))), "f"),
        (lambda: aim.symmetric_gradient(jnp.sum, np.zeros((2, 3))), "omega"),
        (lambda: aim.symmetric_gradient(jnp.sum, np.full((2, 2), np.nan)), "omega"),
        (lambda: aim.prior_input(np.zeros((4, 2, 5)), np.zeros((4, 3, 3))), "Gamma"),
        (lambda: aim.prior_input(np.zeros((4, 5)), np.zeros((4, 2, 2))), "X"),
        (lambda: aim.prior_input(np.full((4, 2, 5), np.inf), np.zeros((4, 2, 2))), "X"),
        (lambda: aim.generic_output_score(key, "g", np.zeros((2, 2)), np.zeros((2, 2)), 1.0, label_noise=0.1), "g"),
        (lambda: aim.generic_output_score(key, jnp.tanh, np.zeros((2, 2)), np.array([[0, 1], [0, 0.]]), 1.0,
                                          label_noise=0.1), "omega"),
        (lambda: aim.generic_output_score(None, jnp.tanh, np.zeros((2, 2)), np.zeros((2, 2)), 1.0,
                                          label_noise=0.1), "key"),
        (lambda: ch.hardmax.hardmax_score_moment(-1.0), "t"),
        (lambda: ch.hardmax.hardmax_expected_log_partition(np.nan), "t"),
        (lambda: ch.elementwise.analyse(jnp.tanh, x_max=-1.0), "x_max"),
        (lambda: ch.elementwise.flat_probability(ch.get("relu").structure(2, 1.0), 0.0), "var"),
    ]
    for call, arg in bad:
        with pytest.raises(ValueError, match=rf"(?<![\w.]){arg}"):
            call()
    z = ch.symmetric_gaussian(key, (3, 2, 2))
    assert z.shape == (3, 2, 2) and bool(jnp.all(z == jnp.swapaxes(z, -1, -2)))


# Hypothesis: valid generated inputs give finite results; invalid ones a ValueError/TypeError naming the argument
from hypothesis import given, settings, HealthCheck  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_N_H = 3  # one shape a channel: one compilation


def _inputs(draw, name):
    T = 2 if name == "hardmax" else 3
    f = st.floats(-3.0, 3.0, allow_nan=False)
    w = np.array(draw(st.lists(f, min_size=_N_H * T * T, max_size=_N_H * T * T))).reshape(_N_H, T, T)
    z = np.array(draw(st.lists(f, min_size=_N_H * T * T, max_size=_N_H * T * T))).reshape(_N_H, T, T)
    scale = draw(st.floats(0.0, 3.0))
    V = 10.0 ** draw(st.floats(-3.0, 2.0))
    beta = 10.0 ** draw(st.floats(-1.0, 1.0))
    noise = draw(st.sampled_from([0.0, 0.01, 0.5, 3.0]))
    omega = scale * (w + np.swapaxes(w, -1, -2)) / 2
    h = omega + math.sqrt(V) * (z + np.swapaxes(z, -1, -2)) / math.sqrt(2)
    return h, omega, V, beta, noise


@pytest.mark.parametrize("name", ["softmax", "hardmax", "linear", "relu", "sigmoid"])
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_property_valid_inputs_give_finite_score_and_log_partition(name, data):
    h, omega, V, beta, noise = _inputs(data.draw, name)
    chan = ch.get(name)
    kw = dict(beta=beta, noise=noise)
    if name == "softmax":
        logy = np.asarray(jax.nn.log_softmax(beta * jnp.asarray(h), axis=-1))
        outs = [aim.output_score(name, logy, omega, V, log_outputs=True, **kw),
                aim.log_partition(name, logy, omega, V, log_outputs=True, **kw)]
        y = np.exp(logy)
        if np.min(y) == 0:  # underflow: refused, not NaN
            with pytest.raises(ValueError, match="log_outputs"):
                aim.output_score(name, y, omega, V, **kw)
            y = None
    else:
        y = np.asarray(chan.output(jnp.asarray(h), beta))
        outs = []
    if y is not None:
        outs += [aim.output_score(name, y, omega, V, **kw), aim.log_partition(name, y, omega, V, **kw)]
    for out in outs:
        assert bool(jnp.all(jnp.isfinite(out))), (name, out)


_MUTATIONS = ["omega_asym", "omega_nan", "y_nan", "y_inf", "y_shape", "y_channel", "V", "noise", "beta"]


@pytest.mark.parametrize("name", ["softmax", "hardmax", "linear", "relu", "sigmoid"])
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_property_invalid_inputs_are_refused_by_name(name, data):
    h, omega, V, beta, noise = _inputs(data.draw, name)
    y = np.asarray(ch.get(name).output(jnp.asarray(h), beta))
    if name == "softmax":
        y = np.maximum(y, 1e-300)  # exact zeros are refused too; this property is about the others
        y = y / y.sum(axis=-1, keepdims=True)
    kw = dict(y=y, omega=omega, V=V, beta=beta, noise=noise)
    what = data.draw(st.sampled_from(_MUTATIONS))
    i = data.draw(st.integers(0, _N_H - 1))
    arg = what.split("_")[0]
    kw["omega"], kw["y"] = omega.copy(), y.copy()
    if what == "omega_asym":
        kw["omega"][i, 0, 1] += data.draw(st.sampled_from([1e-3, -1.0, 100.0]))
    elif what == "omega_nan":
        kw["omega"][i, 1, 1] = data.draw(st.sampled_from([np.nan, np.inf]))
    elif what in ("y_nan", "y_inf"):
        kw["y"][i, 1, 0] = np.nan if what == "y_nan" else -np.inf
    elif what == "y_shape":
        kw["y"] = y[..., :1]
    elif what == "y_channel":
        kw["y"] = _bad_y(name, y)
    elif what == "V":
        kw["V"] = data.draw(st.sampled_from([0.0, -V, np.nan, np.inf, None, "1"]))
    elif what == "noise":
        kw["noise"] = data.draw(st.sampled_from([-noise - 0.1, np.nan, np.inf]))
    else:
        kw["beta"] = data.draw(st.sampled_from([np.nan, np.inf] + ([0.0, -beta] if ch.get(name).uses_beta else [])))
    fn = data.draw(st.sampled_from([aim.output_score, aim.log_partition]))
    with pytest.raises((ValueError, TypeError), match=rf"(?<![\w.]){arg}(?!\w)"):
        fn(name, **kw)


# --------------------------------------------------------------------------- softmax: surviving mutants


def test_softmax_score_symmetric_for_rounded_probabilities(key):
    """Probabilities stored in single precision (rows still sum to 1 within 1e-6, so they are accepted)
    are not exactly the softmax of a symmetric h: their log-ratios give an M that is not symmetric (by
    ~5e-8). The score is a symmetric matrix all the same (Gamma_ab = g_ab / 2 over a <= b), exactly (it
    symmetrises M), and it is the symmetric gradient of log Z_out: measured agreement 1e-16; 1e-12 allows
    for rounding, far below the ~5e-8 an unsymmetrised M leaves in Gamma - Gamma^T."""
    omega, h = _sample(key, 5, 3, 0.5, 0.3)
    y = np.asarray(aim.softmax(h, 1.0)).astype(np.float32).astype(np.float64)
    y_sym = np.asarray(aim.softmax(h, 1.0))
    assert np.max(np.abs(y.sum(axis=-1) - 1)) < 1e-6 and np.max(np.abs(y - y_sym)) > 0
    G = np.asarray(aim.output_score("softmax", y, omega, 0.3))
    np.testing.assert_array_equal(G, np.swapaxes(G, -1, -2))
    Ga = aim.symmetric_gradient(lambda w: aim.log_partition("softmax", y, w, 0.3).sum(), omega)
    np.testing.assert_allclose(G, Ga, rtol=0, atol=1e-12)
    # the same holds for the log-probabilities
    Gl = np.asarray(aim.output_score("softmax", np.log(y), omega, 0.3, log_outputs=True))
    np.testing.assert_array_equal(Gl, np.swapaxes(Gl, -1, -2))


def test_softmax_any_batch_shape(key):
    """Score and log Z_out act on the last two axes, whatever the batch shape: a (2, 3) batch of T = 2
    samples, the same 6 samples as a (6,) batch, and each sample alone, shape (T, T), give the same
    values (same arithmetic, measured equal to 1e-16 relative; 1e-13 allows for rounding): catches a batch axis
    taken for T or for a token axis."""
    omega, h = _sample(key, 6, 2, 0.5, 0.3)
    y = aim.softmax(h, 1.5)
    for fn in (aim.output_score, aim.log_partition):
        flat = np.asarray(fn("softmax", y, omega, 0.3, beta=1.5))
        grid = np.asarray(fn("softmax", y.reshape(2, 3, 2, 2), omega.reshape(2, 3, 2, 2), 0.3, beta=1.5))
        np.testing.assert_allclose(grid.reshape(flat.shape), flat, rtol=1e-13, atol=1e-15)
        for i in range(6):
            one = np.asarray(fn("softmax", y[i], omega[i], 0.3, beta=1.5))
            np.testing.assert_allclose(one, flat[i], rtol=1e-13, atol=1e-15)


def test_softmax_refuses_probabilities_as_log_outputs(key):
    """Probabilities passed with log_outputs=True are refused for what they are: positive entries
    (the logs of probabilities are <= 0), with the hint to pass log_outputs=False; their rows also fail
    the log-sum-exp test, but that message would not say what went wrong."""
    omega, h = _sample(key, 4, 3, 0.5, 0.3)
    y = np.asarray(aim.softmax(h, 1.0))
    for fn in (aim.output_score, aim.log_partition):
        with pytest.raises(ValueError, match=r"y must hold log-probabilities.*positive entries.*log_outputs=False"):
            fn("softmax", y, omega, 0.3, log_outputs=True)


def test_softmax_refuses_one_hot_outputs_with_the_hardmax_hint(key):
    """Exact zeros are refused; when every row is one-hot (hardmax outputs given to the softmax), the
    message adds the hint channel='hardmax'; softmax probabilities that merely underflowed (zeros, but
    not one-hot) do not get it."""
    omega, h = _sample(key, 4, 3, 0.5, 0.3)
    one_hot = np.asarray(aim.hardmax(h))
    assert set(np.unique(one_hot)) == {0.0, 1.0}
    with pytest.raises(ValueError, match=r"y has entries exactly 0.*one-hot.*channel='hardmax'"):
        aim.output_score("softmax", one_hot, omega, 0.3)
    under = np.array(aim.softmax(h, 1.0))
    under[1, 2] = [0.0, 0.4, 0.6]  # one probability underflowed, the others did not
    with pytest.raises(ValueError, match=r"y has entries exactly 0") as info:
        aim.log_partition("softmax", under, omega, 0.3)
    assert "hardmax" not in str(info.value)


def test_softmax_label_error_vectorises_over_q():
    """label_space_error (softmax, T = 2, quadrature) over an array of overlaps equals the scalar
    calls (the outer and inner quadrature axes stay apart when q carries a batch axis; same
    arithmetic, measured equal to 1e-16, 1e-13 allows for rounding)."""
    rho = 0.5
    qs = np.array([0.0, 0.3, 0.8, 1.2])
    vec = aim.label_space_error(qs, rho, 2, channel="softmax", beta=2.0)
    one = [aim.label_space_error(float(q), rho, 2, channel="softmax", beta=2.0) for q in qs]
    np.testing.assert_allclose(vec, one, rtol=1e-13)
    assert len(set(np.round(one, 6))) == 4  # four different values, not one repeated


def test_softmax_label_error_monte_carlo_is_its_definition(key):
    """label_space_error (softmax, T = 3, Monte Carlo) with n_samples = 64 m is the unbiased estimate
    of E_omega sum_ab Var(y_ab | omega) from m draws omega = sqrt(q) zeta_1 and, for each, 64 draws
    h = omega + sqrt(V') zeta_2 (V' = Q0 - q + noise/2; zeta_1, zeta_2 from jax.random.split(key)), as
    the docstring says: the same realisation, recomputed here from the generative model (measured
    agreement 1e-16 relative, 1e-12 allows for rounding); another number of omega draws, or another
    realisation of h, changes it by the Monte Carlo error (1 % to 3 % here)."""
    rho, q, beta, noise, m, T = 0.5, 0.8, 1.5, 0.2, 8, 3
    got = aim.label_space_error(q, rho, T, channel="softmax", beta=beta, noise=noise, key=key, n_samples=64 * m)
    Vp = 1 + rho - q + noise / 2
    k1, k2 = jax.random.split(key)
    omega = math.sqrt(q) * ch.symmetric_gaussian(k1, (m, 1, T, T))
    h = omega + math.sqrt(Vp) * ch.symmetric_gaussian(k2, (m, 64, T, T))
    y = np.asarray(aim.softmax(h, beta))
    want = np.mean(np.sum(np.var(y, axis=1, ddof=1), axis=(-1, -2)))
    assert got == pytest.approx(want, rel=1e-12)


# --- the generic (Monte Carlo) channel: argument edges, the effective sample size, the state-evolution
# averages and their grid of V' / (q + V')

from aim_tutorial.channels import generic as _generic  # noqa: E402


def test_generic_output_score_argument_edges(key):
    """generic_output_score accepts the documented edges: n_samples = 2, and one (T, T) pair without a
    batch axis (shape (..., T, T) with nothing in front). It refuses n_samples = 1 and a pair of
    non-square (2, 3) arrays, each by name."""
    omega = np.array([[0.3, -0.1], [-0.1, 0.2]])
    y = np.array([[0.5, 0.0], [0.1, -0.3]])
    res = aim.generic_output_score(key, jnp.tanh, y, omega, 0.4, label_noise=0.2, n_samples=2)
    assert res.score.shape == (2, 2) and res.log_partition.shape == ()
    assert 1.0 <= float(res.ess) <= 2.0
    with pytest.raises(ValueError, match="n_samples"):
        aim.generic_output_score(key, jnp.tanh, y, omega, 0.4, label_noise=0.2, n_samples=1)
    with pytest.raises(ValueError, match=r"y and omega must have the same shape \(\.\.\., T, T\)"):
        aim.generic_output_score(key, jnp.tanh, np.zeros((2, 3)), np.zeros((2, 3)), 0.4, label_noise=0.2)


def test_generic_effective_sample_size_is_one_over_the_sum_of_squared_weights(key):
    """ess = 1 / sum_i w_i^2 of the normalised importance weights: it lies in [1, n_samples], and with a
    label noise so large that the likelihood is flat (1e8 against outputs of order 1) the weights are
    uniform to 1e-7 and ess = n_samples to that accuracy."""
    k1, k2 = jax.random.split(key)
    omega = 0.5 * ch.symmetric_gaussian(k1, (3, 2, 2))
    y = jnp.tanh(omega + 0.3 * ch.symmetric_gaussian(k2, (3, 2, 2)))
    n = 256
    flat = aim.generic_output_score(key, jnp.tanh, y, omega, 0.4, label_noise=1e8, n_samples=n)
    np.testing.assert_allclose(np.asarray(flat.ess), n, rtol=1e-6)
    sharp = aim.generic_output_score(key, jnp.tanh, y, omega, 0.4, label_noise=0.01, n_samples=n)
    assert np.all((np.asarray(sharp.ess) >= 1.0) & (np.asarray(sharp.ess) <= n))


def test_generic_moments_are_the_averages_they_document(key):
    """generic_moments(g, z_omega, z_h, z_y, zeta, q, V', noise, n_batches): omega = sqrt(q) z_omega,
    h = omega + sqrt(V') z_h, y = g(h) + sqrt(noise) z_y, then the batch means of 4 ||Gamma||_F^2 and of
    log Z_out with the score of generic_output_score's formula on the prior draws zeta. Rebuilt here
    from those definitions with the same random numbers: equal to float64 rounding (1e-12)."""
    ks = jax.random.split(key, 4)
    n, nb, T = 64, 8, 2
    z_om = ch.symmetric_gaussian(ks[0], (n, T, T))
    z_h = ch.symmetric_gaussian(ks[1], (n, T, T))
    z_y = jax.random.normal(ks[2], (n, T, T))
    zeta = ch.symmetric_gaussian(ks[3], (128, T, T))
    q, Vp, s2 = 0.7, 0.3, 0.1
    fisher, log_z, ess = _generic.generic_moments(jnp.tanh, z_om, z_h, z_y, zeta, q, Vp, s2, nb)
    omega = math.sqrt(q) * z_om
    y = jnp.tanh(omega + math.sqrt(Vp) * z_h) + math.sqrt(s2) * z_y
    ref = _generic._generic_score(jnp.tanh, y, omega, zeta, Vp, s2)
    f_ref = 4 * np.sum(np.asarray(ref.score) ** 2, axis=(-1, -2))
    assert fisher.shape == (nb,) and log_z.shape == (nb,)
    np.testing.assert_allclose(fisher, f_ref.reshape(nb, -1).mean(axis=1), rtol=1e-12)
    np.testing.assert_allclose(log_z, np.asarray(ref.log_partition).reshape(nb, -1).mean(axis=1), rtol=1e-12)
    assert float(ess) == pytest.approx(float(np.mean(np.asarray(ref.ess))), rel=1e-12)


def test_generic_channel_argument_edges():
    """generic_channel accepts its documented edges, T = 2 and n_samples = 64, and refuses T = 1 and
    n_samples = 63 by name."""
    assert aim.generic_channel(jnp.tanh, 0.1, T=2, n_samples=64, n_omega=64).name == "generic"
    with pytest.raises(ValueError, match="T"):
        aim.generic_channel(jnp.tanh, 0.1, T=1)
    with pytest.raises(ValueError, match="n_samples"):
        aim.generic_channel(jnp.tanh, 0.1, n_samples=63)


def test_generic_channel_output_on_one_matrix_and_on_batches(key):
    """The channel's noiseless output applies g to each (T, T) matrix: on one matrix without batch axes
    it is g(h), and on a batch of shape (2, 3, T, T) it is g of each."""
    c = aim.generic_channel(jnp.linalg.inv, 0.1, n_samples=64, n_omega=64)
    h = np.asarray(ch.symmetric_gaussian(key, (2, 3, 2, 2))) + 3 * np.eye(2)
    np.testing.assert_allclose(c.output(h[0, 0], 1.0), np.linalg.inv(h[0, 0]), rtol=1e-12)
    np.testing.assert_allclose(c.output(h, 1.0), np.linalg.inv(h), rtol=1e-12)


_SOFTMAX_B1 = partial(aim.softmax, beta=1.0)  # one function object: one compilation


@pytest.mark.parametrize("q, noise", [(0.4, 0.0), (1.1, 0.2)])
def test_generic_channel_error_on_the_outputs_is_the_softmax_one(key, q, noise):
    """label_space_error of the generic channel (Monte Carlo, generic_label_mc) on the softmax map at T = 2
    against the softmax channel's quadrature (1e-10): within 4 of the standard errors it reports, and
    those standard errors match the spread over 6 independent keys (ratio within [0.4, 2.5], the range of
    a 6-sample standard deviation's ratio to the true one with 99 % probability)."""
    rho = 0.5
    c = aim.generic_channel(_SOFTMAX_B1, 0.1, n_samples=64, n_omega=64)
    ref = aim.label_space_error(q, rho, 2, channel="softmax", beta=1.0, noise=noise)
    got = aim.label_space_error(q, rho, 2, channel=c, noise=noise, key=key, n_samples=64 * 4096)
    Vp = 1 + rho - q + noise / 2
    m, se = _generic.generic_label_mc(_SOFTMAX_B1, key, q, Vp, 2, 4096)
    assert got == m and abs(got - ref) < 4 * se, (got, ref, se)
    reps = [_generic.generic_label_mc(_SOFTMAX_B1, k, q, Vp, 2, 4096)[0] for k in jax.random.split(key, 6)]
    assert 0.4 < np.std(reps, ddof=1) / se < 2.5, (np.std(reps, ddof=1), se)


def test_generic_channel_error_on_the_outputs_needs_a_key_and_valid_sizes(key):
    """The generic channel's error on the outputs is a Monte Carlo average: without a key a ValueError
    naming key; generic_label_mc refuses q < 0, Vp <= 0, T < 2 and n_omega < 1 by name."""
    c = aim.generic_channel(_SOFTMAX_B1, 0.1, n_samples=64, n_omega=64)
    with pytest.raises(ValueError, match="key must be a jax.random key"):
        aim.label_space_error(0.4, 0.5, 2, channel=c)
    for kw, name in (({"q": -0.1}, "q"), ({"Vp": 0.0}, "Vp"), ({"T": 1}, "T"), ({"n_omega": 0}, "n_omega")):
        args = {"q": 0.4, "Vp": 0.5, "T": 2, "n_omega": 8, **kw}
        with pytest.raises(ValueError, match=rf"\b{name}\b"):
            _generic.generic_label_mc(_SOFTMAX_B1, key, **args)


def test_generic_channel_state_evolution_grid_and_its_clamp():
    """The state-evolution averages are tabulated at 16 points V' / (q + V') = sigmoid(t), t evenly from
    -8 to 4 (3.4e-4 to 0.982), interpolated in log V' and clamped beyond. So se_H is constant below the
    first point and above the last, and not constant between the first two points nor between the last
    two (each pair of values differs there by more than the 1e-9 of float rounding in the spline)."""
    c = aim.generic_channel(jnp.tanh, 0.1, n_samples=64, n_omega=64)
    S = 1.0
    first, last = 1 / (1 + math.exp(8.0)), 1 / (1 + math.exp(-4.0))
    second = 1 / (1 + math.exp(8.0 - 12 / 15))
    before_last = 1 / (1 + math.exp(-4.0 + 12 / 15))

    def H(fr):
        fr = np.asarray(fr, float)
        return np.asarray(c.se_H(S * (1 - fr), S * fr, 2, 1.0, "exact"))

    lo = H([0.3 * first, 0.9 * first, first])
    assert np.ptp(lo) <= 1e-12 * np.max(np.abs(lo))
    hi = H([last, (1 + last) / 2, 0.999])
    assert np.ptp(hi) <= 1e-12 * np.max(np.abs(hi))
    inner = H([first, math.sqrt(first * second), before_last, math.sqrt(before_last * last)])
    assert abs(inner[1] - inner[0]) > 1e-9 * abs(inner[0])
    assert abs(inner[3] - inner[2]) > 1e-9 * abs(inner[2])


def _softmax_label_error_T2_by_quad(q, Vp, beta):
    """4 E_u Var(sigmoid(beta (u + s z)) | u), u ~ N(0, 3q), z ~ N(0, 1), s^2 = 3V': nested adaptive
    quadrature (scipy.integrate.quad), with breaks at the sigmoid's step and at the width of the variance."""
    from scipy.special import expit

    a, s = math.sqrt(3 * q), math.sqrt(3 * Vp)

    def var(u):
        pts = [p for p in ((-u - k / beta) / s for k in (-20, -5, 0, 5, 20)) if -14 < p < 14]
        m = [integrate.quad(lambda z: stats.norm.pdf(z) * expit(beta * (u + s * z)) ** k, -14, 14, points=pts,
                            limit=500, epsabs=1e-15, epsrel=1e-13)[0] for k in (1, 2)]
        return max(m[1] - m[0] ** 2, 0.0)

    w = s + 1 / beta
    pts = [k * w for k in (-40, -10, -3, 0, 3, 10, 40) if abs(k * w) < 12 * a]
    return 4 * integrate.quad(lambda u: stats.norm.pdf(u / a) / a * var(u), -12 * a, 12 * a, points=pts,
                              limit=500, epsabs=1e-14, epsrel=1e-11)[0]


# (q, rho, beta) -> the output error by _softmax_label_error_T2_by_quad (V' = 1 + rho - q)
_LABEL_T2 = {(0.3, 0.5, 4.0): 0.6934563337849002, (1.0, 0.01, 50.0): 0.07325256882572119,
             (1.0, 0.01, 1000.0): 0.08874703218307414, (1.4, 0.4001, 1000.0): 0.006871789127763354}


@pytest.mark.parametrize("q, rho, beta", list(_LABEL_T2))
def test_softmax_label_error_T2_at_sharp_steps(q, rho, beta):
    """The softmax's output error at T = 2, eq. (bo-label), up to beta = 1000 and V' = Q0 - q = 1e-4,
    where the sigmoid's step is 1e-4 wide in units of the noise on h: against nested adaptive quadrature
    (the values, from _softmax_label_error_T2_by_quad, are recomputed by the slow test below). Fixed
    160-node Gauss-Hermite rules were off by -16 % (beta = 50, V' = 0.01) and -100 % (beta = 1000,
    V' = 1e-4). Measured agreement 4e-11 relative (the reference's own tolerance is 1e-11); bound 1e-10,
    the accuracy label_space_error documents."""
    assert aim.label_space_error(q, rho, channel="softmax", beta=beta) == pytest.approx(_LABEL_T2[q, rho, beta],
                                                                                        rel=1e-10)


@pytest.mark.slow
@pytest.mark.parametrize("q, rho, beta", list(_LABEL_T2))
def test_softmax_label_error_T2_reference_values(q, rho, beta):
    """The reference values of test_softmax_label_error_T2_at_sharp_steps, recomputed by adaptive
    quadrature (about 15 s each)."""
    assert _softmax_label_error_T2_by_quad(q, 1 + rho - q, beta) == pytest.approx(_LABEL_T2[q, rho, beta], rel=1e-10)


@pytest.mark.parametrize("beta", [0.5, 3.0])
def test_softmax_channel_output_is_the_softmax_of_beta_h(key, beta):
    """The registered channel's noiseless output map (what sample_data and train_gd apply) is the
    row-wise softmax of beta h, the same as aim.softmax, on a batch and on one matrix."""
    h = np.asarray(ch.symmetric_gaussian(key, (4, 3, 3)))
    out = ch.get("softmax").output(h, beta)
    np.testing.assert_allclose(out, aim.softmax(h, beta), rtol=1e-15)
    e = np.exp(beta * h - np.max(beta * h, axis=-1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(axis=-1, keepdims=True), rtol=1e-14)
    np.testing.assert_allclose(ch.get("softmax").output(h[0], beta), out[0], rtol=1e-15)


def test_hardmax_table_interpolant_beyond_its_nodes():
    """The hardmax state-evolution tables in t = q / V': a spline in log t between the nodes,
    linear from the value at t = 0 below the first, and beyond the last either the last value
    (E log Z, which tends to 0) or a power law with the last slope (log values)."""
    from aim_tutorial.channels import hardmax as hm

    lt = np.log(np.array([0.1, 0.3, 1.0, 3.0, 10.0]))
    yy = np.array([-0.5, -0.3, -0.1, -0.03, -0.01])
    f = hm._table_fn(lt, yy, -0.6, log_values=False)
    assert np.allclose(f(np.array([10.0, 20.0, 1e6])), -0.01, rtol=0, atol=1e-15)  # the last value
    assert f(0.05) == pytest.approx(-0.6 + (-0.5 + 0.6) * 0.5)  # linear to t = 0
    assert f(1.0) == pytest.approx(-0.1)
    g = hm._table_fn(lt, -yy, 0.6, log_values=True)  # positive values: a power law beyond
    lg = np.log([g(10.0), g(1e2), g(1e3)])
    assert g(10.0) == pytest.approx(0.01) and lg[1] - lg[0] == pytest.approx(lg[2] - lg[1])  # linear in log-log
    assert 0 < g(1e3) < g(10.0)
