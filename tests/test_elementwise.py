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

import jax
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


def clip_noisy_fisher(q_s, v, s2, a, b):
    """Closed-form Z_1 of y = clip(h, a, b) + N(0, s2), two kinks: the flat ends N(y; a or b, s2) with the
    probabilities Phi((a - omega)/sqrt(v)) and Phi((omega - b)/sqrt(v)), and between them the Gaussian
    N(y; omega, v + s2) times the mass of h | y on [a, b]; dZ_1 / d omega in closed form too; integrated over
    (omega, y) on a tensor-product Gauss-Legendre grid refined around both kinks. (a, b) -> (-inf, inf)
    gives the linear channel's 1 / (v + s2)."""
    sq, sv, sg = math.sqrt(q_s), math.sqrt(v), math.sqrt(s2)
    wb = np.unique(np.concatenate([np.linspace(-12 * sq, 12 * sq, 97)] +
                                  [np.clip(c + sv * np.linspace(-12, 12, 49), -12 * sq, 12 * sq) for c in (a, b)]))
    W_, Ww = _gl_panels(wb)
    Ww = Ww * norm.pdf(W_ / sq) / sq
    yb = np.unique(np.concatenate([np.linspace(a - 12 * sg, b + 12 * sg, 241)] +
                                  [c + sg * np.linspace(-12, 12, 49) for c in (a, b)]))
    Y, Wy = _gl_panels(yb)
    w, y = W_[:, None], Y[None, :]
    ss2 = 1 / (1 / v + 1 / s2)
    ss = math.sqrt(ss2)
    mu = ss2 * (w / v + y / s2)  # the mean of h | y, omega on the slope
    Na, Nb = norm.pdf((y - a) / sg) / sg, norm.pdf((y - b) / sg) / sg
    G = norm.pdf((y - w) / math.sqrt(v + s2)) / math.sqrt(v + s2)
    D = ndtr((b - mu) / ss) - ndtr((a - mu) / ss)
    Z = ndtr((a - w) / sv) * Na + ndtr((w - b) / sv) * Nb + G * D
    dZ = (-norm.pdf((a - w) / sv) / sv * Na + norm.pdf((b - w) / sv) / sv * Nb + G * (y - w) / (v + s2) * D
          + G * (norm.pdf((a - mu) / ss) - norm.pdf((b - mu) / ss)) * (ss2 / v) / ss)
    f = np.where(Z > 1e-300, dZ * dZ / np.where(Z > 1e-300, Z, 1.0), 0.0)
    return float(Ww @ f @ Wy)


def test_the_clip_reference_is_the_linear_channel_without_kinks():
    """The reference below, with its kinks out of reach, is the linear channel with noise: 1 / (v + s2)."""
    assert clip_noisy_fisher(1.0, 0.5, 0.01, -60.0, 60.0) == pytest.approx(1 / 0.51, rel=1e-13)


@pytest.mark.slow
@pytest.mark.parametrize("q_s, v", [(1.0, 0.5), (1.45, 0.01), (1.4999, 1e-4)])
def test_clip_with_label_noise_against_the_closed_form(q_s, v):
    """Two kinks (clip to [-0.5, 1], label noise 0.01), down to v / q_s = 7e-5, where the kinks are sharp on
    the scale of omega: the package's panelled quadrature against the closed form, measured 1.7e-15,
    1.9e-14, 2.9e-14 relative; bound 1e-10, as for ReLU (the kink at 1 is found 4e-15 off)."""
    s2, a, b = 0.01, -0.5, 1.0

    def f(h):
        return jnp.clip(h, a, b)

    k = ew.kinks(f)
    assert len(k) == 2 and abs(k[0] - a) < 1e-12 and abs(k[1] - b) < 1e-12
    I, _ = ew._noisy_point(f, s2, k, q_s, v)
    ref = clip_noisy_fisher(q_s, v, s2, a, b)
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


@pytest.mark.slow
@pytest.mark.parametrize("Q0", [1.5, 1.234567891e-7, 3e-13])
def test_label_noise_tables_at_any_scale_of_the_line(Q0):
    """se_H of a label-noise channel reads I from a table along q + V' = Q0 (the state evolution's
    line): equal to the integral at the point itself to the table's interpolation error (5e-10
    measured) at every scale. Grouping the points by 12 decimals was 6.7e-7 off at Q0 = 1.2e-7
    (Q0 kept 6 digits) and failed at 3e-13 (Q0 rounded to 0)."""
    T, s2 = 2, 0.01

    def f(h):
        return jnp.maximum(h, 0.0) / T

    ch = aim.elementwise_channel(f, label_noise=s2)
    q = 0.3 * Q0
    H = float(ch.se_H(np.array([q]), np.array([Q0 - q]), T, 1.0, "exact")[0])
    k = ew.kinks(f)
    Id = ew._noisy_point(f, s2, k, 2 * q, 2 * (Q0 - q))[0]  # the diagonal entries: 2q and 2V'
    Io = ew._noisy_point(f, s2, k, q, Q0 - q)[0]
    ref = 2 * (2 * T * float(Id) + T * (T - 1) / 2 * float(Io))
    assert abs(H - ref) < 1e-8 * ref, (Q0, H, ref)


@pytest.mark.slow
def test_label_noise_state_evolution_at_zero_overlap():
    """At q = 0 (the uninformed start of the state evolution) the line q + V' = V' holds the point
    itself, and 40-bit rounding can put the line a hair below V' (0.7 rounds down): v/S then
    exceeds 1 by rounding, which the table's logit must clamp. se_H at q = 0 is finite and equals
    its value at q = 1e-300."""
    ch = aim.elementwise_channel(lambda h: jnp.maximum(h, 0.0) / 2, label_noise=0.01)
    H = ch.se_H(np.array([0.0, 1e-300]), np.array([0.7, 0.7]), 2, 1.0, "exact")
    assert np.all(np.isfinite(H)) and H[0] == H[1], H


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


def _clip_output_variance(q_s, v, a, b):
    """E_omega Var(clip(h, a, b) | omega), h ~ N(omega, v): the two flat masses and the truncated-normal
    moments between them in closed form, adaptive quadrature over omega with breaks at both kinks."""
    from scipy import integrate

    s, sv = math.sqrt(q_s), math.sqrt(v)

    def var(w):
        al, be = (a - w) / sv, (b - w) / sv
        Pa, Pb, mid = ndtr(al), ndtr(-be), ndtr(be) - ndtr(al)
        pa, pb = norm.pdf(al), norm.pdf(be)
        m1 = a * Pa + b * Pb + w * mid + sv * (pa - pb)
        m2 = a * a * Pa + b * b * Pb + (w * w + v) * mid + 2 * w * sv * (pa - pb) + v * (al * pa - be * pb)
        return m2 - m1 * m1

    return integrate.quad(lambda w: norm.pdf(w / s) / s * var(w), -14 * s, 14 * s, points=[a, b], limit=400,
                          epsabs=1e-15, epsrel=1e-13)[0]


