"""Tests of aim_tutorial/channels/base.py: the Channel dataclass (identity, frozen), the output and
symmetry checks (check_outputs, check_symmetric, symmetric_gaussian's shape), and gauss_norm, the
Gaussian normalisation of the log-partitions, checked in absolute value against independent integrals."""

import dataclasses
import math

import jax
import numpy as np
import pytest
from scipy import integrate
from scipy.stats import multivariate_normal

import aim_tutorial as aim
from aim_tutorial import channels as ch
from aim_tutorial.channels import base


def _upper(A):
    """The T(T+1)/2 entries A_ab, a <= b, of the last two axes (diagonal first, then the off-diagonal)."""
    T = A.shape[-1]
    iu = np.triu_indices(T, 1)
    return np.concatenate([np.diagonal(A, axis1=-2, axis2=-1), A[..., iu[0], iu[1]]], axis=-1)


def _upper_cov(T, Vp):
    """Covariance of the upper entries of h given omega: 2V' on the diagonal entries, V' off it."""
    return np.diag([2 * Vp] * T + [Vp] * (T * (T - 1) // 2))


def test_channel_objects_compare_and_hash_by_identity():
    """Channels compare and hash by identity (the docstring: one channel is one static argument of the
    jitted functions), so a copy with the very same fields is a different channel, not an equal one."""
    lin = ch.get("linear")
    copy = dataclasses.replace(lin)
    assert copy is not lin
    assert lin == lin
    assert copy != lin
    assert len({lin, copy}) == 2
    assert hash(lin) == object.__hash__(lin)


def test_channel_objects_are_frozen():
    """A Channel is immutable: assigning a field raises (a registered channel cannot be altered in place
    behind the jitted functions that took it as a static argument)."""
    copy = dataclasses.replace(ch.get("linear"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        copy.name = "other"
    with pytest.raises(dataclasses.FrozenInstanceError):
        copy.label_noise = 1.0
    assert copy.name == "linear" and copy.label_noise == 0.0


def test_check_outputs_accepts_one_unbatched_sample():
    """Outputs of shape (T, T), one sample without batch axes, are valid (shape (..., T, T) with no
    leading axis): check_outputs accepts them, and log_partition of one sample is the batched value."""
    y = np.array([[0.7, 0.2, -0.1], [0.2, -0.4, 0.3], [-0.1, 0.3, 1.1]])
    omega = np.array([[0.1, 0.0, 0.2], [0.0, 0.3, -0.2], [0.2, -0.2, -0.5]])
    assert base.check_outputs(ch.get("linear"), "y", y, 3, 1.0) is None
    p = np.full((2, 2), 0.5)
    assert base.check_outputs(ch.get("softmax"), "y", p, 2, 1.0) is None
    one = float(aim.log_partition("linear", y, omega, 0.4))
    batched = np.asarray(aim.log_partition("linear", y[None], omega[None], 0.4))
    assert batched.shape == (1,)
    assert one == pytest.approx(float(batched[0]), rel=1e-14)


def test_check_outputs_rejects_outputs_with_one_axis():
    """Outputs with fewer than two axes are refused by the rank check, with a message that names the
    argument and says that it needs at least two axes."""
    with pytest.raises(ValueError, match=r"y must have at least 2 axes, got shape \(3,\)"):
        base.check_outputs(ch.get("softmax"), "y", np.full(3, 1 / 3), 3, 1.0)
    with pytest.raises(ValueError, match=r"labels must have at least 2 axes, got shape \(\)"):
        base.check_outputs(ch.get("linear"), "labels", np.float64(0.5), 1, 1.0)


def test_check_symmetric_accepts_one_matrix_and_rejects_one_axis():
    """check_symmetric takes a single (T, T) matrix (no batch axis) and returns it unchanged; an array
    with one axis is refused by name (a ValueError, not an index error on the missing axis)."""
    A = np.array([[1.0, 2.0], [2.0, -3.0]])
    assert base.check_symmetric("omega", A) is A
    with pytest.raises(ValueError, match=r"omega must have at least 2 axes, got shape \(4,\)"):
        base.check_symmetric("omega", np.arange(4.0))


def test_check_symmetric_tolerance_is_relative_to_the_largest_entry():
    """The symmetry tolerance is atol * max(1, max|A|): a matrix with entries ~1e4 whose asymmetry is
    1e-5 (relative 1e-9, below atol = 1e-8) is accepted, while the same asymmetry on entries of order 1
    (relative 1e-5) is refused; at scale 1e4 the refusal starts above 1e-8 * 1e4 = 1e-4."""
    S = np.array([[2.0, 0.5, -1.0], [0.5, 1.0, 0.25], [-1.0, 0.25, 3.0]])
    big = 1e4 * S / np.max(np.abs(S))  # largest entry 1e4
    big[0, 1] += 1e-5
    assert base.check_symmetric("omega", big) is big
    small = S.copy()
    small[0, 1] += 1e-5
    with pytest.raises(ValueError, match="omega must be symmetric"):
        base.check_symmetric("omega", small)
    big2 = 1e4 * S / np.max(np.abs(S))
    big2[0, 1] += 3e-4
    with pytest.raises(ValueError, match="omega must be symmetric"):
        base.check_symmetric("omega", big2)


def test_symmetric_gaussian_shape_rules(key):
    """symmetric_gaussian takes any shape (..., T, T), including a single (T, T) matrix, and refuses a
    shape with fewer than two sizes with a ValueError naming ``shape`` (not an index error)."""
    z = ch.symmetric_gaussian(key, (3, 3))
    assert z.shape == (3, 3)
    np.testing.assert_array_equal(np.asarray(z), np.asarray(z).T)
    for bad in [(3,), ()]:
        with pytest.raises(ValueError, match=r"shape must be \(\.\.\., T, T\)"):
            ch.symmetric_gaussian(key, bad)


@pytest.mark.parametrize("T", [2, 3, 4])
def test_linear_log_partition_is_the_gaussian_density_of_the_upper_entries(key, T):
    """log Z_out of the linear channel is, in absolute value, the log-density of the T(T+1)/2 entries
    y_ab, a <= b, of y = omega + sqrt(V') zeta: independent Gaussians of variances 2V' (diagonal) and
    V' (off), V' = V + noise/2 (scipy's multivariate normal). Agreement to float64 rounding."""
    V, noise = 0.35, 0.5
    Vp = V + noise / 2
    k1, k2 = jax.random.split(key)
    omega = np.asarray(0.8 * ch.symmetric_gaussian(k1, (5, T, T)))
    y = omega + math.sqrt(Vp) * np.asarray(ch.symmetric_gaussian(k2, (5, T, T)))
    lz = np.asarray(aim.log_partition("linear", y, omega, V, noise=noise))
    ref = [multivariate_normal(_upper(o), _upper_cov(T, Vp)).logpdf(_upper(yy)) for yy, o in zip(y, omega)]
    np.testing.assert_allclose(lz, ref, rtol=1e-12)


def _softmax_reference(h, omega, Vp):
    """log of the integral over c of the Gaussian density of the upper entries of h + c 11^T (the
    direction that the softmax erases), by adaptive quadrature around the peak."""
    T = h.shape[-1]
    mvn = multivariate_normal(_upper(omega), _upper_cov(T, Vp))
    ones = np.ones((T, T))

    def logf(c):
        return mvn.logpdf(_upper(h + c * ones))

    grid = np.linspace(-20, 20, 4001)
    c0 = grid[np.argmax([logf(c) for c in grid])]
    f0 = logf(c0)
    val, err = integrate.quad(lambda c: math.exp(logf(c) - f0), c0 - 30, c0 + 30, points=[c0],
                              epsabs=0, epsrel=1e-13, limit=200)
    return f0 + math.log(val)


@pytest.mark.parametrize("T", [2, 3])
def test_softmax_log_partition_integrates_out_the_constant_direction(key, T):
    """For the softmax, y determines h only modulo c 11^T, so log Z_out (Jacobian from y to the
    log-ratios left out, as documented) is the log of the integral over c of the Gaussian density of
    the T(T+1)/2 upper entries of h + c 11^T (variances 2V', V'), with the measure dc. Checked in
    absolute value against quadrature, for y and for log y (log_outputs=True), at beta != 1; measured
    agreement 2e-16 relative, the bound 1e-12 leaves room for the quadrature's error (epsrel 1e-13)."""
    V, noise, beta = 0.3, 0.2, 1.7
    Vp = V + noise / 2
    k1, k2 = jax.random.split(key)
    omega = np.asarray(0.7 * ch.symmetric_gaussian(k1, (3, T, T)))
    h = omega + math.sqrt(Vp) * np.asarray(ch.symmetric_gaussian(k2, (3, T, T)))
    y = aim.softmax(h, beta)
    lz = np.asarray(aim.log_partition("softmax", y, omega, V, beta=beta, noise=noise))
    lz_log = np.asarray(aim.log_partition("softmax", np.log(np.asarray(y)), omega, V, beta=beta, noise=noise,
                                          log_outputs=True))
    ref = [_softmax_reference(hh, o, Vp) for hh, o in zip(h, omega)]
    np.testing.assert_allclose(lz, ref, rtol=1e-12)
    np.testing.assert_allclose(lz_log, ref, rtol=1e-12)


def test_round_bits_groups_rounding_noise_at_every_scale():
    """The key that groups a state-evolution line's points: 40 significant bits at any magnitude."""
    from aim_tutorial.channels.base import round_bits

    for x in (1.234567891e-13, 1.234567891e-7, 0.7, 1.2345678901234567e4, -2.5e8):
        assert round_bits(x) == round_bits(x * (1 + 4e-16)) == round_bits(x * (1 - 4e-16)), x
        assert abs(round_bits(x) - x) <= 2.0**-40 * abs(x), x
        assert round_bits(x) != round_bits(x * (1 + 1e-11)), x  # points 1e-11 apart keep their own tables
    assert round_bits(1 + 2.0**-39) == 1 + 2.0**-39  # 40 bits: the 40th of 1 + 2^-39 stays
    z = round_bits(np.array([0.0, np.inf, -np.inf, np.nan]))
    assert z[0] == 0 and z[1] == np.inf and z[2] == -np.inf and np.isnan(z[3])
