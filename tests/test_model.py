"""Tests of aim_tutorial.model: shapes, moments, invariances, channels, validation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import aim_tutorial as aim


def test_teacher_shape_symmetry_rank(key):
    d, rho = 60, 0.5
    S = aim.sample_teacher(key, d, rho)
    assert S.shape == (d, d)
    np.testing.assert_allclose(S, S.T, atol=1e-14)
    ev = np.linalg.eigvalsh(np.asarray(S))
    assert ev.min() > -1e-12  # positive semi-definite
    assert np.sum(ev > 1e-10) == aim.teacher_width(d, rho)  # rank r = rho d


def test_teacher_moments(key):
    # E S = sqrt(rho) I and Tr(S^2)/d = 1 + rho + O(1/d): average over 20 teachers at d = 200,
    # the standard error of both is O(1/d) = 0.005; tolerance 0.02.
    d, rho = 200, 0.5
    Ss = jax.vmap(lambda k: aim.sample_teacher(k, d, rho))(jax.random.split(key, 20))
    assert abs(float(jnp.mean(jnp.trace(Ss, axis1=1, axis2=2))) / d - np.sqrt(rho)) < 0.02
    q0 = float(jnp.mean(jnp.sum(Ss**2, axis=(1, 2)))) / d
    assert abs(q0 - (1 + rho)) < 0.02


@pytest.mark.slow
def test_attention_indices_match_definition(key):
    k1, k2 = jax.random.split(key)
    d, T = 30, 4
    S = aim.sample_teacher(k1, d, 0.3)
    X = aim.sample_tokens(k2, 5, T, d)
    h = aim.attention_indices(X, S)
    Xn, Sn = np.asarray(X), np.asarray(S)
    for mu in range(5):
        ref = Xn[mu] @ Sn @ Xn[mu].T / np.sqrt(d) - np.trace(Sn) / np.sqrt(d) * np.eye(T)
        np.testing.assert_allclose(h[mu], ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(h, np.swapaxes(h, 1, 2), atol=1e-12)
    # the trace-form view: h_ab = Tr(Z_ab S) with Z_ab = (x_a x_b^T + x_b x_a^T)/(2 sqrt d) - delta_ab I/sqrt d
    a, b = 0, 2
    Z = (np.outer(Xn[0, a], Xn[0, b]) + np.outer(Xn[0, b], Xn[0, a])) / (2 * np.sqrt(d))
    assert abs(np.trace(Z @ Sn) - h[0, a, b]) < 1e-12


@pytest.mark.slow
def test_h_covariance_structure(key):
    # Var h_aa = 2 Q0, Var h_ab = Q0, distinct entries uncorrelated; Q0 = Tr(S^2)/d of this teacher.
    # 40000 samples: standard error of a variance ~ sqrt(2/n) * var ~ 0.7% relative; tolerance 5%.
    k1, k2 = jax.random.split(key)
    d, T, n = 100, 3, 40000
    S = aim.sample_teacher(k1, d, 0.5)
    q0 = float(jnp.sum(S**2)) / d
    h = aim.attention_indices(aim.sample_tokens(k2, n, T, d), S)
    iu = np.triu_indices(T)
    v = np.asarray(h)[:, iu[0], iu[1]]
    C = np.cov(v.T) / q0
    expected = np.diag([2.0 if i == j else 1.0 for i, j in zip(*iu)])
    np.testing.assert_allclose(C, expected, atol=0.05)


@pytest.mark.parametrize("channel", ["softmax", "hardmax", "linear"])
def test_sample_data_shapes_and_channels(key, channel):
    k1, k2 = jax.random.split(key)
    S = aim.sample_teacher(k1, 20, 0.5)
    X, y = aim.sample_data(k2, S, n=7, T=3, channel=channel)
    assert X.shape == (7, 3, 20) and y.shape == (7, 3, 3)
    h = aim.attention_indices(X, S)
    if channel == "softmax":
        np.testing.assert_allclose(y.sum(-1), 1.0, atol=1e-12)
        np.testing.assert_allclose(y, jax.nn.softmax(h, axis=-1), atol=1e-12)
    elif channel == "hardmax":
        assert set(np.unique(np.asarray(y))) <= {0.0, 1.0}
        np.testing.assert_array_equal(np.argmax(y, -1), np.argmax(h, -1))
    else:
        np.testing.assert_allclose(y, h, atol=1e-12)


def test_softmax_is_finite_at_large_beta_and_tends_to_hardmax(key):
    k1, k2 = jax.random.split(key)
    S = aim.sample_teacher(k1, 40, 0.5)
    X, y = aim.sample_data(k2, S, n=50, T=4, beta=1e3)
    assert bool(jnp.all(jnp.isfinite(y)))
    X, y = aim.sample_data(k2, S, n=50, T=4, beta=1e8)  # gaps between logits are O(1), so the rows saturate
    assert bool(jnp.all(jnp.isfinite(y)))
    _, y_hard = aim.sample_data(k2, S, n=50, T=4, channel="hardmax")
    np.testing.assert_allclose(y, y_hard, atol=1e-6)
    _, y_small = aim.sample_data(k2, S, n=50, T=4, beta=1e-12)  # beta -> 0: uniform rows
    np.testing.assert_allclose(y_small, 0.25, atol=1e-10)
    with pytest.raises(ValueError, match="beta"):  # beta = 0 is refused, as by the theory
        aim.sample_data(k2, S, n=50, T=4, beta=0.0)


def test_softmax_row_shift_invariance():
    h = jnp.array([[0.3, -1.0, 2.0], [0.5, 0.1, -0.2], [1.0, 1.0, 0.0]])
    shift = jnp.array([[5.0], [-3.0], [0.7]])
    np.testing.assert_allclose(aim.softmax(h, 2.0), aim.softmax(h + shift, 2.0), atol=1e-14)


def test_noise_convention(key):
    Z = aim.symmetric_noise(key, (200000, 2, 2), 0.8)
    np.testing.assert_allclose(Z, np.swapaxes(Z, 1, 2))
    assert abs(float(jnp.var(Z[:, 0, 0])) - 0.8) < 0.01
    assert abs(float(jnp.var(Z[:, 0, 1])) - 0.4) < 0.01


def test_noisy_linear_channel(key):
    k1, k2 = jax.random.split(key)
    S = aim.sample_teacher(k1, 30, 0.5)
    X, y = aim.sample_data(k2, S, n=20000, T=2, channel="linear", noise=0.5)
    r = np.asarray(y - aim.attention_indices(X, S))
    assert abs(r[:, 0, 0].var() - 0.5) < 0.03 and abs(r[:, 0, 1].var() - 0.25) < 0.015


def test_deep_aim_matches_literal_recursion(key):
    keys = jax.random.split(key, 4)
    d = 50
    Ss = [aim.sample_teacher(k, d, 0.5) for k in keys[:3]]
    for c in (0.0, 1.0, 0.5):
        X, y = aim.sample_deep_data(keys[3], Ss, n=10, T=3, c=c, beta=0.8)
        np.testing.assert_allclose(y, aim.deep_attention_literal(X, Ss, beta=0.8, c=c), atol=1e-12)
    # one layer of deep attention is the softmax channel
    X, y1 = aim.sample_deep_data(keys[3], Ss[:1], n=10, T=3)
    _, y2 = aim.sample_data(keys[3], Ss[0], n=10, T=3, channel="softmax")
    np.testing.assert_allclose(y1, y2, atol=1e-12)


def test_channels_come_through_the_registry_only(key):
    """sample_data takes a registered name or a Channel; a bare function is refused with the way to wrap
    it, and the wrapped one gives the function's outputs; "deep" points to sample_deep_data."""
    k1, k2 = jax.random.split(key)
    S = aim.sample_teacher(k1, 20, 0.5)
    with pytest.raises(TypeError, match="^channel must be a registered name or a Channel, got .*generic_channel"):
        aim.sample_data(k2, S, n=5, T=2, channel=jnp.tanh)
    with pytest.raises(ValueError, match="sample_deep_data"):
        aim.sample_data(k2, [S, S], n=5, T=2, channel="deep")
    X, y = aim.sample_data(k2, S, n=5, T=2, channel=aim.elementwise_channel(lambda h: h + h**3))
    h = aim.attention_indices(X, S)
    np.testing.assert_allclose(y, h + h**3, atol=1e-12)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(d=0, rho=0.5), "d"),
        (dict(d=10, rho=0.0), "rho"),
        (dict(d=10, rho=-1.0), "rho"),
        (dict(d=10, rho=float("nan")), "rho"),
    ],
)
def test_teacher_validation(key, kwargs, name):
    with pytest.raises(ValueError, match=name):
        aim.sample_teacher(key, **kwargs)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(n=0, T=2), "n"),
        (dict(n=5, T=0), "T"),
        (dict(n=5, T=2, beta=-1.0), "beta"),
        (dict(n=5, T=2, noise=-0.1), "noise"),
        (dict(n=5, T=2, channel="nope"), "channel"),
        (dict(n=2.5, T=2), "n"),
    ],
)
def test_sample_data_validation(key, kwargs, name):
    S = aim.sample_teacher(key, 10, 0.5)
    with pytest.raises(ValueError, match=name):
        aim.sample_data(key, S, **kwargs)