@pytest.mark.slow
@pytest.mark.parametrize("T", [2, 3])
def test_error_on_the_outputs_of_a_map_with_two_kinks(T):
    """Eq. (bo-label) for clip(h, -0.5, 1) (two kinks, the rule of the outputs panelled at both) against the
    closed-form moments: measured 3e-16 to 2.5e-14 relative down to V' = 1e-4; bound 1e-10, as for ReLU."""
    a, b, rho, Q0 = -0.5, 1.0, 0.5, 1.5
    ch = aim.elementwise_channel(lambda h: jnp.clip(h, a, b), name="clip")
    for q in (0.3, 1.2, 1.4999):
        Vp = Q0 - q
        ref = T * _clip_output_variance(2 * q, 2 * Vp, a, b) + T * (T - 1) * _clip_output_variance(q, Vp, a, b)
        assert aim.label_space_error(q, rho, T=T, channel=ch) == pytest.approx(ref, rel=1e-10)


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


# ---------------------------------------------------------------------------
# the structure of a noiseless map (analyse, kinks) and the noiseless state evolution


def _staircase(h):
    """Two ramps of slope 1 between three flats, all ends off the analysis grid (spacing 1e-3)."""
    return jnp.clip(h, -0.3004, 0.2003) + jnp.clip(h, 0.5004, 1.0007)


@pytest.mark.parametrize("name, f, flats, pieces, images", [
    ("relu", lambda h: jnp.maximum(h, 0.0), [(-np.inf, 0.0, 0.0)], [(0.0, np.inf)], [(0.0, np.inf)]),
    ("clip", lambda h: jnp.clip(h, 1.25, 3.0), [(-np.inf, 1.25, 1.25), (3.0, np.inf, 3.0)], [(1.25, 3.0)],
     [(1.25, 3.0)]),
    ("staircase", _staircase, [(-np.inf, -0.3004, 0.2), (0.2003, 0.5004, 0.7007), (1.0007, np.inf, 1.201)],
     [(-0.3004, 0.2003), (0.5004, 1.0007)], [(0.2, 0.7007), (0.7007, 1.201)]),
])
def test_analyse_places_flat_ends_and_pieces_off_the_grid(name, f, flats, pieces, images):
    """The ends of the flat intervals are refined by bisection from the grid (spacing 1e-3) to
    where f leaves its flat value, two units in the last place (``_value_tol``), so they sit
    within 1e-15 of the true ends; every monotone piece runs from its left flat's end to its
    right flat's end (unbounded where no flat bounds it), and its image is the open interval
    between the flat values. A flat value at the end of a piece's image (ReLU's 0, the clip's
    1.25) is not a value the piece takes: the map is accepted. Tolerance: the refinement stops
    where ``|f - c|`` exceeds ``4.5e-16 max(1, |c|)``, 1.35e-15 at ``c = 3`` (slope 1)."""
    st = ew.analyse(f)
    a, b, c = (np.array(col) for col in zip(*flats))
    np.testing.assert_allclose(st.flat_a, a, rtol=0, atol=1.4e-15, err_msg=name)
    np.testing.assert_allclose(st.flat_b, b, rtol=0, atol=1.4e-15, err_msg=name)
    np.testing.assert_allclose(st.flat_c, c, rtol=0, atol=1.4e-15, err_msg=name)
    np.testing.assert_array_equal(st.flat_group, np.arange(len(flats)))
    pa, pb = (np.array(col) for col in zip(*pieces))
    np.testing.assert_allclose(st.piece_a, pa, rtol=0, atol=1.4e-15, err_msg=name)
    np.testing.assert_allclose(st.piece_b, pb, rtol=0, atol=1.4e-15, err_msg=name)
    assert np.all(st.piece_increasing)
    lo, hi = (np.array(col) for col in zip(*images))
    np.testing.assert_allclose(st.piece_lo, lo, rtol=0, atol=1.4e-15, err_msg=name)
    np.testing.assert_allclose(st.piece_hi, hi, rtol=0, atol=1.4e-15, err_msg=name)


def test_a_piece_between_narrow_flats_ends_at_its_own_neighbours():
    """A piece's grid ends are replaced by the refined ends of the flats next to it (within two
    grid steps), not by those of another flat nearby: on a grid of step 1, a flat that ends at
    0.9, a ramp to 0.95, a flat to 3.5 (2.6 steps after 0.9) and a ramp on give the pieces
    (0.9, 0.95) and (3.5, inf)."""
    def f(h):
        ramp = jnp.where(h <= 3.5, 1.0, h - 2.5)
        return jnp.where(h <= 0.9, 0.0, jnp.where(h < 0.95, (h - 0.9) / 0.05, ramp))

    st = ew.analyse(f, x_max=5.0, n_grid=11)  # the grid -5, -4, ..., 5
    np.testing.assert_allclose(st.flat_b, [0.9, 3.5], rtol=0, atol=1e-15)
    np.testing.assert_allclose(st.piece_a, [0.9, 3.5], rtol=0, atol=1e-15)
    np.testing.assert_allclose(st.piece_b, [0.95, np.inf], rtol=0, atol=1e-15)
    np.testing.assert_allclose(st.piece_lo, [0.0, 1.0], rtol=0, atol=1e-15)


def test_images_that_overlap_by_rounding_are_one_to_one():
    """Two pieces whose images meet at ``c = 1e4`` to within rounding (one ends at ``c``, the next
    starts an ulp below, as separately computed branches of a map may) do not make the map
    many-to-one: the overlap check allows ``1e-12 |c|`` (1e-8 here, the overlap is 1 ulp = 1.8e-12).
    Between the pieces the map jumps to its flat value ``c + 5`` on ``[0, 1]`` and back (and it is
    flat at ``c -+ 10`` beyond ``|h| = 1``, ``2``): the images are the one-sided limits of the
    branches at the flats' ends, ``(c - 1, c)`` and ``(c - u, c + 1 - u)``, not the flat values."""
    c = 1e4
    u = float(np.spacing(c))

    def f(h):
        return jnp.where(h <= -1.0, c - 10, jnp.where(h < 0, c + h, jnp.where(
            h <= 1.0, c + 5, jnp.where(h < 2.0, c - u + (h - 1.0), c + 10))))

    st = ew.analyse(f)
    assert st.piece_hi[0] == c and st.piece_lo[1] == c - u
    np.testing.assert_allclose([st.piece_lo[0], st.piece_hi[1]], [c - 1, c + 1 - u], rtol=0, atol=0)
    np.testing.assert_allclose(st.flat_a, [-np.inf, 0.0, 2.0], rtol=0, atol=1e-15)
    np.testing.assert_allclose(st.flat_b, [-1.0, 1.0, np.inf], rtol=0, atol=1e-15)


