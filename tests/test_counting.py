"""Tests of aim_tutorial/counting.py: the teacher's degrees of freedom (dof_fraction) and the
measurements one sample gives (alpha_scale), on numbers and arrays, at and around rho = 1, and
the refusal of T that is not an integer >= 1."""

import numpy as np
import pytest

from aim_tutorial.counting import alpha_scale, dof_fraction


@pytest.mark.parametrize("rho, want", [(1e-3, 2e-3 - 1e-6), (0.5, 0.75), (1.0, 1.0), (1.5, 1.0), (2.0, 1.0),
                                       (300.0, 1.0)])
def test_dof_fraction_on_numbers_and_arrays(rho, want):
    """2 rho - rho^2 up to rho = 1, where it reaches 1, and 1 beyond (a full-rank symmetric matrix has
    d^2 / 2 degrees of freedom whatever its width): the same on a number and on an array."""
    assert dof_fraction(rho) == pytest.approx(want, rel=1e-15)
    assert isinstance(dof_fraction(rho), float)
    arr = dof_fraction(np.array([rho, rho]))
    assert isinstance(arr, np.ndarray) and arr.shape == (2,)
    np.testing.assert_allclose(arr, want, rtol=1e-15)


def test_dof_fraction_is_continuous_and_flat_beyond_one():
    """The fraction is continuous at rho = 1 (2 - 1 = 1 from below) and constant beyond it, on a grid
    across rho = 1 (arrays of any shape)."""
    rho = np.linspace(0.5, 2.5, 40).reshape(5, 8)
    f = dof_fraction(rho)
    assert f.shape == rho.shape
    np.testing.assert_array_equal(f[rho >= 1], 1.0)
    np.testing.assert_allclose(f[rho < 1], 2 * rho[rho < 1] - rho[rho < 1] ** 2, rtol=1e-15)
    assert np.all(np.diff(f.ravel()) >= 0)


@pytest.mark.parametrize("T, softmax, entrywise", [(1, 0, 2), (2, 4, 6), (3, 10, 12), (np.int64(4), 18, 20)])
def test_alpha_scale(T, softmax, entrywise):
    """K = 2 x the independent entries of h that one sample reveals: T(T + 1) through an entrywise
    channel, two fewer through the softmax (h + c 1 1^T has the same softmax for every c); from
    T = 1, where the softmax reveals nothing, and for numpy integers."""
    assert alpha_scale(T) == softmax and alpha_scale(T, "softmax") == softmax
    assert alpha_scale(T, "entrywise") == entrywise
    assert isinstance(alpha_scale(T), int)


@pytest.mark.parametrize("T", [0, -1, True, False, 2.0, 2.5, "2", None])
def test_alpha_scale_refuses_what_is_not_an_integer_from_one(T):
    """T must be an integer >= 1: 0, negative numbers, booleans (an int subclass), floats (even 2.0),
    strings and None are refused by name."""
    with pytest.raises(ValueError, match=r"T must be an integer >= 1"):
        alpha_scale(T)


def test_alpha_scale_refuses_an_unknown_kind():
    with pytest.raises(ValueError, match="kind must be 'softmax', 'entrywise' or 'causal'"):
        alpha_scale(2, "hardmax")