def test_shape_validation(key):
    S = aim.sample_teacher(key, 10, 0.5)
    with pytest.raises(ValueError, match="S"):
        aim.sample_data(key, S[:, :5], n=3, T=2)
    with pytest.raises(ValueError, match="symmetric"):
        aim.sample_data(key, S + jnp.triu(jnp.ones((10, 10)), 1), n=3, T=2)
    with pytest.raises(ValueError, match="share d"):
        aim.attention_indices(jnp.ones((3, 2, 11)), S)
    with pytest.raises(ValueError, match="list"):
        aim.sample_deep_data(key, S, n=3, T=2)
    with pytest.raises(ValueError, match="shape"):
        aim.sample_deep_data(key, [S, aim.sample_teacher(key, 12, 0.5)], n=3, T=2)


# --- hostile input (issue: every bad input a clear error, no silent NaN) -------------------------


def test_memory_estimate_refuses_before_allocating(key, monkeypatch):
    # d = 200000 would be a 320 GB teacher and n = 1e9 tokens 160 GB: both crashed the interpreter
    with pytest.raises(ValueError, match="sample_teacher.*GiB"):
        aim.sample_teacher(key, 200_000, 1.0)
    with pytest.raises(ValueError, match="sample_tokens.*GiB"):
        aim.sample_tokens(key, 10**9, 2, 10)
    monkeypatch.setenv("AIM_MAX_BYTES", "1000")  # the limit can be set: 8 * (10*10 + 10*5) > 1000
    with pytest.raises(ValueError, match="AIM_MAX_BYTES"):
        aim.sample_teacher(key, 10, 0.5)