def _union_info(q_s, v, a, b):
    """I(q_s, v) of a map flat (one value) on ``h <= a`` and ``h >= b``, invertible between: from the
    moments of ``N(omega, v)`` on the union of the two tails, adaptive quadrature over omega."""
    from scipy import integrate

    s, sv = math.sqrt(q_s), math.sqrt(v)

    def pvar(w):
        al, be = (a - w) / sv, (b - w) / sv
        P = ndtr(al) + ndtr(-be)
        m1 = sv * (norm.pdf(be) - norm.pdf(al))
        m2 = v * (ndtr(al) - al * norm.pdf(al) + ndtr(-be) + be * norm.pdf(be))
        return m2 - m1 * m1 / P

    E = integrate.quad(lambda w: norm.pdf(w / s) / s * pvar(w), -14 * s, 14 * s, points=[a, b],
                       limit=400, epsabs=1e-15, epsrel=1e-13)[0]
    return (1 - E / v) / v


def test_equal_flat_values_on_two_intervals_are_one_observation():
    """``y = 0`` on ``|h| >= 1`` says only that ``h`` is in one of the two tails: the intervals are one
    group, and the Fisher information counts the variance of ``h`` over their union (larger than
    the sum over each tail alone), against the truncated-normal moments (measured gap 5e-16)."""
    ch = aim.elementwise_channel(lambda h: jnp.where(jnp.abs(h) >= 1, 0.0, 2.0 + h), name="two tails")
    st = ch.structure(2, 1.0)
    np.testing.assert_array_equal(st.flat_group, [0, 0])
    assert st.n_groups == 1
    q, Vp, T = 0.6, 0.4, 2
    ref = 2 * (2 * T * _union_info(2 * q, 2 * Vp, -1.0, 1.0) + _union_info(q, Vp, -1.0, 1.0))
    assert float(ch.se_H(np.asarray(q), np.asarray(Vp), T, 1.0, "exact")) == pytest.approx(ref, rel=1e-12)


def test_kinks_within_three_points_of_the_grid_ends_are_skipped():
    """A kink's position comes from secants through the grid points up to three away on each side:
    a kink closer than that to either end of the grid is skipped (the grid cannot place it), one
    further in is found."""
    for k in (-0.985, 0.985, 0.99):
        assert ew.kinks(lambda h: jnp.maximum(h - k, 0.0), x_max=1.0, n_grid=201) == (), k
    got = ew.kinks(lambda h: jnp.maximum(h - 0.95, 0.0), x_max=1.0, n_grid=201)
    assert got == pytest.approx((0.95,), abs=1e-12)


def _relu_info(q_s, v):
    """I(q_s, v) of noiseless ReLU: P(h < 0) Var(h | h < 0) of N(omega, v) in closed form,
    adaptive quadrature over omega with breaks at the scale sqrt(v)."""
    from scipy import integrate
    from scipy.special import log_ndtr

    s, sv = math.sqrt(q_s), math.sqrt(v)

    def pvar(w):
        b = -w / sv
        P = ndtr(b)
        if P == 0:
            return 0.0
        lam = math.exp(norm.logpdf(b) - log_ndtr(b))
        return P * v * (1 - b * lam - lam * lam)

    u = np.array([-40, -20, -10, -5, -2, -1, 0, 1, 2, 5, 10, 20, 40])
    pts = sorted(set(np.clip(u * sv, -14 * s, 14 * s).tolist()) | {-14 * s, 14 * s})

    def part(lo, hi):
        return integrate.quad(lambda w: norm.pdf(w / s) / s * pvar(w), lo, hi, limit=200, epsabs=1e-14 * v,
                              epsrel=1e-12)[0]

    E = sum(part(lo, hi) for lo, hi in zip(pts[:-1], pts[1:]) if hi > lo)
    return (1 - E / v) / v


@pytest.mark.parametrize("q, Vp", [(0.5, 0.5), (1.0, 1e-4), (0.3, 1e-6)])
def test_relu_state_evolution_against_truncated_normal_moments(q, Vp):
    """Noiseless ReLU: the state evolution's ``q_hat / alpha`` against the closed-form moments of the
    censored Gaussian (measured gap <= 3e-15), down to ``V' = 1e-6``, where most ``omega`` nodes sit
    more than 40 standard deviations from the flat part (its clipped probability is a tiny number,
    not 0, and contributes nothing)."""
    ch = aim.elementwise_channel(lambda h: jnp.maximum(h, 0.0), name="relu map")
    T = 2
    ref = 2 * (2 * T * _relu_info(2 * q, 2 * Vp) + _relu_info(q, Vp))
    assert float(ch.se_H(np.asarray(q), np.asarray(Vp), T, 1.0, "exact")) == pytest.approx(ref, rel=1e-12)


def test_a_flat_part_out_of_reach_leaves_the_invertible_channel():
    """``y = max(h, -10)`` with ``q + V' = 0.5``: ``h`` lands on the flat part with probability
    ``Phi(-10) = 8e-24``, so the information and ``E log Z_1`` are those of an invertible map,
    ``1/v`` and ``-log(2 pi v)/2 - 1/2`` per entry (to rounding), also next to a point
    (``q + V' = 5``) that needs the quadrature."""
    ch = aim.elementwise_channel(lambda h: jnp.maximum(h, -10.0), name="far flat")
    T = 3
    q, Vp = np.array([0.3, 3.0]), np.array([0.2, 2.0])

    def L(v):
        return -0.5 * math.log(2 * math.pi * v) - 0.5

    H, E = ch.se_H(q, Vp, T, 1.0, "exact"), ch.se_ElogZ(q, Vp, T, 1.0)
    assert H[0] == pytest.approx(2 * (2 * T / (2 * Vp[0]) + T * (T - 1) / 2 / Vp[0]), rel=1e-14)
    assert E[0] == pytest.approx(T * L(2 * Vp[0]) + T * (T - 1) / 2 * L(Vp[0]), rel=1e-14)
    assert H[1] < 2 * (2 * T / (2 * Vp[1]) + T * (T - 1) / 2 / Vp[1])  # the flat part loses information


def test_a_map_without_a_monotone_part_has_no_perfect_recovery():
    """A step map (two flat values, no invertible piece) never measures ``h`` exactly: no
    perfect-recovery threshold (``None``), rather than a division by the zero limit of ``V' q_hat``."""
    step = aim.elementwise_channel(lambda h: jnp.where(h > 0, 1.0, 0.0), name="step")
    assert step.perfect_recovery(0.5, 2, 1.0, 0.0) is None
    assert aim.perfect_recovery_threshold(0.5, 2, channel=step) is None


