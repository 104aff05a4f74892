"""Elementwise channels with label noise: the quadrature against an independent computation.

For ReLU with Gaussian noise on y, Z_1(y | omega, v) has a closed form (a censored Gaussian
plus a Gaussian integral over h > 0), so the Fisher information is a two-dimensional
integral over (omega, y) with no integral over h: done here on a dense tensor-product
Gauss-Legendre grid, refined where the integrand turns. Measured against the package: a
relative gap below 4e-12 from V'/q = 0.5 down to 7e-5 (where the censoring is sharp); the
same values come out of scipy.integrate.quad nested over (omega, y).
"""

import math
import time

import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import ndtr
from scipy.stats import norm

import aim_tutorial as aim
from aim_tutorial.channels import elementwise as ew


def _gl_panels(breaks, n=16):
    x, w = np.polynomial.legendre.leggauss(n)
    a, b = np.asarray(breaks[:-1]), np.asarray(breaks[1:])
    X = ((a + b)[:, None] / 2 + (b - a)[:, None] / 2 * x).ravel()
    W = ((b - a)[:, None] / 2 * w).ravel()
    return X, W

def relu_noisy_fisher(q_s, v, s2, T):
    """Closed-form Z_1 of y = max(h, 0)/T + N(0, s2), integrated over (omega, y) on a dense
    tensor-product Gauss-Legendre grid refined where the integrand turns: no h-integral."""
    sq, sv, sg = math.sqrt(q_s), math.sqrt(v), math.sqrt(s2)
    wb = np.unique(np.concatenate([np.linspace(-12 * sq, 12 * sq, 97), np.clip(sv * np.linspace(-12, 12, 49), -12 * sq, 12 * sq)]))
    W_, Ww = _gl_panels(wb)
    Ww = Ww * norm.pdf(W_ / sq) / sq
    ymax = 12 * sq / T + 12 * sg + 12 * sv / T
    yb = np.unique(np.concatenate([np.linspace(-12 * sg, ymax, 241), sg * np.linspace(-12, 12, 49)]))
    Y, Wy = _gl_panels(yb[yb >= -12 * sg])
    w, y = W_[:, None], Y[None, :]
    c2 = s2 + v / T**2
    ss2 = 1 / (1 / v + 1 / (T * T * s2))
    ss = math.sqrt(ss2)
    mu = ss2 * (w / v + y / (T * s2))
    A = ndtr(-w / sv) * norm.pdf(y / sg) / sg
    dA = -norm.pdf(w / sv) / sv * norm.pdf(y / sg) / sg
    G = norm.pdf((y - w / T) / math.sqrt(c2)) / math.sqrt(c2)
    B = G * ndtr(mu / ss)
    dB = B * (y - w / T) / (T * c2) + G * norm.pdf(mu / ss) * (ss2 / v) / ss
    Z, dZ = A + B, dA + dB
    f = np.where(Z > 1e-300, dZ * dZ / np.where(Z > 1e-300, Z, 1.0), 0.0)
    return float(Ww @ f @ Wy)


@pytest.mark.slow
@pytest.mark.parametrize("q_s, v", [(1.0, 0.5), (1.45, 0.01), (1.4999, 1e-4)])
def test_relu_with_label_noise_against_the_closed_form(q_s, v):
    T, s2 = 2, 0.01

    def f(h):
        return jnp.maximum(h, 0.0) / T

    I, _ = ew._noisy_point(f, s2, ew.kinks(f), q_s, v)
    ref = relu_noisy_fisher(q_s, v, s2, T)
    assert abs(I - ref) < 1e-10 * ref, (I, ref)


@pytest.mark.slow
def test_relu_with_label_noise_state_evolution_is_stationary():
    """d E log Z_out / dq = (q_hat / alpha) / 4 along the solver's line, at the default sizes."""
    ch = aim.elementwise_channel(lambda h: jnp.maximum(h, 0.0) / 2, label_noise=0.01)
    Q0, e = 1.5, 1e-4
    for q in (0.4, 1.2, 1.45):
        dE = (ch.se_ElogZ(np.asarray(q + e), np.asarray(Q0 - q - e), 2, 1.0)
              - ch.se_ElogZ(np.asarray(q - e), np.asarray(Q0 - q + e), 2, 1.0)) / (2 * e)
        H = ch.se_H(np.asarray(q), np.asarray(Q0 - q), 2, 1.0, "exact")
        assert float(dE) == pytest.approx(float(H) / 4, rel=1e-6), q