@pytest.mark.slow
def test_log_outputs_are_finite_where_probabilities_underflow(key):
    S = aim.sample_teacher(key, 100, 0.5)
    k = jax.random.fold_in(key, 1)
    X, y = aim.sample_data(k, S, 50, 3, beta=300.0)
    X2, logy = aim.sample_data(k, S, 50, 3, beta=300.0, log_outputs=True)
    assert np.any(np.asarray(y) == 0)  # the probabilities underflow at beta = 300 ...
    assert np.all(np.isfinite(logy)) and np.all(np.asarray(logy) <= 0)  # ... the logs do not
    np.testing.assert_array_equal(X, X2)
    np.testing.assert_allclose(np.exp(logy), y, atol=1e-15)
    np.testing.assert_allclose(jax.scipy.special.logsumexp(logy, axis=-1), 0, atol=1e-12)
    with pytest.raises(ValueError, match="log_outputs"):
        aim.sample_data(k, S, 5, 3, channel="hardmax", log_outputs=True)
    with pytest.raises(TypeError, match="log_outputs"):
        aim.sample_data(k, S, 5, 3, log_outputs="yes")


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda X, S, k: aim.attention_indices(X.at[0, 0, 0].set(np.nan), S), "X"),
        (lambda X, S, k: aim.attention_indices(X.at[0, 0, 0].set(np.inf), S), "X"),
        (lambda X, S, k: aim.attention_indices(X + 0j, S), "X"),
        (lambda X, S, k: aim.softmax(jnp.ones((2, 2)), np.nan), "beta"),
        (lambda X, S, k: aim.softmax(jnp.ones((2, 2)), np.inf), "beta"),
        (lambda X, S, k: aim.hardmax(jnp.array([[np.nan, 1.0]])), "h"),
        (lambda X, S, k: aim.deep_as_aim([jnp.ones((2, 2))], beta=1.0, c=np.nan), "c"),
        (lambda X, S, k: aim.deep_as_aim([], beta=1.0, c=1.0), "hs"),
        (lambda X, S, k: aim.deep_as_aim([jnp.ones((2, 2)), jnp.ones((3, 3))], beta=1.0, c=1.0), "hs"),
        (lambda X, S, k: aim.deep_attention_literal(X, [], beta=1.0, c=1.0), "Ss"),
        (lambda X, S, k: aim.deep_attention_literal(X, [S[:5, :5]], beta=1.0, c=1.0), "Ss"),
        (lambda X, S, k: aim.deep_attention_literal(X, [S.at[0, 1].set(5.0)], beta=1.0, c=1.0), "Ss"),
        (lambda X, S, k: aim.sample_teacher(k, 10, True), "rho"),
        (lambda X, S, k: aim.sample_teacher(k, 10, "0.5"), "rho"),
        (lambda X, S, k: aim.sample_teacher(0, 10, 0.5), "key"),
        (lambda X, S, k: aim.symmetric_noise(k, (2, 2), -1.0), "noise"),
        (lambda X, S, k: aim.symmetric_noise(k, (2, 3), 1.0), "shape"),
        (lambda X, S, k: aim.apply_channel(jnp.ones((2, 3)), "softmax"), "h"),
        (lambda X, S, k: aim.sample_deep_data(k, [S, S], 5, 2, c=np.nan), "c"),
    ],
)
def test_bad_model_inputs_name_the_argument(key, call, name):
    S = aim.sample_teacher(key, 10, 0.5)
    X = aim.sample_tokens(key, 3, 2, 10)
    with pytest.raises((ValueError, TypeError), match=rf"^{name}\b|{name}\["):
        call(X, S, key)