def test_the_noiseless_inverse_reaches_roots_far_out():
    """The score inverts ``f`` by bisection over ``|h| <= 1e4`` on an unbounded piece: for arcsinh
    at ``|h| = 9999.9`` it equals the linear channel's ``(h - omega)/(2V)``, to the rounding of
    ``y = arcsinh(h)`` there (``cosh(y)`` ulp(y) = 2e-11; measured 1.6e-11)."""
    ch = aim.elementwise_channel(jnp.arcsinh, name="arcsinh")
    for hv in (9999.5, 9999.9):
        H = np.array([[hv, -hv], [-hv, hv]])
        omega = H - 0.5 * np.sign(H)
        got = np.asarray(aim.output_score(ch, np.arcsinh(H), omega, 0.5))
        want = np.asarray(aim.output_score("linear", H, omega, 0.5))
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-10)


# ---------------------------------------------------------------------------
# regressions: narrow flats, and jumps at the edges of flat parts


def _narrow_flats(h):
    """Flat 0 up to 1e-4, a steep ramp (slope 1e4) to 1 at 2e-4, flat 1 up to 2.95e-3 (both flats and
    the ramp narrower than the analysis grid's spacing 1e-3), then slope 1: one-to-one off its flats."""
    return jnp.where(h <= 1e-4, 0.0, jnp.where(h < 2e-4, (h - 1e-4) / 1e-4,
                     jnp.where(h <= 2.95e-3, 1.0, 1.0 + (h - 2.95e-3))))


@pytest.mark.parametrize("scale, grid, atol", [(1.0, {}, 1e-15), (1000.0, {"x_max": 5.0, "n_grid": 11}, 1e-12)])
def test_pieces_between_flats_narrower_than_the_grid_are_accepted(scale, grid, atol):
    """A piece's ends are the refined ends of the flats next to it, not of another flat within two
    grid steps (the grid end of the last piece, 2e-3, was moved to the first flat's end 1e-4, so its
    image overlapped the ramp's and the one-to-one map was refused). The map above, and the same
    map stretched by 1000 on the grid -5, -4, ..., 5 (flats and ramp again under 3 grid steps), give
    the flats (-inf, 1e-4] at 0 and [2e-4, 2.95e-3] at 1 (times the stretch) and the increasing
    pieces between them and after, with images (0, 1) and (1, inf). Tolerance of the ends: the
    bisection stops where ``|f - c|`` exceeds ``4.5e-16``, ``4.5e-13`` in ``h`` at slope ``1e-3``
    (measured 5.6e-13)."""
    st = ew.analyse(lambda h: _narrow_flats(h / scale), **grid)
    np.testing.assert_allclose(st.flat_a, [-np.inf, 2e-4 * scale], rtol=0, atol=atol)
    np.testing.assert_allclose(st.flat_b, [1e-4 * scale, 2.95e-3 * scale], rtol=0, atol=atol)
    np.testing.assert_array_equal(st.flat_c, [0.0, 1.0])
    np.testing.assert_array_equal(st.flat_group, [0, 1])
    np.testing.assert_allclose(st.piece_a, [1e-4 * scale, 2.95e-3 * scale], rtol=0, atol=atol)
    np.testing.assert_allclose(st.piece_b, [2e-4 * scale, np.inf], rtol=0, atol=atol)
    np.testing.assert_array_equal(st.piece_increasing, [True, True])
    np.testing.assert_allclose(st.piece_lo, [0.0, 1.0], rtol=0, atol=1e-15)
    np.testing.assert_allclose(st.piece_hi, [1.0, np.inf], rtol=0, atol=1e-15)


def _two_tails(h):
    """0 on ``|h| >= 1``, ``2 + h`` between: jumps from 0 to 1 at -1 and from 3 to 0 at 1."""
    return jnp.where(jnp.abs(h) >= 1, 0.0, 2.0 + h)


def _lifted_relu(h):
    """0 on ``h <= 0``, ``1 + h`` after: a jump from 0 to 1 at 0."""
    return jnp.where(h <= 0, 0.0, 1.0 + h)


@pytest.mark.parametrize("name, f, flats, pieces, images", [
    ("two tails", _two_tails, [(-np.inf, -1.0), (1.0, np.inf)], [(-1.0, 1.0)], [(1.0, 3.0)]),
    ("lifted relu", _lifted_relu, [(-np.inf, 0.0)], [(0.0, np.inf)], [(1.0, np.inf)]),
    ("step", lambda h: jnp.where(h > 0, 1.0, 0.0), [(-np.inf, 0.0), (0.0, np.inf)], [], []),
])
def test_a_jump_at_the_edge_of_a_flat_is_not_a_piece(name, f, flats, pieces, images):
    """A map that jumps where it leaves (or reaches) a flat value: the grid cell holding the jump is
    no monotone piece (``_two_tails`` had a spurious decreasing piece (0.999, 1) with image
    (0, 2.999); the step a piece (0, 8e-28)), and a piece's image is the one-sided limits of f
    on it, not f at the flat's end (``_two_tails`` had the image (0, 0), ``_lifted_relu``
    (0, inf)). Tolerance: the flat ends are exact to the bisection (8e-28 from the grid step 1e-3)."""
    st = ew.analyse(f)
    a, b = (np.array(col) for col in zip(*flats))
    np.testing.assert_allclose(st.flat_a, a, rtol=0, atol=1e-15, err_msg=name)
    np.testing.assert_allclose(st.flat_b, b, rtol=0, atol=1e-15, err_msg=name)
    np.testing.assert_array_equal(st.flat_c, np.zeros(len(flats)) if name != "step" else [0.0, 1.0])
    assert st.piece_a.size == len(pieces), (name, st)
    if pieces:
        np.testing.assert_allclose(np.c_[st.piece_a, st.piece_b], pieces, rtol=0, atol=1e-15, err_msg=name)
        assert np.all(st.piece_increasing)
        np.testing.assert_allclose(np.c_[st.piece_lo, st.piece_hi], images, rtol=0, atol=1e-15, err_msg=name)


@pytest.mark.parametrize("f, H, impossible", [
    (_two_tails, [[0.5, 0.2], [0.2, -0.3]], (0.5, 1.0, 3.0, 3.5)),
    (_lifted_relu, [[0.5, 0.2], [0.2, 1.3]], (0.5, 1.0, -0.5)),
])
def test_the_score_of_a_map_that_jumps_at_a_flat_edge(f, H, impossible):
    """With ``h`` on the monotone piece the outputs determine ``h``, so the score at ``omega = h`` is 0
    (to rounding: the bisection's inverse, measured 2e-16; it was 0.5 to 1.3 for ``_two_tails``,
    whose piece image was taken as (0, 0) and (0, 2.999)); an output no ``h`` gives (in the jump's
    gap, or a one-sided limit not attained) is refused as the module documents for impossible
    outputs (``check_outputs``: ValueError), where it was accepted (y = 0.5 for ``_lifted_relu``)."""
    ch = aim.elementwise_channel(f)
    H = np.array(H)
    y = np.asarray(f(jnp.asarray(H)))
    np.testing.assert_allclose(np.asarray(aim.output_score(ch, y, H, 0.5)), 0.0, rtol=0, atol=1e-12)
    for bad in impossible:
        yb = y.copy()
        yb[0, 0] = bad
        with pytest.raises(ValueError, match=r"outside the range of its map"):
            aim.output_score(ch, yb, H, 0.5)