@pytest.mark.parametrize("name, f, want", [
    ("relu", lambda h: jnp.maximum(h, 0.0) / 3, (0.0,)),
    ("clip", lambda h: jnp.clip(h, -0.5, 1.0), (-0.5, 1.0)),
    ("leaky relu", lambda h: jnp.where(h > 0.3, h, 0.1 * h + 0.27), (0.3,)),
    ("abs", jnp.abs, (0.0,)),
    ("tanh", jnp.tanh, ()),
    ("square", lambda h: h * h, ()),
])
def test_kinks_are_found_where_the_slope_jumps(name, f, want):
    got = ew.kinks(f)
    assert len(got) == len(want), (name, got)
    assert np.allclose(got, want, atol=1e-12), (name, got)


def test_a_floating_point_staircase_is_refused_at_once():
    """tanh rounds to a staircase beyond |h| = 17: not one-to-one, said in well under a second."""
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match="staircase in float64"):
        aim.elementwise_channel(jnp.tanh)
    assert time.perf_counter() - t0 < 5.0
    ch = aim.elementwise_channel(jnp.arcsinh)  # strictly increasing in float64: the linear channel
    a = aim.solve_state_evolution(0.1, 0.5, channel=ch).mmse
    assert abs(a - aim.solve_state_evolution(0.1, 0.5, channel="linear").mmse) < 1e-12


def _relu_output_variance(q_s, v, T):
    """E_omega Var(max(h, 0) / T | omega) in closed form inside, adaptive quadrature over omega."""
    from scipy import integrate

    s, sv = math.sqrt(q_s), math.sqrt(v)

    def var(w):
        a = w / sv
        P, d = norm.cdf(a), norm.pdf(a)
        m1 = (w * P + sv * d) / T
        return ((w * w + v) * P + w * sv * d) / T**2 - m1 * m1

    return integrate.quad(lambda w: norm.pdf(w / s) / s * var(w), -14 * s, 14 * s, points=[0.0],
                          limit=400, epsabs=1e-15, epsrel=1e-13)[0]


@pytest.mark.slow
@pytest.mark.parametrize("T", [2, 3])
def test_error_on_the_outputs_of_elementwise_channels(T):
    """Eq. (bo-label) for ReLU against the censored-Gaussian moments (measured gap <= 1e-12),
    and for the identity map equal to the linear channel's (Q0 - q)(T^2 + T)."""
    rho, Q0 = 0.5, 1.5
    for q in (0.3, 1.2, 1.4999):
        Vp = Q0 - q
        ref = T * _relu_output_variance(2 * q, 2 * Vp, T) + T * (T - 1) * _relu_output_variance(q, Vp, T)
        assert aim.label_space_error(q, rho, T=T, channel="relu") == pytest.approx(ref, rel=1e-10)
    ident = aim.elementwise_channel(lambda h: h, name="identity")
    q = np.array([0.3, 1.2])
    np.testing.assert_allclose(aim.label_space_error(q, rho, T=T, channel=ident), (Q0 - q) * (T * T + T),
                               rtol=1e-12)


def test_outputs_outside_the_range_of_the_map_are_refused():
    """Issue 17: a noiseless elementwise channel checks that y is a possible output (on a flat value or
    inside the image of a monotone piece: elsewhere the score was NaN) and symmetric; with label noise
    any finite symmetric y is possible."""
    clip = aim.elementwise_channel(lambda h: jnp.clip(h, -0.5, 1.0), name="clip")
    omega = np.zeros((2, 2, 2))
    ok = np.array([[[-0.5, 0.3], [0.3, 1.0]], [[0.0, 1.0], [1.0, -0.5]]])
    assert np.all(np.isfinite(np.asarray(aim.output_score(clip, ok, omega, 0.5))))
    for bad in (1.5, -0.7):
        y = ok.copy()
        y[1, 0, 0] = bad
        with pytest.raises(ValueError, match=r"y must be outputs of channel 'clip'.*outside the range"):
            aim.output_score(clip, y, omega, 0.5)
    asym = ok.copy()
    asym[0, 0, 1] = 0.9
    with pytest.raises(ValueError, match="y must be symmetric"):
        aim.log_partition(clip, asym, omega, 0.5)
    noisy = aim.elementwise_channel(jnp.tanh, label_noise=0.05, name="tanh+noise", nodes=(24, 201))
    y = ok.copy()
    y[1, 0, 0] = 3.0  # beyond tanh, but label noise reaches it
    aim.channels.check_outputs(noisy, "y", y, 2, 1.0)  # accepted (the check alone: no quadrature here)
    with pytest.raises(ValueError, match="y must be symmetric"):
        aim.output_score(noisy, asym, omega, 0.5)