@pytest.mark.slow
def test_checks_pass_tracers_through(key):
    # inside jit, grad and vmap the values cannot be checked; the shapes still are
    S = aim.sample_teacher(key, 10, 0.5)
    X = aim.sample_tokens(key, 3, 2, 10)
    g = jax.grad(lambda S1: jnp.sum(aim.deep_attention_literal(X[0], [S1, S], beta=1.0, c=1.0) ** 2))(S)
    assert g.shape == (10, 10) and np.all(np.isfinite(g))
    y = jax.jit(aim.softmax)(jnp.ones((2, 2)), 1.0)
    np.testing.assert_allclose(y, 0.5)
    Ss = jax.vmap(lambda k: aim.sample_teacher(k, 10, 0.5))(jax.random.split(key, 3))
    assert Ss.shape == (3, 10, 10)


# --- property-based tests (Hypothesis) ------------------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

# a few fixed sizes (each new shape is a new compilation), the values drawn freely
_FAST = settings(max_examples=25, deadline=None)
_finite_h = st.floats(-1e3, 1e3, allow_nan=False)


@pytest.mark.slow
@_FAST
@given(d=st.sampled_from([1, 7]), rho=st.floats(1e-3, 5.0), seed=st.integers(0, 2**31 - 1))
def test_teacher_is_symmetric_psd_of_rank_r(d, rho, seed):
    S = np.asarray(aim.sample_teacher(jax.random.key(seed), d, rho))
    assert S.shape == (d, d) and np.all(np.isfinite(S))
    np.testing.assert_allclose(S, S.T, atol=1e-12)
    ev = np.linalg.eigvalsh(S)
    assert ev.min() > -1e-10 * max(1.0, ev.max())
    assert np.sum(ev > 1e-9 * max(1.0, ev.max())) <= min(d, aim.teacher_width(d, rho))


@_FAST
@given(T=st.sampled_from([1, 4]), n=st.just(3), beta=st.floats(0.0, 1e6),
       h=st.lists(_finite_h, min_size=100, max_size=100))
def test_softmax_rows_are_probabilities_and_hardmax_one_hot(T, n, beta, h):
    hh = jnp.asarray(np.resize(np.asarray(h), (n, T, T)))
    y = np.asarray(aim.softmax(hh, beta))
    assert np.all(np.isfinite(y)) and np.all(y >= 0)
    np.testing.assert_allclose(y.sum(-1), 1.0, atol=1e-12)
    yh = np.asarray(aim.hardmax(hh))
    assert set(np.unique(yh)) <= {0.0, 1.0} and np.all(yh.sum(-1) == 1)


@_FAST
@given(d=st.just(6), T=st.sampled_from([2, 3]), n=st.just(4),
       beta=st.floats(0.0, 1e4, exclude_min=True),
       seed=st.integers(0, 2**31 - 1))
@pytest.mark.slow
def test_sampled_indices_symmetric_and_log_outputs_normalised(d, T, n, beta, seed):
    k1, k2 = jax.random.split(jax.random.key(seed))
    S = aim.sample_teacher(k1, d, 0.5)
    X, logy = aim.sample_data(k2, S, n, T, beta=beta, log_outputs=True)
    h = np.asarray(aim.attention_indices(X, S))
    assert h.shape == (n, T, T)
    np.testing.assert_allclose(h, np.swapaxes(h, -1, -2), atol=1e-10)
    assert np.all(np.isfinite(logy)) and np.all(np.asarray(logy) <= 1e-12)
    np.testing.assert_allclose(jax.scipy.special.logsumexp(logy, axis=-1), 0, atol=1e-10)