# --- the hand-written structures of the registered ReLU and sigmoid channels, against analyse and
# against the censored Gaussian

_GRID_STEP = 2 * ew._X_MAX / (ew._N_GRID - 1)  # analyse's flat ends and piece ends sit within a grid step


@pytest.mark.parametrize("T", [2, 3])
def test_relu_structure_is_what_analyse_finds(T):
    """The ReLU channel's hand-written Structure is the one :func:`analyse` finds from the map itself:
    one flat (-inf, 0] of value 0, then one increasing piece (0, inf) with image (0, inf). Ends within a
    grid step of analyse's (measured: 1.3e-15 apart)."""
    got = aim.channels.get("relu").structure(T, 1.0)
    ref = ew.analyse(lambda h: jnp.maximum(h, 0.0) / T)
    for field in ("flat_a", "flat_b", "piece_a", "piece_b"):
        np.testing.assert_allclose(getattr(got, field), getattr(ref, field), rtol=0, atol=_GRID_STEP, err_msg=field)
    for field in ("flat_c", "flat_group", "piece_increasing", "piece_lo", "piece_hi"):
        np.testing.assert_array_equal(getattr(got, field), getattr(ref, field), err_msg=field)


@pytest.mark.parametrize("T, beta", [(2, 20.0), (3, 40.0), (4, 25.0)])
def test_sigmoid_structure_is_what_analyse_finds(T, beta):
    """The sigmoid channel's Structure against :func:`analyse` of the float64 map itself, at a beta where
    both saturation points lie inside analyse's grid. y = 0 exactly up to (s_lo + log T) / beta, where
    jax.nn.sigmoid's s_lo is -708.4 on CPU (it flushes subnormal results to zero; log of the smallest
    subnormal, -744.4, put this end 1.8 / beta too far); y = 1 exactly from (s_hi + log T) / beta; one
    increasing piece between, whose image runs from 0 to 1 (analyse splits its last 1e-14 below 1 into
    the float64 staircase of values 1 - k ulp, which the channel inverts as part of the piece)."""
    got = aim.channels.get("sigmoid").structure(T, beta)
    ref = ew.analyse(lambda h: jax.nn.sigmoid(beta * h - math.log(T)))
    assert got.flat_a[0] == -np.inf and got.flat_b[-1] == np.inf
    assert got.flat_b[0] == pytest.approx(ref.flat_b[0], rel=0, abs=_GRID_STEP)
    assert got.flat_a[-1] == pytest.approx(ref.flat_a[-1], rel=0, abs=_GRID_STEP)
    np.testing.assert_array_equal(got.flat_c, [ref.flat_c[0], ref.flat_c[-1]])
    np.testing.assert_array_equal(got.flat_c, [0.0, 1.0])
    assert len(set(got.flat_group.tolist())) == got.n_groups == 2
    assert got.piece_a[0] == pytest.approx(ref.piece_a[0], rel=0, abs=_GRID_STEP)
    assert got.piece_b[0] == got.flat_a[-1]
    assert bool(got.piece_increasing[0]) and bool(np.all(ref.piece_increasing))
    assert got.piece_lo[0] == pytest.approx(ref.piece_lo[0], rel=0, abs=1e-300)
    assert got.piece_hi[0] == ref.flat_c[-1]


def _censored_info_and_entropy(q_s, v, lo, hi):
    """One entry h ~ N(omega, v), omega ~ N(0, q_s), observed exactly on (lo, hi) and only as h <= lo or
    h >= hi outside: the Fisher information I = (1 - E_omega[P_lo Var_lo + P_hi Var_hi] / v) / v and
    E log Z_1 (log of P_lo, P_hi, or of the density of h), from scipy's truncated normal moments by
    adaptive quadrature over omega."""
    from scipy import integrate
    from scipy.stats import truncnorm

    sv, s = math.sqrt(v), math.sqrt(q_s)

    def info_part(w):
        a, b = (lo - w) / sv, (hi - w) / sv
        out = 0.0
        for P, lo_, hi_ in ((ndtr(a), -np.inf, a), (ndtr(-b), b, np.inf)):
            if P > 0:
                out += P * v * truncnorm.var(lo_, hi_)
        return out

    def entropy_part(w):
        a, b = (lo - w) / sv, (hi - w) / sv
        mid = ndtr(b) - ndtr(a)
        z2 = mid + a * norm.pdf(a) - b * norm.pdf(b)  # int_a^b z^2 phi(z) dz
        out = (-0.5 * math.log(2 * math.pi) - math.log(sv)) * mid - 0.5 * z2
        for P in (ndtr(a), ndtr(-b)):
            if P > 0:
                out += P * math.log(P)
        return out

    pts = sorted({lo - 6 * sv, lo, lo + 6 * sv, hi - 6 * sv, hi, hi + 6 * sv})
    pts = [p for p in pts if -12 * s < p < 12 * s]
    res = []
    for g in (info_part, entropy_part):
        res.append(integrate.quad(lambda w: norm.pdf(w / s) / s * g(w), -12 * s, 12 * s, points=pts, limit=400,
                                  epsabs=1e-14, epsrel=1e-12)[0])
    return (1 - res[0] / v) / v, res[1]


@pytest.mark.parametrize("q, Vp", [(0.5, 0.4), (0.9, 0.05)])
def test_sigmoid_state_evolution_is_the_doubly_censored_gaussian(q, Vp):
    """At beta = 40 both saturated values are reachable (y = 0 for h below -17.7, y = 1 above 0.95): the
    noiseless sigmoid channel is a Gaussian entry censored on both sides, each side its own observation.
    Its q_hat / alpha and E log Z_out (T diagonal entries of variance 2V', T(T - 1)/2 off-diagonal ones of
    variance V') against scipy's truncated-normal moments with the channel's saturation points:
    measured agreement 7e-15 relative, bound 1e-12 (the quadratures' tolerance)."""
    T, beta = 2, 40.0
    c = aim.channels.get("sigmoid")
    st = c.structure(T, beta)
    lo, hi = float(st.flat_b[0]), float(st.flat_a[-1])
    Id, Ld = _censored_info_and_entropy(2 * q, 2 * Vp, lo, hi)
    Io, Lo = _censored_info_and_entropy(q, Vp, lo, hi)
    H = float(c.se_H(np.asarray(q), np.asarray(Vp), T, beta, "exact"))
    L = float(c.se_ElogZ(np.asarray(q), np.asarray(Vp), T, beta))
    assert H == pytest.approx(2 * (2 * T * Id + T * (T - 1) / 2 * Io), rel=1e-12)
    assert L == pytest.approx(T * Ld + T * (T - 1) / 2 * Lo, rel=1e-12)


@pytest.mark.parametrize("name, beta", [("relu", 1.0), ("sigmoid", 0.3)])
def test_closed_form_inverses_match_bisection(name, beta):
    """The registered ReLU and sigmoid channels invert their maps in closed form (h = T y; h = (logit y +
    log T) / beta): their score and log Z_out on outputs of the model equal those of the same map through
    :func:`elementwise_channel`, which inverts by bisection (measured gap 7e-14 on values up to 10: the
    bisection's 110 halvings leave h to a few ulp, and the score divides by V'; bound 1e-12). At beta = 0.3 the sigmoid stays below its float64
    staircase on analyse's grid, so the bisection channel sees one piece too."""
    T, V = 3, 0.4
    maps = {"relu": lambda h: jnp.maximum(h, 0.0) / T, "sigmoid": lambda h: jax.nn.sigmoid(beta * h - math.log(T))}
    other = aim.elementwise_channel(maps[name], name=f"{name} by bisection")
    k1, k2 = jax.random.split(jax.random.key(7))
    omega = 0.8 * aim.channels.symmetric_gaussian(k1, (6, T, T))
    h = omega + math.sqrt(V) * aim.channels.symmetric_gaussian(k2, (6, T, T))
    y = maps[name](h)
    np.testing.assert_array_equal(y, aim.channels.get(name).output(h, beta))
    for fn in (aim.log_partition, aim.output_score):
        a = np.asarray(fn(name, y, omega, V, beta=beta))
        b = np.asarray(fn(other, y, omega, V, beta=beta))
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_sigmoid_refuses_beta_zero():
    """beta enters the sigmoid channel (y = sigmoid(beta h - log T)), so beta = 0, where y ignores h,
    is refused by name."""
    y = np.full((2, 2), 0.5)
    with pytest.raises(ValueError, match="beta"):
        aim.log_partition("sigmoid", y, np.zeros((2, 2)), 0.5, beta=0.0)


def test_sigmoid_saturates_at_53_log_2():
    """Float64 sigmoid outputs round to exactly 1 from s = beta h - log T = 53 log 2 = 36.74 on (1 - y ~ e^-s
    falls below half an ulp of 1, 2^-54): the channel's saturation point is that value, to the bisection
    between adjacent doubles (1e-12 relative), on every backend (the other end, y = 0, depends on whether
    the backend keeps subnormal results: -708.4 on XLA's CPU, -744.4 with subnormals)."""
    T, beta = 2, 8.0
    st_ = aim.channels.get("sigmoid").structure(T, beta)
    s_hi = float(st_.flat_a[1]) * beta - math.log(T)
    s_lo = float(st_.flat_b[0]) * beta - math.log(T)
    assert s_hi == pytest.approx(53 * math.log(2), rel=1e-12)
    assert -744.5 < s_lo < -708.3
    assert float(jax.nn.sigmoid(s_hi)) == 1.0 and float(jax.nn.sigmoid(np.nextafter(s_hi, 0.0))) < 1.0


@pytest.mark.parametrize("beta", [8.0, 16.0])
def test_sigmoid_is_the_linear_channel_censored_where_float64_rounds_to_one(beta):
    """What float64 sigmoid outputs lose (chapter 4, "What float64 sigmoid outputs lose"): the model is the
    linear channel for every beta, its float64 outputs are the Gaussian censored from above at
    h_sat = (53 log 2 + log T) / beta. The sigmoid's state evolution is that of the map min(h, h_sat) through
    analyse (measured gap 0 on 33 points; bound 1e-12, the noiseless quadrature's accuracy), above the
    linear curve (gap 8.6e-4 at beta = 8, 2.6e-2 at beta = 16); its threshold is (2 rho - rho^2) over the
    count of exact entries 2T(1 - p_diag) + T(T - 1)(1 - p_off) (1e-12)."""
    T, rho = 2, 0.5
    h_sat = float(aim.channels.get("sigmoid").structure(T, beta).flat_a[1])
    censored = aim.elementwise_channel(lambda h: jnp.minimum(h, h_sat), name="min(h, h_sat)")
    a = np.linspace(1e-3, 0.32, 33)
    sig = aim.solve_state_evolution(a, rho, T=T, channel="sigmoid", beta=beta).mmse
    cen = aim.solve_state_evolution(a, rho, T=T, channel=censored).mmse
    lin = aim.solve_state_evolution(a, rho, T=T, channel="linear").mmse
    assert np.max(np.abs(sig - cen)) < 1e-12
    assert np.max(sig - lin) > 1e-4 and np.min(sig - lin) > -1e-12
    Q0 = 1 + rho
    p_d, p_o = norm.sf(h_sat / math.sqrt(2 * Q0)), norm.sf(h_sat / math.sqrt(Q0))
    want = (2 * rho - rho**2) / (2 * T * (1 - p_d) + T * (T - 1) * (1 - p_o))
    got = aim.perfect_recovery_threshold(rho, T, channel="sigmoid", beta=beta)
    assert got == pytest.approx(want, rel=1e-12) and got > aim.perfect_recovery_threshold(rho, T, channel="linear")


from hypothesis import given, settings, HealthCheck  # noqa: E402
from hypothesis import strategies as hst  # noqa: E402


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(beta=hst.floats(0.05, 200.0), T=hst.integers(2, 6), u=hst.floats(0.0, 1.0))
def test_property_sigmoid_outputs_keep_h_below_saturation(beta, T, u):
    """For any beta and T: y = 1 exactly from h_sat on (the channel's flat), y < 1 just below it, and below
    h_sat (s > 5 there) the logit of the float64 y gives h back to within 2 ulp(1) e^s / beta, the last place
    of y over the slope beta y (1 - y) (measured 1.53 of one ulp at most on 4e6 Gaussian entries at beta = 8):
    the information the float64 outputs keep, and the censoring the state evolution accounts for."""
    h_sat = float(aim.channels.get("sigmoid").structure(T, beta).flat_a[1])
    assert float(jax.nn.sigmoid(beta * h_sat - math.log(T))) == 1.0
    s = 5.0 + u * (53 * math.log(2) - 5.0) * (1 - 1e-9)  # s in [5, s_sat)
    h = (s + math.log(T)) / beta
    y = float(jax.nn.sigmoid(beta * h - math.log(T)))
    assert y < 1.0
    back = (math.log(y) - math.log1p(-y) + math.log(T)) / beta
    assert abs(back - h) <= 2 * 2.0**-53 * math.exp(beta * h - math.log(T)) / beta + 8 * 2.0**-53 * abs(h)


# ---------------------------------------------------------------------------
# second triage: flat ends far out, flats that start above their value, a plateau narrower than
# sqrt(v), outputs an ulp off a flat value, maps without flats, omega = 0, the nodes' lower bounds