_not_a_positive_number = st.one_of(
    st.floats(max_value=0.0), st.just(float("nan")), st.just(float("inf")), st.booleans(), st.text(max_size=3),
    st.none(), st.complex_numbers(allow_nan=False, min_magnitude=1e-3).filter(lambda z: z.imag != 0),
)
_not_a_size = st.one_of(st.integers(max_value=0), st.floats(allow_nan=True), st.booleans(), st.text(max_size=3),
                        st.none())


@pytest.mark.slow
@_FAST
@given(bad=_not_a_positive_number)
def test_bad_width_ratio_named(bad):
    with pytest.raises((ValueError, TypeError), match=r"^rho "):
        aim.sample_teacher(jax.random.key(0), 4, bad)


@_FAST
@given(bad=_not_a_size, which=st.sampled_from(["n", "T", "d"]))
def test_bad_sizes_named(bad, which):
    kw = dict(n=2, T=2, d=3)
    kw[which] = bad
    with pytest.raises((ValueError, TypeError), match=rf"^{which} "):
        aim.sample_tokens(jax.random.key(0), **kw)


# --------------------------------------------------------------------------- found by mutation testing
# Each test below kills mutants of model.py that the fast tests let survive (make mutation).


def test_n_samples_is_at_least_one():
    assert aim.n_samples(1e-6, 10) == 1          # round(1e-4) = 0: one sample, not none
    assert aim.n_samples(0.004, 10) == 1         # round(0.4) = 0
    assert aim.n_samples(0.016, 10) == 2         # round(1.6) = 2: the floor does not bind


def test_make_instance_defaults_give_softmax_probabilities(key):
    inst = aim.make_instance(key, 8, 0.5, 0.2, 3)
    y = np.asarray(inst.y)
    assert np.all(y > 0) and np.all(y <= 1)                       # probabilities, not their logs
    np.testing.assert_allclose(y.sum(-1), 1.0, atol=1e-12)
    deep = aim.make_instance(key, 8, [0.5, 0.5], 0.2, 2, channel="deep")
    explicit = aim.make_instance(key, 8, [0.5, 0.5], 0.2, 2, channel="deep", beta=1.0, c=1.0)
    np.testing.assert_array_equal(deep.y, explicit.y)            # c = 1 by default


def test_log_outputs_are_the_log_of_the_outputs(key):
    k1, k2 = jax.random.split(key)
    S = aim.sample_teacher(k1, 6, 0.5)
    _, y = aim.sample_data(k2, S, 5, 3, beta=2.0)
    _, logy = aim.sample_data(k2, S, 5, 3, beta=2.0, log_outputs=True)
    np.testing.assert_allclose(np.exp(logy), y, atol=1e-14)      # row-wise, as the outputs


def test_deep_as_aim_defaults_and_batches(key):
    hs = [jax.random.normal(k, (4, 3, 3)) for k in jax.random.split(key, 2)]
    hs = [(h + jnp.swapaxes(h, -1, -2)) / 2 for h in hs]
    np.testing.assert_array_equal(aim.deep_as_aim(hs), aim.deep_as_aim(hs, beta=1.0, c=1.0))
    one = aim.deep_as_aim([h[2] for h in hs])
    np.testing.assert_allclose(aim.deep_as_aim(hs)[2], one, atol=1e-15)


def test_a_plain_callable_channel_sees_one_matrix(key):
    h = jax.random.normal(key, (2, 5, 3, 3))
    out = aim.apply_channel(h, lambda m: jnp.full(m.shape, m.ndim, dtype=m.dtype))
    np.testing.assert_array_equal(out, 2.0)          # vmapped down to single (T, T) matrices


def test_inputs_of_too_few_axes_are_refused(key):
    S = aim.sample_teacher(key, 4, 0.5)
    x = jnp.ones(4)                                   # one token, not (..., T, d)
    with pytest.raises(ValueError, match="X must have at least 2 axes"):
        aim.attention_indices(x, S)
    with pytest.raises(ValueError, match="X must have at least 2 axes"):
        aim.deep_attention_literal(x, [S])
    # a single (T, T) matrix is a valid shape for the noise; (T,) and (T, T+1) are not
    assert aim.symmetric_noise(key, (3, 3), 0.5).shape == (3, 3)
    for bad in [(3,), (3, 4)]:
        with pytest.raises(ValueError, match="shape"):
            aim.symmetric_noise(key, bad, 0.5)