def test_a_steep_map_leaving_its_flat_far_out_is_continuous():
    """Where a flat ends far from 0 the bisection stops an ulp from its end (7e-15 at ``|h| = 40``), so
    a steep map (slope 1e3) is already ``7e-12`` off its flat value at the first point off the flat:
    more than the rounding allowance ``1e-12`` but within the slope (measured from that point to the
    next grid point beyond it) times the gap, so the map is continuous there and the piece's image
    starts at the flat value itself (exactly 0), on either side of the piece."""
    right = ew.analyse(lambda h: jnp.maximum(1e3 * (h - 40.0), 0.0))
    assert right.flat_b[0] == 40.0 and right.piece_a[0] == 40.0
    assert right.piece_lo[0] == 0.0 and right.piece_hi[0] == np.inf
    left = ew.analyse(lambda h: jnp.minimum(1e3 * (h + 40.0), 0.0))
    assert left.flat_a[0] == -40.0 and left.piece_b[0] == -40.0
    assert left.piece_lo[0] == -np.inf and left.piece_hi[0] == 0.0


def test_a_flat_that_starts_above_its_value_ends_the_piece_at_its_start():
    """``min(h - 1, 0)``: increasing up to ``h = 1``, then flat at 0. The grid cell ``[0.999, 1]`` before
    the flat belongs to the increasing piece (its direction is read from ``f`` at the cell's left point
    to the limit of ``f`` at the flat's start), so the piece runs to the flat's start 1 with image
    ``(-inf, 0)``, and outputs just below 0 (``h`` in that last cell) are possible. Tolerance of the
    ends: the bisection stops where ``|f| = |h - 1|`` exceeds ``4.5e-16`` (measured 4.4e-16)."""
    st = ew.analyse(lambda h: jnp.minimum(h - 1.0, 0.0))
    np.testing.assert_allclose(st.flat_a, [1.0], rtol=0, atol=4.5e-16)
    np.testing.assert_array_equal(st.flat_b, [np.inf])
    np.testing.assert_allclose(np.c_[st.piece_a, st.piece_b], [[-np.inf, 1.0]], rtol=0, atol=4.5e-16)
    np.testing.assert_array_equal(np.c_[st.piece_lo, st.piece_hi], [[-np.inf, 0.0]])
    assert bool(st.piece_increasing[0])


def test_an_output_an_ulp_off_a_flat_value_is_that_flat_value():
    """A flat value is matched to two units in the last place relative to ``max(1, |c|)`` (``_value_tol``,
    as :func:`check_outputs` accepts it): ``y = 3 + ulp(3)`` for ``clip(h, 1.25, 3)`` (as a rounded
    computation of 3 may give) is the upper flat value, with the score and ``log Z_out`` of ``y = 3``
    exactly (not NaN: it lies outside the monotone piece's image ``(1.25, 3)``)."""
    clip = aim.elementwise_channel(lambda h: jnp.clip(h, 1.25, 3.0), name="clip 1.25..3")
    omega = np.array([[2.5, 1.0], [1.0, 2.0]])
    y = np.array([[3.0, 2.0], [2.0, 1.25]])
    y_off = y.copy()
    y_off[0, 0] = np.nextafter(3.0, 4.0)
    for fn in (aim.output_score, aim.log_partition):
        want = np.asarray(fn(clip, y, omega, 0.5))
        assert np.all(np.isfinite(want))
        np.testing.assert_array_equal(np.asarray(fn(clip, y_off, omega, 0.5)), want)


def _plateau(h):
    """``h`` up to 0.2, flat at 0.2 on ``[0.2, 0.5]``, then ``h - 0.3``: one bounded flat part."""
    return h - jnp.clip(h, 0.2, 0.5) + 0.2


def _plateau_info_and_entropy(q_s, v, a=0.2, b=0.5):
    """I(q_s, v) and E log Z_1 of a map flat on ``[a, b]`` and invertible outside: from the
    truncated-normal moments of ``N(omega, v)`` on ``[a, b]``, adaptive quadrature over omega."""
    from scipy import integrate

    s, sv = math.sqrt(q_s), math.sqrt(v)

    def info_part(w):  # P Var(h | h in [a, b]), the truncated normal's moments
        al, be = (a - w) / sv, (b - w) / sv
        P = ndtr(be) - ndtr(al)
        pa, pb = norm.pdf(al), norm.pdf(be)
        return v * (P + al * pa - be * pb - (pa - pb) ** 2 / P) if P > 0 else 0.0

    def entropy_part(w):
        al, be = (a - w) / sv, (b - w) / sv
        P = ndtr(be) - ndtr(al)
        z2 = ndtr(al) - al * norm.pdf(al) + ndtr(-be) + be * norm.pdf(be)  # int_{z outside [al, be]} z^2 phi
        out = (-0.5 * math.log(2 * math.pi) - math.log(sv)) * (1 - P) - 0.5 * z2
        return out + (P * math.log(P) if P > 0 else 0.0)

    pts = [p for p in (a - 6 * sv, a, a + 6 * sv, b - 6 * sv, b, b + 6 * sv) if -12 * s < p < 12 * s]
    res = [integrate.quad(lambda w: norm.pdf(w / s) / s * g(w), -12 * s, 12 * s, points=pts, limit=400,
                          epsabs=1e-14, epsrel=1e-12)[0] for g in (info_part, entropy_part)]
    return (1 - res[0] / v) / v, res[1]


def test_a_plateau_narrower_than_the_noise_against_truncated_normal_moments():
    """A flat part ``[0.2, 0.5]`` narrower than ``sqrt(v)`` (0.3 against 1 and 0.71), on both sides of
    ``omega``: ``y = 0.2`` says ``h`` is in it, with ``log Z_1 = log(Phi(beta) - Phi(alpha))`` and score
    ``(phi(alpha) - phi(beta)) / (Z_1 sqrt(v))`` (measured gap 9e-15 in log Z_out, 4e-16 in the score;
    bound 1e-12); and the state evolution's ``q_hat / alpha`` and ``E log Z_out``, with omega often
    below the plateau, against the truncated-normal moments by scipy's adaptive quadrature over omega
    (measured 2e-16; bound 1e-12, the quadrature's tolerance)."""
    a, b = 0.2, 0.5
    ch = aim.elementwise_channel(_plateau, name="plateau")
    T, V = 2, 0.5
    omega = np.array([[0.3, -0.4], [-0.4, 1.2]])
    y = np.full((T, T), a)
    v = np.where(np.eye(T, dtype=bool), 2 * V, V)
    al, be = (a - omega) / np.sqrt(v), (b - omega) / np.sqrt(v)
    Z = ndtr(be) - ndtr(al)
    g = (norm.pdf(al) - norm.pdf(be)) / Z / np.sqrt(v)
    upper = np.triu(np.ones((T, T), dtype=bool))
    assert float(aim.log_partition(ch, y, omega, V)) == pytest.approx(float(np.sum(np.log(Z)[upper])), rel=1e-12)
    np.testing.assert_allclose(np.asarray(aim.output_score(ch, y, omega, V)),
                               np.where(np.eye(T, dtype=bool), g, g / 2), rtol=1e-12, atol=1e-12)
    for q, Vp in ((0.5, 0.4), (0.9, 0.05)):
        Id, Ld = _plateau_info_and_entropy(2 * q, 2 * Vp)
        Io, Lo = _plateau_info_and_entropy(q, Vp)
        H = float(ch.se_H(np.asarray(q), np.asarray(Vp), T, 1.0, "exact"))
        L = float(ch.se_ElogZ(np.asarray(q), np.asarray(Vp), T, 1.0))
        assert H == pytest.approx(2 * (2 * T * Id + T * (T - 1) / 2 * Io), rel=1e-12), q
        assert L == pytest.approx(T * Ld + T * (T - 1) / 2 * Lo, rel=1e-12), q