def test_label_noise_has_the_variance_asked_for(key):
    k1, k2 = jax.random.split(key)
    S = aim.sample_teacher(k1, 6, 0.5)
    _, y0 = aim.sample_data(k2, S, 4000, 2, channel="linear")
    for label_noise in (0.25, 0.5):                   # below 1 too: any positive value adds noise
        _, y = aim.sample_data(k2, S, 4000, 2, channel="linear", label_noise=label_noise)
        e = np.asarray(y - y0).ravel()
        # 16000 entries: the sample variance is within 5 standard errors sqrt(2/N) of its value
        assert abs(e.var() / label_noise - 1) < 5 * np.sqrt(2 / e.size), (label_noise, e.var())
        assert abs(e.mean()) < 5 * np.sqrt(label_noise / e.size)


def test_log_outputs_only_for_the_noiseless_softmax(key):
    S = aim.sample_teacher(key, 4, 0.5)
    for kw in ({"channel": "linear"}, {"label_noise": 0.1}):
        with pytest.raises(ValueError, match="log_outputs=True is defined for channel='softmax'"):
            aim.sample_data(key, S, 3, 2, log_outputs=True, **kw)


def test_deep_log_outputs_are_the_logs_and_keep_what_saturates(key):
    """``channel="deep"`` with ``log_outputs``: the same draws, the logs of the probabilities where those
    are not saturated, and finite log-ratios where the probabilities are exactly 0 or 1 in float64."""
    Ss = aim.deep.sample_deep_teacher(key, 20, [0.5, 0.5])
    X, y = aim.sample_deep_data(key, Ss, 400, 2, beta=10.0)
    X2, logy = aim.sample_deep_data(key, Ss, 400, 2, beta=10.0, log_outputs=True)
    y, logy = np.asarray(y), np.asarray(logy)
    assert np.array_equal(np.asarray(X), np.asarray(X2))
    ok = (y > 1e-12) & (y < 1 - 1e-12)
    np.testing.assert_allclose(logy[ok], np.log(y[ok]), rtol=1e-9, atol=1e-12)
    # at beta = 10 some outputs saturate in float64 (their log-ratio is lost), the logs keep them finite
    assert np.any(y == 1.0) and np.all(np.isfinite(logy)) and np.all(logy <= 0)
    np.testing.assert_allclose(np.exp(logy).sum(axis=-1), 1.0, rtol=1e-12)


def test_make_instance_key_scheme(key):
    """The instance is named by its key: the teacher, the data and the algorithm's key from
    one split in three (stored experiments depend on it)."""
    inst = aim.make_instance(key, 10, 0.5, 0.1, 2)
    k_teacher, k_data, k_algorithm = jax.random.split(key, 3)
    np.testing.assert_array_equal(inst.S, aim.sample_teacher(k_teacher, 10, 0.5))
    X, y = aim.sample_data(k_data, inst.S, 10, 2)
    np.testing.assert_array_equal(inst.X, X)
    np.testing.assert_array_equal(jax.random.key_data(inst.key), jax.random.key_data(k_algorithm))
    assert inst.n == aim.n_samples(0.1, 10) == 10 and aim.n_samples(0.1, 50) == 250


def test_sample_data_default_skip_strength_is_one(key):
    k1, k2 = jax.random.split(key)
    Ss = aim.deep.sample_deep_teacher(k1, 6, [0.5, 0.5])
    _, y = aim.sample_deep_data(k2, Ss, 5, 2)
    _, y1 = aim.sample_deep_data(k2, Ss, 5, 2, c=1.0)
    np.testing.assert_array_equal(y, y1)


def test_smallest_sizes_are_accepted(key):
    """The lower bounds of the argument checks are the documented ones: d = n = T = 1 are valid, a
    noise shape may have a zero batch size, the teacher's width and the sample count are at least 1
    (and are 1 when rho d or alpha d^2 rounds to 0)."""
    assert aim.teacher_width(1, 0.01) == 1 and aim.teacher_width(4, 0.5) == 2
    assert aim.n_samples(1e-9, 1) == 1 and aim.n_samples(3.0, 1) == 3 and aim.n_samples(0.5, 4) == 8
    S = aim.sample_teacher(key, 1, 0.5)
    assert S.shape == (1, 1)
    assert aim.sample_tokens(key, 1, 1, 1).shape == (1, 1, 1)
    assert aim.symmetric_noise(key, (0, 2, 2), 0.5).shape == (0, 2, 2)
    assert aim.symmetric_noise(key, (1, 1), 0.5).shape == (1, 1)
    X, y = aim.sample_data(key, S, n=1, T=1)
    assert X.shape == (1, 1, 1) and y.shape == (1, 1, 1)
    inst = aim.make_instance(key, 1, 0.5, 1.0, T=1)
    assert inst.X.shape == (1, 1, 1) and inst.S.shape == (1, 1)