def test_a_map_without_flat_parts_has_the_gaussian_entropy():
    """arcsinh has no flat part: ``y`` determines ``h`` and ``E log Z_1`` (without the Jacobian of the map)
    is the expected log-density of ``h ~ N(omega, v)`` at itself, ``-log(2 pi v)/2 - 1/2`` per entry,
    at any ``q`` (to rounding), and the information ``1/v``."""
    ch = aim.elementwise_channel(jnp.arcsinh, name="arcsinh")
    T = 3
    q, Vp = np.array([0.3, 1.0]), np.array([0.2, 2e-3])

    def L(v):
        return -0.5 * np.log(2 * math.pi * v) - 0.5

    np.testing.assert_allclose(ch.se_ElogZ(q, Vp, T, 1.0), T * L(2 * Vp) + T * (T - 1) / 2 * L(Vp), rtol=1e-14)
    np.testing.assert_allclose(ch.se_H(q, Vp, T, 1.0, "exact"), 2 * (2 * T / (2 * Vp) + T * (T - 1) / 2 / Vp),
                               rtol=1e-14)


def test_relu_state_evolution_at_zero_overlap():
    """At ``q = 0`` every ``omega`` is exactly 0 (one node): for ReLU ``P(h < 0) = 1/2`` and
    ``Var(h | h < 0) = v (1 - 2/pi)``, so ``I(0, v) = (1/2 + 1/pi) / v`` and
    ``E log Z_1 = (1/2) log(1/2) - log(2 pi v)/4 - 1/4`` (to rounding)."""
    ch = aim.elementwise_channel(lambda h: jnp.maximum(h, 0.0), name="relu map")
    T, Vp = 2, 0.7

    def info(v):
        return (0.5 + 1 / math.pi) / v

    def entropy(v):
        return 0.5 * math.log(0.5) - 0.25 * math.log(2 * math.pi * v) - 0.25

    H = float(ch.se_H(np.asarray(0.0), np.asarray(Vp), T, 1.0, "exact"))
    L = float(ch.se_ElogZ(np.asarray(0.0), np.asarray(Vp), T, 1.0))
    assert H == pytest.approx(2 * (2 * T * info(2 * Vp) + info(Vp)), rel=1e-14)
    assert L == pytest.approx(T * entropy(2 * Vp) + entropy(Vp), rel=1e-14)


def test_the_nodes_of_the_noisy_integrals_have_lower_bounds():
    """``nodes = (n_panels, n_y)`` with label noise: at least 4 panels and 64 points in ``y`` (the
    documented bounds, accepted exactly there); below them a ValueError names the entry."""
    aim.elementwise_channel(jnp.tanh, label_noise=0.05, nodes=(4, 64))
    with pytest.raises(ValueError, match=r"nodes\[1\] must be an integer >= 64, got 63"):
        aim.elementwise_channel(jnp.tanh, label_noise=0.05, nodes=(4, 63))
    with pytest.raises(ValueError, match=r"nodes\[0\] must be an integer >= 4, got 3"):
        aim.elementwise_channel(jnp.tanh, label_noise=0.05, nodes=(3, 64))



def _arctan_variance(k, s2):
    """Var(arctan(k h)) for h ~ N(0, s2): the mean is 0 (odd map), so ``E arctan(k h)^2`` by adaptive quadrature."""
    from scipy import integrate

    s = math.sqrt(s2)
    return 2 * integrate.quad(lambda z: norm.pdf(z) * math.atan(k * s * z) ** 2, 0.0, 12.0, limit=400,
                              epsabs=1e-15, epsrel=1e-13)[0]


def test_error_on_the_outputs_of_a_steep_smooth_map_at_zero_overlap():
    """Eq. (bo-label) at ``q = 0`` (``omega = 0``: the outputs' own variance) for ``arctan(5h)``, which turns
    on a scale 0.2 while ``h`` spreads over ``sqrt(3)``: the 64 Gauss-Legendre panels over
    ``omega +- 10 sqrt(v)`` (a panel edge at ``omega``) give ``T Var(f(h)), h ~ N(0, 2V')`` plus ``T(T - 1)``
    times the same at ``V'`` to the measured 1.4e-8 relative against scipy's adaptive quadrature (the
    same rule with 2048 panels: 2e-16), bound 5e-8."""
    ch = aim.elementwise_channel(lambda h: jnp.arctan(5.0 * h), name="arctan(5h)")
    T, rho = 2, 0.5
    Vp = 1 + rho
    ref = T * _arctan_variance(5.0, 2 * Vp) + T * (T - 1) * _arctan_variance(5.0, Vp)
    assert float(aim.label_space_error(0.0, rho, T=T, channel=ch)) == pytest.approx(ref, rel=5e-8)


def test_sigmoid_channel_traced_in_beta_is_the_eager_one():
    """The sigmoid channel under jax.jit in beta (its Structure is then built from a traced beta,
    with jnp) gives the eager result: log Z_out and g_out on entries inside the sigmoid's range and
    on censored ones (y = 0 below its flat, y = 1 above), and the same flat intervals
    (-inf, lo) and (hi, inf). Measured: log Z_out equal to the last bit, g_out to 3e-15."""
    from aim_tutorial.channels import sigmoid

    T, beta = 3, 1.5
    h = np.array(jax.random.normal(jax.random.key(3), (4, T, T))) * 2
    h = (h + np.swapaxes(h, -1, -2)) / 2
    y = np.array(jax.nn.sigmoid(beta * h - np.log(T)))
    y[0], y[1] = 0.0, 1.0  # censored at either end
    omega, V = 0.7 * h, 0.4
    for fn in (aim.log_partition, aim.output_score):
        eager = np.asarray(fn("sigmoid", y, omega, V, beta=beta))
        traced = np.asarray(jax.jit(lambda b: fn("sigmoid", y, omega, V, beta=b))(beta))
        assert np.all(np.isfinite(eager))
        np.testing.assert_allclose(traced, eager, rtol=1e-13, atol=1e-13)
    want = sigmoid._structure(T, beta)
    got = jax.jit(lambda b: sigmoid._structure(T, b))(beta)
    for field in ("flat_a", "flat_b", "piece_a", "piece_b"):
        np.testing.assert_array_equal(np.asarray(getattr(got, field)), getattr(want, field))