def test_memory_guard_counts_float64_entries(key, monkeypatch):
    """sample_tokens refuses exactly the requests above the limit, counted as n T d entries of 8
    bytes (float64): at AIM_MAX_BYTES = 8 n T d the request passes, one sample more is refused."""
    n, T, d = 10, 2, 5
    monkeypatch.setenv("AIM_MAX_BYTES", str(8 * n * T * d))
    assert aim.sample_tokens(key, n, T, d).shape == (n, T, d)
    with pytest.raises(ValueError, match="sample_tokens"):
        aim.sample_tokens(key, n + 1, T, d)
    monkeypatch.setenv("AIM_MAX_BYTES", str(8 * (d * d + d * 2)))  # the teacher and its weights, r = 2
    assert aim.sample_teacher(key, d, 0.4).shape == (d, d)
    with pytest.raises(ValueError, match="sample_teacher"):
        aim.sample_teacher(key, d + 1, 0.4)
    monkeypatch.setenv("AIM_MAX_BYTES", str(8 * 3 * 2 * 2))
    assert aim.symmetric_noise(key, (3, 2, 2), 0.5).shape == (3, 2, 2)
    with pytest.raises(ValueError, match="symmetric_noise"):
        aim.symmetric_noise(key, (4, 2, 2), 0.5)


def test_hardmax_and_apply_channel_act_on_the_last_axis(key):
    """hardmax is the one-hot argmax of each row (the last axis), for one row, a stack of
    non-symmetric matrices whose batch size differs from T, against NumPy; apply_channel reaches
    every kind of channel: a name, a Channel, a plain callable (vmapped over the batch)."""
    np.testing.assert_array_equal(aim.hardmax(jnp.array([0.1, 0.5, 0.2])), [0.0, 1.0, 0.0])
    h = jax.random.normal(key, (4, 3, 3))
    ref = np.eye(3)[np.argmax(np.asarray(h), axis=-1)]
    np.testing.assert_array_equal(aim.hardmax(h), ref)
    with pytest.raises(ValueError, match="h must have at least 1 axes"):
        aim.hardmax(jnp.float64(1.0))
    np.testing.assert_allclose(aim.apply_channel(h, "softmax", beta=2.0), jax.nn.softmax(2.0 * h, axis=-1),
                               rtol=1e-14)
    np.testing.assert_array_equal(aim.apply_channel(h, "hardmax"), ref)
    np.testing.assert_array_equal(aim.apply_channel(h, aim.channels.get("linear")), h)
    np.testing.assert_allclose(aim.apply_channel(h, lambda m: m @ m), np.asarray(h) @ np.asarray(h), rtol=1e-12)


def test_sample_data_noise_and_label_keys(key):
    """The noise on h has variance noise (diagonal) and noise / 2 (off the diagonal) at noise = 0.5
    (linear channel: y - h is the noise; 4000 samples, 4 standard errors); a channel that samples
    its outputs draws them with fold_in(k_label, 1), k_label the third key of split(key, 3)."""
    S = aim.sample_teacher(jax.random.key(1), 6, 0.5)
    X, y = aim.sample_data(key, S, n=4000, T=2, channel="linear", noise=0.5)
    z = np.asarray(y - aim.attention_indices(X, S))
    for (a, b), var in {(0, 0): 0.5, (1, 1): 0.5, (0, 1): 0.25}.items():
        v = z[:, a, b].var()
        assert abs(v - var) < 4 * var * np.sqrt(2 / 4000), (a, b, v)
    np.testing.assert_allclose(z[:, 0, 1], z[:, 1, 0], atol=1e-12)  # one draw for (a, b) and (b, a)
    ch = aim.elementwise_channel(jnp.tanh, label_noise=0.1)
    X, y = aim.sample_data(key, S, n=5, T=2, channel=ch)
    k_label = jax.random.split(key, 3)[2]
    expected = ch.sample(jax.random.fold_in(k_label, 1), aim.attention_indices(X, S), 1.0)
    np.testing.assert_allclose(y, expected, rtol=1e-12, atol=1e-14)


def test_deep_checks_name_the_layer_and_the_overflow():
    """deep_as_aim refuses a non-square layer and a layer of another shape, naming hs[0]'s shape;
    reports an output that overflowed although its inputs are finite; sample_deep_data(channel="deep")
    refuses an empty list of layers."""
    with pytest.raises(ValueError, match=r"hs\[0\] must have the shape"):
        aim.deep_as_aim([jnp.zeros((2, 3))])
    with pytest.raises(ValueError, match=r"hs\[1\] must have the shape \(\.\.\., T, T\) of hs\[0\], \(2, 2\)"):
        aim.deep_as_aim([jnp.zeros((2, 2)), jnp.zeros((3, 3)), jnp.zeros((4, 4))])
    h = jnp.ones((2, 2))
    with pytest.raises(ValueError, match="not finite"):
        aim.deep_as_aim([h, h, h], c=1e200)
    with pytest.raises(ValueError, match="at least one layer"):
        aim.sample_deep_data(jax.random.key(0), [], n=3, T=2)
    Ss = [aim.sample_teacher(jax.random.key(i), d, 0.5) for i, d in enumerate((4, 5, 6))]
    with pytest.raises(ValueError, match=r"S\[1\] must have the shape of S\[0\], \(4, 4\)"):
        aim.sample_deep_data(jax.random.key(0), Ss, n=3, T=2)


def test_shapes_at_the_edges_of_the_checks(key):
    """Shapes that only a check's exact bound or axis tells apart: batched non-square layers and
    noise shapes (where axis 1 and axis -2 coincide), negative or fractional sizes, one-axis and
    scalar inputs of softmax and apply_channel, a 4-axis stack of layers."""
    with pytest.raises(ValueError, match="shape"):
        aim.symmetric_noise(key, (2, 3, 4), 0.5)
    with pytest.raises(ValueError, match=r"shape\[0\]"):
        aim.symmetric_noise(key, (-1, 2, 2), 0.5)
    with pytest.raises((ValueError, TypeError), match=r"shape\[0\]"):
        aim.symmetric_noise(key, (2.5, 2, 2), 0.5)
    with pytest.raises(ValueError, match=r"hs\[0\]"):
        aim.deep_as_aim([jnp.zeros((2, 3, 4))])
    with pytest.raises(ValueError, match=r"hs\[0\]"):
        aim.deep_as_aim([jnp.zeros(3)])
    np.testing.assert_allclose(aim.softmax(jnp.array([0.0, 1.0]), 1.0), jax.nn.softmax(jnp.array([0.0, 1.0])))
    with pytest.raises(ValueError, match="h must have at least 1 axes"):
        aim.softmax(jnp.float64(1.0), 1.0)
    h2 = jax.random.normal(key, (3, 3))
    np.testing.assert_allclose(aim.apply_channel(h2, "softmax"), jax.nn.softmax(h2, axis=-1), rtol=1e-14)
    with pytest.raises(ValueError, match="h must have at least 2 axes"):
        aim.apply_channel(jnp.zeros(3), "softmax")
    # a 4-axis stack of layers: each (T, T) matrix as if alone
    hs = [jax.random.normal(jax.random.fold_in(key, i), (2, 5, 3, 3)) for i in range(2)]
    flat = aim.deep_as_aim([h.reshape(10, 3, 3) for h in hs], beta=1.0, c=0.5)
    np.testing.assert_allclose(aim.deep_as_aim(hs, beta=1.0, c=0.5).reshape(10, 3, 3), flat, rtol=1e-13)
    # noise on h is added with the noise key (the second of split(key, 3)); none on a deep channel
    S = aim.sample_teacher(jax.random.key(1), 5, 0.5)
    X, y = aim.sample_data(key, S, n=7, T=2, channel="linear", noise=0.5)
    k_noise = jax.random.split(key, 3)[1]
    np.testing.assert_allclose(y - aim.attention_indices(X, S), aim.symmetric_noise(k_noise, (7, 2, 2), 0.5),
                               atol=1e-12)
    with pytest.raises(TypeError, match="noise"):  # deep data have no noise on h
        aim.sample_deep_data(key, [S, S], n=3, T=2, noise=0.5)
    with pytest.raises(ValueError, match="noise must be 0"):
        aim.make_instance(key, 5, [0.5, 0.5], 0.2, 2, channel="deep", noise=0.5)
