"""Tests of aim_tutorial.amp (GAMP-RIE), chapter 5.

Finite-size tolerances: AMP at finite d sits above the state evolution by an
amount that shrinks like 1/d (chapter 5 measures the slope); at d = 80 and
alpha = 0.13 the mean excess is about 0.03 with an instance spread of about
0.02, hence the 0.07 window below.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import aim_tutorial as aim
from aim_tutorial import _amp_steps, amp, rmt
from aim_tutorial.config import compiled_flops
from aim_tutorial.state_evolution import q_hat_of, solve_state_evolution

RHO = 0.5


def _instance(key, d, alpha, T=2, channel="softmax"):
    k1, k2, k3 = jax.random.split(key, 3)
    S = aim.sample_teacher(k1, d, RHO)
    X, y = aim.sample_data(k2, S, n=int(round(alpha * d * d)), T=T, channel=channel)
    return S, X, y, k3


def test_prior_input_equals_naive_sum(key):
    """The (d, nT) x (nT, d) contraction equals sum_mu (X^T Gamma X - Tr(Gamma) I) term by term."""
    n, T, d = 7, 3, 11
    kx, kg = jax.random.split(key)
    X = jax.random.normal(kx, (n, T, d))
    G = jax.random.normal(kg, (n, T, T))
    G = (G + jnp.swapaxes(G, 1, 2)) / 2
    naive = sum(X[m].T @ G[m] @ X[m] - jnp.trace(G[m]) * jnp.eye(d) for m in range(n))
    np.testing.assert_allclose(aim.prior_input(X, G), naive, rtol=1e-12, atol=1e-12)


def test_gamp_programs_are_compiled_with_the_gamp_compiler_options():
    """The host loop's three programs and gamp_rie_batch's carry GAMP_COMPILER_OPTIONS (XLA's
    older CPU fusion emitters: faster compiles, the same run time; benchmarks/design_history.json)."""
    from aim_tutorial import amp_device
    from aim_tutorial.config import GAMP_COMPILER_OPTIONS

    want = tuple(GAMP_COMPILER_OPTIONS.items())
    assert ("xla_cpu_use_fusion_emitters", False) in want
    S = aim.sample_teacher(jax.random.key(0), 12, 0.5)
    X, y = aim.sample_data(jax.random.key(1), S, n=40, T=2)
    problem, st = amp.gamp_rie_start(X, y, 0.5, S_true=S, key=jax.random.key(2))
    Xp, yp = problem.X, problem.y
    forms = jax.eval_shape(amp._quadratic_forms, Xp, st.S_hat)
    lowered = [amp._quadratic_forms.trace(Xp, st.S_hat).lower(),
               problem.half_step.rest.trace(forms, Xp, yp, st.S_hat, st.c, st.Gamma, st.omega, st.V, 0.0,
                                            problem.alpha).lower(),
               amp._prior_step.trace(st.S_hat, jnp.ones(12), st.S_hat, S).lower()]
    for low in lowered:
        assert low._lowering._compiler_options_kvs == want
    # the batch's loop is one program with the options; inside it the functions, not nested programs
    # (JAX refuses compiler options on a nested jit, so the batch running at all checks that)
    runner = amp_device._runner(lambda *a: a, (jax.devices()[0],))
    assert runner.trace(1.0).lower()._lowering._compiler_options_kvs == want


def test_aim_xla_options_gives_xla_defaults_back_and_refuses_other_values(monkeypatch):
    from aim_tutorial.config import gamp_jit

    x = jnp.ones(3)
    monkeypatch.setenv("AIM_XLA_OPTIONS", " Default ")
    assert gamp_jit(lambda a: a + 1).trace(x).lower()._lowering._compiler_options_kvs == ()
    monkeypatch.setenv("AIM_XLA_OPTIONS", "tuned")
    assert gamp_jit(lambda a: a + 1).trace(x).lower()._lowering._compiler_options_kvs != ()
    # on a GPU or TPU the same function compiles without them
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    assert gamp_jit(lambda a: a + 1).trace(x).lower()._lowering._compiler_options_kvs == ()
    monkeypatch.undo()
    # and so on a jaxlib whose XLA no longer knows the option (Colab installs the newest)
    from aim_tutorial import config

    monkeypatch.setattr(config, "_cpu_options_known", lambda: False)
    assert gamp_jit(lambda a: a + 1).trace(x).lower()._lowering._compiler_options_kvs == ()
    monkeypatch.undo()
    monkeypatch.setenv("AIM_XLA_OPTIONS", "fast")
    with pytest.raises(ValueError, match="AIM_XLA_OPTIONS must be one of"):
        gamp_jit(lambda a: a + 1)


def test_quadratic_forms_equal_the_einsum(key):
    """_quadratic_forms (a product and a broadcast sum, for XLA's sake) is x_a^T S x_b."""
    S, X, _, _ = _instance(key, 20, 0.5, T=3)
    F = amp._quadratic_forms(X, S)
    np.testing.assert_allclose(F, jnp.einsum("nad,de,nbe->nab", X, S, X), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("n", [24, 25])  # blocks of 4 samples: 6 of them, or 6 and a remainder of 1
def test_blocked_products_equal_the_whole(key, monkeypatch, n):
    """On a CPU, tokens over UNBLOCKED_BYTES go through the O(n T d^2) products in blocks of
    BLOCK_BYTES (the temporaries of one product over all samples are mapped afresh each call):
    the quadratic forms and the prior input are those of all samples at once, to rounding."""
    T, d = 3, 10
    kx, kg, ks = jax.random.split(key, 3)
    X = jax.random.normal(kx, (n, T, d))
    G = jax.random.normal(kg, (n, T, T))
    S = jax.random.normal(ks, (d, d))
    S = (S + S.T) / 2
    def both():  # traced anew each time (a new function), with the module's thresholds of that moment
        return (jax.jit(lambda X, S: amp._quadratic_forms.__wrapped__(X, S))(X, S),
                jax.jit(lambda X, G: amp._prior_input(X, G))(X, G))

    whole_F, whole_B = both()
    # the thresholds are read where _block_rows lives (aim_tutorial/_amp_steps.py, issue 49)
    monkeypatch.setattr(_amp_steps, "UNBLOCKED_BYTES", X.nbytes - 1)
    monkeypatch.setattr(_amp_steps, "BLOCK_BYTES", 4 * T * d * 8)
    assert amp._block_rows(X) == (4 if jax.default_backend() == "cpu" else n)
    F, B = both()
    np.testing.assert_allclose(F, whole_F, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(B, whole_B, rtol=1e-13, atol=1e-13)
    monkeypatch.setattr(_amp_steps, "UNBLOCKED_BYTES", X.nbytes)  # up to the threshold: all at once
    assert amp._block_rows(X) == n


def test_flops_count_every_block(key, monkeypatch):
    """The benchmarks' count of operations (XLA's cost analysis) is that of the whole-sample
    programs: a program in blocks has its loop's body counted once, which made an iteration at
    d = 300 look 9 times further from the limit than it was."""
    S, X, y, _ = _instance(key, 12, 0.5)
    n, T, d = X.shape
    step = amp._make_half_step("softmax", 1.0, 0.0, "exact", "square")
    Z = jnp.zeros((n, T, T))
    args = (X, y, jnp.eye(d), 0.5, Z, Z, 0.5, 0.5, n / d**2)
    whole = step.flops(*args)
    monkeypatch.setattr(_amp_steps, "UNBLOCKED_BYTES", 0)
    monkeypatch.setattr(_amp_steps, "BLOCK_BYTES", 8 * T * d * 8)  # blocks of 8 samples
    if jax.default_backend() == "cpu":
        assert amp._block_rows(X) == 8
        blocked = sum(compiled_flops(c) for c in step._compiled(*args, fresh=True))
        assert blocked < 0.5 * whole, (blocked, whole)  # what the count of the blocked programs gives
    assert step.flops(*args) == whole


def test_float32_iteration_matches_float64(key):
    """gamp_rie(dtype="float32") iterates in float32 (the estimate, the data) and ends where
    float64 does: same status and iterations, errors within 1e-5 (benchmarks/precision.py --gamp
    measured at most 1.5e-7 over 24 runs of chapter 5's settings, against seed spreads of 5e-3
    to 6e-2); a bad dtype is refused by name."""
    S, X, y, k = _instance(key, 40, 0.13)
    r64 = aim.gamp_rie(X, y, RHO, key=k, S_true=S, dtype="float64")
    r32 = aim.gamp_rie(X, y, RHO, key=k, S_true=S, dtype="float32")
    assert r32.S_hat.dtype == jnp.float32 and r64.S_hat.dtype == jnp.float64
    assert (r32.status, r32.n_iter) == (r64.status, r64.n_iter)
    assert abs(r32.error - r64.error) < 1e-5, (r32.error, r64.error)
    with pytest.raises(ValueError, match="dtype"):
        aim.gamp_rie(X, y, RHO, key=k, dtype="float16")


def test_one_blas_thread_limits_openblas_and_restores_it():
    """Inside amp.one_blas_thread every BLAS library loaded (OpenBLAS of NumPy and SciPy) runs one
    thread; after it, as many as before."""
    from threadpoolctl import threadpool_info

    np.linalg.eigvalsh(np.eye(3))  # NumPy's BLAS is loaded
    before = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    with amp.one_blas_thread():
        assert [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"] == [1] * len(before)
    assert [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"] == before


@pytest.mark.slow
def test_half_step_omega_and_onsager(key):
    """omega = X S X^T / sqrt d - Tr S / sqrt d I - 2 c Gamma_old (the Onsager factor 2), no damping."""
    S, X, y, _ = _instance(key, 20, 0.5)
    n, T, d = X.shape
    S_hat = aim.sample_teacher(jax.random.key(3), d, RHO)
    G_old = jax.random.normal(jax.random.key(4), (n, T, T))
    G_old = (G_old + jnp.swapaxes(G_old, 1, 2)) / 2
    c = 0.37
    step = amp._make_half_step("softmax", 1.0, 0.0, "exact", "square")
    omega, V, Gamma, q_hat, lam, O, _ = step(X, y, S_hat, c, G_old, jnp.zeros_like(G_old), c, 0.0, n / d**2)
    expected = aim.attention_indices(X, S_hat) - 2 * c * G_old
    np.testing.assert_allclose(omega, expected, atol=1e-10)
    np.testing.assert_allclose(Gamma, aim.output_score("softmax", y, omega, c), atol=1e-12)
    # q_hat = 4 alpha mean ||Gamma||_F^2 = (2 alpha / n) sum (2 sum g_aa^2 + sum_{a<b} g_ab^2)
    g_diag = jnp.diagonal(Gamma, axis1=1, axis2=2)
    iu = np.triu_indices(T, 1)
    g_off = 2 * Gamma[:, iu[0], iu[1]]
    q_ref = 2 * (n / d**2) / n * jnp.sum(2 * jnp.sum(g_diag**2, 1) + jnp.sum(g_off**2, 1))
    assert float(q_hat) == pytest.approx(float(q_ref), rel=1e-12)
    # R = S_hat + (2 Delta / d^{3/2}) B, returned through its eigendecomposition
    R = (O * lam) @ O.T
    R_ref = S_hat + 2 / (float(q_hat) * d**1.5) * aim.prior_input(X, Gamma)
    np.testing.assert_allclose(R, R_ref, atol=1e-10)


@pytest.mark.slow
def test_derivative_q_hat_equals_softmax_closed_form(key):
    """-E[dg/domega] by autodiff equals (T^2 + T - 2) alpha / V for the softmax, whatever omega (an identity)."""
    for T in (2, 3):
        S, X, y, _ = _instance(key, 15, 0.4, T=T)
        n, _, d = X.shape
        step = amp._make_half_step("softmax", 1.0, 0.0, "exact", "derivative")
        Z = jnp.zeros((n, T, T))
        V = 0.61
        out = step(X, y, 0.3 * S, V, Z, Z, V, 0.0, n / d**2)
        assert float(out[3]) == pytest.approx((T * T + T - 2) * (n / d**2) / V, rel=1e-10)


@pytest.mark.slow
def test_rie_step_matches_rmt_rie_denoise(key):
    """The RIE inside gamp_rie (eigh in the jitted step, Hilbert transform from rmt) equals rmt.rie_denoise."""
    S, X, y, k = _instance(key, 30, 0.13)
    n, T, d = X.shape
    res = aim.gamp_rie(X, y, RHO, init="mean", max_iter=1, rie_outside="continuation")
    step = amp._make_half_step("softmax", 1.0, 0.0, "exact", "square")
    Z = jnp.zeros((n, T, T))
    S0 = jnp.sqrt(RHO) * jnp.eye(d)
    _, _, G, q_hat, _, _, _ = step(X, y, S0, 1.0, Z, Z, 1.0, 0.0, n / d**2)
    delta = 1 / float(q_hat)
    R = S0 + 2 * delta / d**1.5 * aim.prior_input(X, G)
    np.testing.assert_allclose(res.S_hat, rmt.rie_denoise(np.asarray(R), delta, RHO, outside="continuation"),
                               atol=1e-9)
    res_edge = aim.gamp_rie(X, y, RHO, init="mean", max_iter=1)  # the default: the edge rule
    np.testing.assert_allclose(res_edge.S_hat, rmt.rie_denoise(np.asarray(R), delta, RHO), atol=1e-9)
    assert res.history.mmse_pred[0] == pytest.approx(rmt.mmse_denoising(delta, RHO), rel=1e-12)


@pytest.mark.slow
def test_amp_reaches_state_evolution_softmax(key):
    """Softmax T = 2, rho = 0.5, alpha = 0.13, d = 80: AMP error within 0.07 of SE (0.2212), converged."""
    S, X, y, k = _instance(key, 80, 0.13)
    res = aim.gamp_rie(X, y, RHO, key=k, S_true=S)
    se = solve_state_evolution(0.13, RHO).mmse
    assert se == pytest.approx(0.2212, abs=1e-3)
    assert res.converged and not res.diverged, res.status
    assert abs(res.error - se) < 0.07, (res.error, se)
    # the predicted error tracks the actual one (both finite-size), and the history is complete
    assert abs(res.mmse_pred - res.error) < 0.05
    assert len(res.history.error) == res.n_iter
    assert res.history.residual[-1] < 1e-5


@pytest.mark.slow
def test_perfect_recovery_above_threshold(key):
    """Above alpha_PR = 0.1875 (T = 2, rho = 0.5) AMP recovers S: error < 0.01 at alpha = 0.25, d = 60."""
    S, X, y, k = _instance(key, 60, 0.25)
    res = aim.gamp_rie(X, y, RHO, key=k, S_true=S, max_iter=60)
    assert not res.diverged  # no false collapse alarm: the Nishimori ratio stays near 1 as V -> 0
    assert res.error < 0.01, res.error


@pytest.mark.slow
def test_hardmax_exact_score_beats_published_curve(key):
    """Hardmax T = 2, alpha = 0.6779, d = 50: AMP with the exact score lands far below the published 0.407."""
    S, X, y, k = _instance(key, 50, 0.6779, channel="hardmax")
    res = aim.gamp_rie(X, y, RHO, channel="hardmax", key=k, S_true=S, max_iter=80)
    assert not res.diverged
    assert res.error < 0.30, res.error


@pytest.mark.slow
def test_adaptive_damping_reaches_hardmax_fixed_point_fast(key):
    """Hardmax T = 2, alpha = 1.6, d = 50: adaptive damping from 0 gets within 0.03 of the exact SE in
    fewer iterations than half damping from the start (5 against 12 on this instance); with the RIE
    continued off the support half damping crawls (still more than 0.05 above after 40 iterations), the
    adaptive rule does not; its damping only increases, from 0 to at most 0.5."""
    S, X, y, k = _instance(key, 50, 1.6, channel="hardmax")
    se = float(solve_state_evolution(1.6, RHO, 2, channel="hardmax").mmse)
    kw = dict(channel="hardmax", key=k, S_true=S, max_iter=40, min_iter=40, stall_patience=None, patience=40)
    slow = aim.gamp_rie(X, y, RHO, damping=0.5, **kw)
    fast = aim.gamp_rie(X, y, RHO, damping=0.0, adaptive_damping=True, **kw)

    def first_within(res):
        close = np.abs(res.history.error - se) < 0.03
        return int(np.argmax(close)) + 1 if close.any() else np.inf

    assert abs(fast.error - se) < 0.03 and abs(slow.error - se) < 0.03, (fast.error, slow.error, se)
    assert first_within(fast) < first_within(slow)
    crawl = aim.gamp_rie(X, y, RHO, damping=0.5, rie_outside="continuation", **kw)
    steady = aim.gamp_rie(X, y, RHO, damping=0.0, adaptive_damping=True, rie_outside="continuation", **kw)
    assert crawl.error > se + 0.05 and abs(steady.error - se) < 0.03, (crawl.error, steady.error, se)
    dmp = fast.history.damping
    assert dmp[0] == 0.0 and np.all(np.diff(dmp) >= 0) and dmp.max() <= amp.MAX_ADAPTIVE_DAMPING
    assert set(np.round(dmp, 6)) <= {0.0, 0.5}
    with pytest.raises(ValueError, match="adaptive_damping"):
        aim.gamp_rie(X, y, RHO, key=k, adaptive_damping="yes")


def test_divergence_is_reported(key):
    """Valid but enormous data (linear outputs 1e200 h: q_hat overflows) is detected: diverged, a status
    naming the iteration, and a finite S_hat."""
    S, X, y, k = _instance(key, 20, 0.2, channel="linear")
    res = aim.gamp_rie(X, 1e200 * y, RHO, channel="linear", key=k, S_true=S)
    assert res.diverged and not res.converged
    assert "diverged at iteration 1" in res.status
    assert bool(jnp.all(jnp.isfinite(res.S_hat)))


def test_log_outputs_at_large_beta_reach_the_error_of_beta_one():
    """Issue 17: at beta >= 100 softmax probabilities underflow to exact zeros (log 0: q_hat = nan). On the
    log-probabilities of sample_data(..., log_outputs=True) GAMP-RIE at beta = 100, 300, 1000 reaches the
    error of beta = 1 on the same instance (the channel's information does not depend on beta), no NaN;
    the probabilities with zeros are refused with a ValueError that says what to do."""
    d, alpha = 20, 0.15
    k1, k2 = jax.random.split(jax.random.key(7))
    S = aim.sample_teacher(k1, d, RHO)
    n = int(alpha * d * d)
    kw = dict(init="mean", S_true=S, max_iter=30)
    X, y1 = aim.sample_data(k2, S, n=n, T=2, beta=1.0)
    ref = aim.gamp_rie(X, y1, RHO, **kw)
    assert 0.01 < ref.error < 0.5 and np.all(np.isfinite(ref.history.error))
    for beta in (1.0, 100.0, 300.0, 1000.0):
        Xb, logy = aim.sample_data(k2, S, n=n, T=2, beta=beta, log_outputs=True)
        res = aim.gamp_rie(Xb, logy, RHO, beta=beta, log_outputs=True, **kw)
        assert not res.diverged, (beta, res.status)
        assert np.all(np.isfinite(res.history.error)) and np.all(np.isfinite(res.history.q_hat))
        np.testing.assert_allclose(res.history.error, ref.history.error, rtol=1e-9, atol=1e-12)
    _, probs = aim.sample_data(k2, S, n=n, T=2, beta=1000.0)
    assert float(jnp.min(probs)) == 0.0  # the underflow of the issue
    with pytest.raises(ValueError, match="log_outputs=True"):
        aim.gamp_rie(X, probs, RHO, beta=1000.0, **kw)
    with pytest.raises(ValueError, match="log_outputs"):  # log-outputs for a channel without them
        aim.gamp_rie(X, logy, RHO, channel="linear", log_outputs=True, **kw)
    with pytest.raises(ValueError, match="positive entries"):  # probabilities passed as logs
        aim.gamp_rie(X, y1, RHO, log_outputs=True, **kw)


def _bad_data_cases(X, y, yh, k):
    n, T, d = X.shape
    nan_X = np.array(X)
    nan_X[0, 0, 0] = np.nan
    inf_y = np.array(y)
    inf_y[1, 0, 1] = np.inf
    neg_y = np.array(y)
    neg_y[2, 0] = [1.5, -0.5]
    off_y = np.array(y)
    off_y[2, 0] = [0.7, 0.7]
    return [
        (dict(X=nan_X), "X must have finite"),
        (dict(y=inf_y), "y must have finite"),
        (dict(y=neg_y), "y must be row-stochastic.*negative"),
        (dict(y=off_y), "y must be row-stochastic.*sum to 1"),
        (dict(y=yh), "exactly 0.*one-hot.*channel='hardmax'"),  # hardmax outputs passed as softmax
        (dict(y=y, channel="hardmax"), "y must be one-hot"),  # softmax outputs passed as hardmax
        (dict(X=X[:0], y=y[:0]), "X must not be empty"),  # n = 0
        (dict(X=X[..., :0]), "X must not be empty"),  # d = 0
        (dict(X=X[0]), "X must have 3 axes"),
        (dict(y=y[:, :1]), "y must have shape"),
        (dict(X=X + 0j), "X must be a real array"),
        (dict(y=np.asarray(y, dtype=object)), "y must be a real array"),
        (dict(beta=0.0), "beta"), (dict(beta=np.nan), "beta"), (dict(noise=-1.0), "noise"),
        (dict(rho=0.0), "rho"), (dict(rho="0.5"), "rho"),
        (dict(damping=1.0), "damping"), (dict(damping=True), "damping"), (dict(damping="0.5"), "damping"),
        (dict(max_iter=0), "max_iter"), (dict(max_iter=2.0), "max_iter"), (dict(tol=0.0), "tol"),
        (dict(tol=np.nan), "tol"), (dict(min_iter=0), "min_iter"), (dict(patience=1), "patience"),
        (dict(key=None), "key"), (dict(key=3), "key"), (dict(key=np.zeros(3)), "key"),
        (dict(S_true=np.ones((d, d + 1))), "S_true"), (dict(S_true=np.triu(np.ones((d, d)))), "S_true"),
        (dict(S_true=np.eye(d + 1)), "S_true"),
        (dict(init="zeros"), "init"), (dict(c_init=-1.0), "c_init"), (dict(c_init=np.inf), "c_init"),
        (dict(score="published"), "score"), (dict(score=None), "score"), (dict(q_hat_from="cube"), "q_hat_from"),
        (dict(max_ratio=-1.0), "max_ratio"), (dict(stall_patience=1), "stall_patience"),
        (dict(stall_patience=2.5), "stall_patience"), (dict(adaptive_damping="yes"), "adaptive_damping"),
        (dict(log_outputs=1), "log_outputs"), (dict(channel="nope"), "channel"),
    ]


def test_gamp_rie_refuses_bad_data_and_settings(key):
    """Issue 17: NaN/inf in X or y, negative y, hardmax outputs passed as softmax, n = 0, ... end as a
    ValueError (or TypeError) naming the argument, before any iteration, instead of a divergence report
    blaming the algorithm."""
    S, X, y, k = _instance(key, 6, 0.5)
    yh = aim.sample_data(k, S, n=X.shape[0], T=2, channel="hardmax")[1]
    base = dict(X=X, y=y, rho=RHO, key=k, max_iter=2)
    for bad, match in _bad_data_cases(X, y, yh, k):
        with pytest.raises(ValueError, match=match):
            aim.gamp_rie(**{**base, **bad})
    aim.gamp_rie(**base)  # the valid call runs


@pytest.mark.slow
def test_collapse_is_detected():
    """Softmax T = 2, alpha = 0.05, d = 100 (an instance of scripts/amp_experiments.py): with the RIE
    continued off the support and the square estimator of q_hat the predicted variance collapses
    (E g^2 / -E g' > 10) and the run is reported as diverged; on this instance the derivative
    estimator from the uninformed start reaches SE + 0.06, and so does the default (the edge rule)."""
    k = jax.random.fold_in(jax.random.key(2025), 1)
    for i in (2, 1, 0):
        k = jax.random.fold_in(k, i)
    kt, kd, ki = jax.random.split(k, 3)
    d = 100
    S = aim.sample_teacher(kt, d, RHO)
    X, y = aim.sample_data(kd, S, n=int(round(0.05 * d * d)), T=2)
    bad = aim.gamp_rie(X, y, RHO, key=ki, S_true=S, max_iter=30, rie_outside="continuation")
    assert bad.diverged and "collapse" in bad.status and bad.history.nishimori_ratio[-1] > 10
    good = aim.gamp_rie(X, y, RHO, init="mean", q_hat_from="derivative", S_true=S, max_iter=30,
                        rie_outside="continuation")
    assert not good.diverged
    assert abs(good.error - solve_state_evolution(0.05, RHO).mmse) < 0.06
    default = aim.gamp_rie(X, y, RHO, key=ki, S_true=S, max_iter=30)
    assert not default.diverged
    assert abs(default.error - solve_state_evolution(0.05, RHO).mmse) < 0.06


@pytest.mark.slow
def test_edge_rie_removes_the_collapse():
    """The instances of test_collapse_is_detected's kind (softmax T = 2, alpha = 0.05, d = 100, seeds
    1 and 2 of scripts/amp_experiments.py's scheme) collapse with the RIE continued off the support
    and converge with the edge rule, within 0.06 of the state evolution (the finite-size spread of
    converged runs at d = 100 in chapter 5)."""
    se = solve_state_evolution(0.05, RHO).mmse
    for seed in (1, 2):
        kt, kd, ki = jax.random.split(jax.random.fold_in(jax.random.key(2025), seed), 3)
        S = aim.sample_teacher(kt, 100, RHO)
        X, y = aim.sample_data(kd, S, n=500, T=2)
        old = aim.gamp_rie(X, y, RHO, key=ki, S_true=S, max_iter=60, rie_outside="continuation")
        new = aim.gamp_rie(X, y, RHO, key=ki, S_true=S, max_iter=60)  # the default: the edge rule
        assert old.diverged and "collapse" in old.status and "rie_outside='edge'" in old.status
        assert new.converged and not new.diverged and abs(new.error - se) < 0.06


def test_no_teacher_gives_nan_error(key):
    S, X, y, k = _instance(key, 20, 0.2)
    res = aim.gamp_rie(X, y, RHO, key=k, max_iter=3, min_iter=3)
    assert res.n_iter == 3 and math.isnan(res.error)
    assert np.all(np.isnan(res.history.error)) and np.all(np.isfinite(res.history.mmse_pred))


def test_invalid_arguments(key):
    S, X, y, k = _instance(key, 10, 0.5)
    with pytest.raises(ValueError, match="key"):
        aim.gamp_rie(X, y, RHO)  # init='prior' needs a key
    with pytest.raises(ValueError, match="rho"):
        aim.gamp_rie(X, y, -1.0, key=k)
    with pytest.raises(ValueError, match="damping"):
        aim.gamp_rie(X, y, RHO, key=k, damping=1.0)
    with pytest.raises(ValueError, match="y must have shape"):
        aim.gamp_rie(X, y[:-1], RHO, key=k)
    with pytest.raises(ValueError, match="channel"):
        aim.gamp_rie(X, y, RHO, key=k, channel="nope")
    with pytest.raises(ValueError, match="T must be 2"):
        aim.gamp_rie(jnp.zeros((4, 3, 10)), jnp.zeros((4, 3, 3)), RHO, channel="hardmax", key=k)
    with pytest.raises(ValueError, match="score"):
        aim.gamp_rie(X, y, RHO, key=k, score="published")
    with pytest.raises(ValueError, match="alpha"):
        aim.gamp_rie_state_evolution(-0.1, RHO)


@pytest.mark.slow
def test_state_evolution_trajectory_reaches_fixed_point():
    """Undamped, the iteration-by-iteration SE converges to the fixed point of solve_state_evolution (to 1e-4),
    and its first step from c = 1 is mmse_rho(1 / ((T^2 + T - 2) alpha))."""
    for T, alpha in ((2, 0.13), (3, 0.05)):
        traj = aim.gamp_rie_state_evolution(alpha, RHO, T, c_init=1.0, n_iter=300)
        assert traj.mmse[-1] == pytest.approx(solve_state_evolution(alpha, RHO, T).mmse, abs=1e-4)
        assert traj.mmse[0] == pytest.approx(rmt.mmse_denoising(1 / ((T * T + T - 2) * alpha), RHO), rel=1e-12)
        assert np.all(np.diff(traj.mmse) <= 1e-12)  # monotone from an uninformed start
    # the closed-form q_hat(V) agrees with the state-evolution module's
    V = 0.4
    assert amp._q_hat_of_V(0.1, RHO, 3, "softmax", 1.0, 0.0, "exact", V) == pytest.approx(
        q_hat_of(0.1, 1 + RHO - V, RHO, T=3), rel=1e-12)


@pytest.mark.slow
def test_state_evolution_reports_convergence_and_hardmax_default_start():
    """Issue 17: the iteration-by-iteration SE says whether it converged (the old fields first, in their
    order), and its default start works for every channel: for the hardmax (whose integrals need
    q = Q0 - c >= 0) the default c_init = 2 of gamp_rie exceeded Q0 = 1.5 and raised."""
    se = aim.gamp_rie_state_evolution(0.13, RHO, n_iter=100)
    assert se._fields[:3] == ("mmse", "q_hat", "delta")
    mmse, q_hat, delta = se[:3]
    assert se.converged and se.status == "converged" and mmse[-1] == pytest.approx(0.2212, abs=1e-3)
    short = aim.gamp_rie_state_evolution(0.13, RHO, n_iter=2)
    assert not short.converged and short.status.startswith("not converged") and "n_iter" in short.status
    hm = aim.gamp_rie_state_evolution(0.5, RHO, channel="hardmax", n_iter=60)  # the default c_init
    ref = aim.gamp_rie_state_evolution(0.5, RHO, channel="hardmax", n_iter=60, c_init=1 + RHO)
    np.testing.assert_array_equal(hm.mmse, ref.mmse)  # default: Q0 = 1 + rho (the uninformed start)
    other = aim.gamp_rie_state_evolution(0.5, RHO, channel="hardmax", n_iter=60, c_init=1.0)
    assert hm.converged and other.converged and hm.mmse[-1] == pytest.approx(other.mmse[-1], abs=1e-7)
    # c_init = 2 stays the default of the channels that allow q = max(Q0 - c, 0)
    np.testing.assert_array_equal(se.mmse, aim.gamp_rie_state_evolution(0.13, RHO, n_iter=100, c_init=2.0).mmse)
    with pytest.raises(ValueError, match="c_init"):
        aim.gamp_rie_state_evolution(0.5, RHO, channel="hardmax", c_init=2.0)
    with pytest.raises(ValueError, match="tol"):
        aim.gamp_rie_state_evolution(0.5, RHO, tol=0.0)
    with pytest.raises(ValueError, match="damping"):
        aim.gamp_rie_state_evolution(0.5, RHO, damping=True)


def test_se_status_names_an_oscillation():
    """A trajectory jumping between two values is reported as oscillating, not converged."""
    conv, status = amp._se_status(np.array([0.5, 0.7, 0.5, 0.7]), 0.7, 1e-8)
    assert not conv and status.startswith("oscillating")
    conv, status = amp._se_status(np.array([0.5, 0.4, 0.4 + 1e-12]), 1.0, 1e-8)
    assert conv and status == "converged"
    # period 2 means back within half a step of c^{t-2}: c = 0, 3, 1 turns back but lands exactly
    # half a step (1 of 2) from 0, and 0, 1, 0.5 a whole step (0.5) from 1 -- neither oscillates
    for mmse in ([0.0, 3.0, 1.0], [0.0, 1.0, 0.5]):
        conv, status = amp._se_status(np.array(mmse), 5.0, 1e-8)
        assert not conv and status.startswith("not converged"), mmse


def test_stall_status_tells_a_fixed_point_from_jumps():
    """Stopped by stall_patience: 'stationary' when the residuals since the best stay within 1 % of
    the predicted error c (plus 100 tol), else 'oscillating'."""
    assert amp._stall_status([0.004] * 5, 0.003, 3, 1e-10, 0.5).startswith("stationary")
    assert amp._stall_status([0.01] * 5, 0.009, 3, 1e-10, 0.5).startswith("oscillating")
    assert amp._stall_status([0.01] * 5, 0.009, 3, 1e-4, 0.5).startswith("stationary")  # 0.005 + 0.01


def test_state_evolution_refuses_one_token_and_no_iterations():
    with pytest.raises(ValueError, match="T must be an integer >= 2"):
        aim.gamp_rie_state_evolution(0.5, RHO, T=1)
    with pytest.raises(ValueError, match="n_iter"):
        aim.gamp_rie_state_evolution(0.5, RHO, n_iter=0)
    assert len(aim.gamp_rie_state_evolution(0.5, RHO, n_iter=1).mmse) == 1


def test_block_rows_threshold_is_16_mib_of_tokens():
    """Up to UNBLOCKED_BYTES (16 MiB) of tokens all samples at once, beyond it blocks of
    BLOCK_BYTES (4 MiB); the sizes only, no array is made."""
    T, d = 2, 256
    per_sample = T * d * 8
    at = jax.ShapeDtypeStruct((16 * 2**20 // per_sample, T, d), jnp.float64)
    over = jax.ShapeDtypeStruct((16 * 2**20 // per_sample + 1, T, d), jnp.float64)
    small = jax.ShapeDtypeStruct((1, T, d), jnp.float64)
    assert amp._block_rows(at) == at.shape[0] and amp._block_rows(small) == 1
    want = 4 * 2**20 // per_sample if jax.default_backend() == "cpu" else over.shape[0]
    assert amp._block_rows(over) == want


def test_a_step_whose_q_hat_fails_keeps_the_estimate():
    """An infinite c makes omega and q_hat NaN: the step skips the denoiser, says so
    (denoised False) and keeps S_hat and c."""
    S = aim.sample_teacher(jax.random.key(0), 12, RHO)
    X, y = aim.sample_data(jax.random.key(1), S, n=60, T=2)
    problem, state = amp.gamp_rie_start(X, y, RHO, S_true=S, key=jax.random.key(2))
    new, rec = amp.gamp_rie_step(problem, state._replace(c=math.inf, V=math.inf))
    assert not rec.denoised and not math.isfinite(rec.q_hat)
    assert new.c == math.inf and np.array_equal(np.asarray(new.S_hat), np.asarray(state.S_hat))
    assert new.it == 1


def test_adaptive_damping_reacts_to_a_period_two_return():
    """The host step's oscillation rule: S_new back near S_{t-2} (here exactly: S_prev set to the
    S_new the step will compute) while the residual exceeds tol halves the distance of the
    damping to 1, and resets the growth count."""
    S = aim.sample_teacher(jax.random.key(0), 12, RHO)
    X, y = aim.sample_data(jax.random.key(1), S, n=60, T=2)
    options = amp.GampRieOptions(adaptive_damping=True, damping=0.2)
    problem, state = amp.gamp_rie_start(X, y, RHO, S_true=S, key=jax.random.key(2), options=options)
    state, _ = amp.gamp_rie_step(problem, state)
    ahead, rec = amp.gamp_rie_step(problem, state)  # where the second step goes
    assert rec.residual > options.tol
    new, _ = amp.gamp_rie_step(problem, state._replace(S_prev=ahead.S_hat))
    assert ahead.damping == 0.2  # the same step without the return: no bump
    assert new.damping == min(amp.MAX_ADAPTIVE_DAMPING, (1 + 0.2) / 2) > 0.2 and new.grow == 0


class _FakeRmt:
    """A stand-in for aim_tutorial.rmt in gamp_rie: the RIE returns ``S_hat = (1 + eps (-1)^t) I``, so
    the iterates jump by ``||2 eps I||^2 / d = 4 eps^2`` every iteration, forever (a period-2 oscillation
    of known size, whatever the data), and the predicted error is 0.5."""

    def __init__(self, eps):
        self.eps, self.t = eps, 0

    def rie_eigenvalues(self, lam, delta, rho, outside="continuation"):
        self.t += 1
        return np.full(np.shape(lam), 1.0 + self.eps * (-1) ** self.t)

    def mmse_denoising(self, delta, rho):
        return 0.5


@pytest.mark.parametrize("eps, status", [(0.5, "oscillating"), (5e-3, "stationary"), (0.0, "converged")])
def test_stall_rule_reports_oscillation_not_a_fixed_point(key, monkeypatch, eps, status):
    """Issue 17: undamped hardmax GAMP-RIE at alpha = 0.2 (d = 24, seed 1 of jax.random.fold_in(key(5), s),
    with the RIE of the committed rmt.py) jumped between iterates with a residual ~0.66 and an error 0.93
    against SE 0.52, and the stall rule stopped it as "stationary ... around a fixed point". Now a run
    stopped by that rule is "stationary" only when the residuals since the smallest one stay below
    0.01 c + 100 tol (c the predicted error), else "oscillating: not converged ... not at a fixed point"
    with the residual; the stopping iteration (hence the estimate) is unchanged. Checked here with an
    RIE forced to jump by 4 eps^2 each iteration (independent of the numerics of rmt.py)."""
    S, X, y, k = _instance(key, 8, 0.5, channel="linear")
    monkeypatch.setattr(amp, "_rmt", lambda: _FakeRmt(eps))
    res = aim.gamp_rie(X, y, RHO, channel="linear", init="mean", max_ratio=np.inf, stall_patience=5, tol=1e-5)
    assert res.status.startswith(status), res.status
    assert not res.diverged and res.converged == (status == "converged")
    if status != "converged":
        # the smallest residual early (where, among residuals equal to rounding, depends on the rounding
        # of the eigendecomposition), then five iterations without a new minimum
        assert 6 <= res.n_iter <= 20
        np.testing.assert_allclose(res.history.residual[1:], 4 * eps**2, rtol=1e-9)
    if status == "oscillating":
        assert "not at a fixed point" in res.status and "median 1" in res.status  # 4 eps^2 = 1
        assert "stationary" not in res.status
    # the classification itself
    assert amp._stall_status([1e-4, 3e-4, 2e-4], 1e-4, 3, 1e-5, 0.5).startswith("stationary")
    assert amp._stall_status([0.7, 0.6, 0.7], 0.045, 4, 1e-5, 0.5).startswith("oscillating")


def test_undamped_hardmax_stall_statuses_are_honest():
    """Whatever the instance: a hardmax run (undamped, alpha = 0.2, d = 24) reported "stationary" has
    small residuals since its smallest one, and a run whose last residuals stay large is not reported
    converged nor stationary."""
    d, alpha = 24, 0.2
    for seed in range(3):
        k1, k2, k3 = jax.random.split(jax.random.fold_in(jax.random.key(5), seed), 3)
        S = aim.sample_teacher(k1, d, RHO)
        X, y = aim.sample_data(k2, S, n=int(round(alpha * d * d)), T=2, channel="hardmax")
        res = aim.gamp_rie(X, y, RHO, channel="hardmax", key=k3, S_true=S, damping=0.0, max_iter=60)
        r = res.history.residual
        if res.status.startswith("stationary"):
            best = int(np.argmin(r))
            assert np.median(r[best:]) <= 0.01 * res.mmse_pred + 100 * 1e-5, res.status
        if np.median(r[-10:]) > 0.1:
            assert not res.converged and not res.status.startswith("stationary"), res.status


def test_contractions_only_memory(key):
    """The compiled iteration allocates O(n T d + n T^2 + d^2) temporaries, never an n x d x d tensor."""
    S, X, y, _ = _instance(key, 40, 0.5)
    n, T, d = X.shape
    step = amp._make_half_step("softmax", 1.0, 0.0, "exact", "square")
    Z = jnp.zeros((n, T, T))
    temp = step.temp_bytes(X, y, S, 0.5, Z, Z, 0.5, 0.5, n / d**2)
    if temp is None:
        pytest.skip("memory analysis not available on this backend")
    assert temp < 8 * (4 * n * T * d + 8 * d * d + 16 * n * T * T), temp
    assert temp < 8 * n * d * d / 10  # an n x d x d tensor would be 10 times larger


@pytest.mark.slow
def test_linear_channel_with_noise():
    """Linear channel, noise 0.5 on h, T = 2, alpha = 0.1, d = 80: AMP within 0.05 of its SE (0.4264)."""
    k1, k2, k3 = jax.random.split(jax.random.key(3), 3)
    d = 80
    S = aim.sample_teacher(k1, d, RHO)
    X, y = aim.sample_data(k2, S, n=int(0.1 * d * d), T=2, channel="linear", noise=0.5)
    res = aim.gamp_rie(X, y, RHO, channel="linear", noise=0.5, key=k3, S_true=S, max_iter=60)
    se = solve_state_evolution(0.1, RHO, 2, channel="linear", noise=0.5).mmse
    assert not res.diverged
    assert abs(res.error - se) < 0.05, (res.error, se)


# --------------------------------------------------------------------------- checks that a mutant survived
# (issue: tests that prove they can fail). Each test names the slip it is built to catch.


@pytest.mark.slow
@pytest.mark.parametrize("channel,T,alpha", [("softmax", 2, 0.1), ("softmax", 3, 0.05), ("linear", 2, 0.1),
                                             ("hardmax", 2, 0.5), ("relu", 2, 0.1), ("sigmoid", 2, 0.1)])
def test_gamp_state_evolution_with_noise_matches_state_evolution(channel, T, alpha):
    """With noise 0.5 on h, the undamped iteration-by-iteration SE reaches the fixed point of
    :func:`solve_state_evolution` (two codes: one iterates with ``rmt.mmse_denoising``, the other solves
    eq. (bo-root) on a table). Catches the noise entering as ``V + Delta`` (0.588 -> 0.674 softmax)."""
    noise = 0.5
    traj = aim.gamp_rie_state_evolution(alpha, RHO, T, channel=channel, noise=noise, c_init=1.0, n_iter=400)
    assert abs(traj.mmse[-1] - traj.mmse[-2]) < 1e-9  # stationary
    ref = solve_state_evolution(alpha, RHO, T, channel=channel, noise=noise).mmse
    assert traj.mmse[-1] == pytest.approx(ref, abs=1e-4), (traj.mmse[-1], ref)


def test_state_evolution_damping_weights_the_old_variance():
    """Damping 0.3 (not 0.5, where old and new weigh the same): ``V^t = 0.3 V^{t-1} + 0.7 c^t``,
    followed by hand for five iterations."""
    alpha, damping = 0.1, 0.3
    traj = aim.gamp_rie_state_evolution(alpha, RHO, 2, channel="softmax", noise=0.2, c_init=1.0, n_iter=5,
                                        damping=damping)
    c, V = 1.0, 1.0
    for t in range(5):
        V = c if t == 0 else damping * V + (1 - damping) * c
        q_hat = q_hat_of(alpha, 1 + RHO - V, RHO, noise=0.2)
        c = rmt.mmse_denoising(1 / q_hat, RHO)
        assert traj.q_hat[t] == pytest.approx(q_hat, rel=1e-12, abs=0)
        assert traj.mmse[t] == pytest.approx(c, rel=1e-12, abs=0)


def _naive_gamp_rie(X, y, S, rho, noise, damping, n_iter, channel="softmax"):
    """GAMP-RIE written out from eqs. (amp-omega)-(amp-prior) with the package's primitives,
    ``init="mean"``: the reference for the first iterations of :func:`aim.gamp_rie`."""
    n, T, d = X.shape
    alpha = n / d**2
    S_hat = math.sqrt(rho) * jnp.eye(d)
    c = V = 1.0
    Gamma = omega = jnp.zeros((n, T, T))
    errors, preds = [], []
    for it in range(n_iter):
        damp = 0.0 if it == 0 else damping
        omega_new = aim.attention_indices(X, S_hat) - 2 * c * Gamma  # the Onsager term
        omega = damp * omega + (1 - damp) * omega_new
        V = damp * V + (1 - damp) * c
        Gamma = aim.output_score(channel, y, omega, V, noise=noise)
        q_hat = 4 * alpha * float(jnp.mean(jnp.sum(Gamma**2, axis=(-1, -2))))
        delta = 1 / q_hat
        R = S_hat + 2 * delta / d**1.5 * aim.prior_input(X, Gamma)
        S_hat = jnp.asarray(rmt.rie_denoise(np.asarray(R), delta, rho, outside="continuation"))
        c = float(rmt.mmse_denoising(delta, rho))
        errors.append(float(jnp.sum((S_hat - S) ** 2)) / d)
        preds.append(c)
    return np.array(errors), np.array(preds)


@pytest.mark.slow
def test_gamp_rie_damping_against_the_algorithm_written_out(key):
    """The first four iterations at damping 0.3 with noise 0.3 on h, against the algorithm written out
    by hand: catches damping applied to the wrong iterate (invisible at 0.5), the Onsager term, and
    the noise in the score."""
    k1, k2 = jax.random.split(key)
    d = 30
    S = aim.sample_teacher(k1, d, RHO)
    X, y = aim.sample_data(k2, S, n=int(round(0.15 * d * d)), T=2, noise=0.3)
    res = aim.gamp_rie(X, y, RHO, noise=0.3, init="mean", S_true=S, damping=0.3, max_iter=4, min_iter=4,
                       rie_outside="continuation")
    errors, preds = _naive_gamp_rie(X, y, S, RHO, 0.3, 0.3, 4)
    assert res.n_iter == 4
    np.testing.assert_allclose(res.history.error, errors, rtol=1e-9)
    np.testing.assert_allclose(res.history.mmse_pred, preds, rtol=1e-9)
    # and the damping matters here: at damping 0 the same run differs
    errors0, _ = _naive_gamp_rie(X, y, S, RHO, 0.3, 0.0, 4)
    assert np.max(np.abs(errors0 - errors)) > 1e-3


@pytest.mark.slow
def test_published_hardmax_score_pinned_and_monte_carlo(key):
    """The published hardmax score (the joint density in place of the conditional, chapter 4): its
    moment pinned by literal values, and ``q_hat_of(score="published")`` against a Monte Carlo of
    ``4 alpha E ||Gamma_published||^2`` over the channel's own outputs."""
    from aim_tutorial.state_evolution import hardmax_score_moment
    # regression pins of this implementation, whose state evolution reproduces the published curve
    # points to 2e-3 (tests/test_state_evolution.py); a slip in the published score moves them
    for t, val in PUBLISHED_MOMENT.items():
        assert float(hardmax_score_moment(t, "published")) == pytest.approx(val, rel=1e-9), t
    alpha, q, V = 0.7, 1.0, 0.5
    qh = q_hat_of(alpha, q, RHO, 2, channel="hardmax", score="published")
    n = 200_000
    k1, k2 = jax.random.split(key)
    omega = math.sqrt(q) * aim.channels.symmetric_gaussian(k1, (n, 2, 2))
    h = omega + math.sqrt(V) * aim.channels.symmetric_gaussian(k2, (n, 2, 2))
    G = np.asarray(aim.output_score("hardmax", aim.hardmax(h), omega, V, score="published"))
    x = 4 * alpha * np.sum(G * G, axis=(-1, -2))
    mc, err = x.mean(), x.std() / math.sqrt(n)
    assert abs(mc - qh) < 4 * err, (mc, qh, err)
    assert err < 0.01 * mc
    assert qh < 0.95 * q_hat_of(alpha, q, RHO, 2, channel="hardmax")  # not the exact one


PUBLISHED_MOMENT = {0.05: 2.566572222691666, 0.5: 1.9275258599565, 3.0: 0.7966237527265216,
                    40.0: 0.08166303489986831}


@pytest.mark.slow
def test_gamp_rie_with_the_published_score_tracks_its_own_state_evolution():
    """Hardmax, alpha = 0.6779, d = 50, 4 instances: GAMP-RIE with the published score lands on the
    state evolution of that score (0.408: the published curve), not on the exact one (0.142); the
    iteration-by-iteration SE of that score reaches the same fixed point. With the RIE continued off the
    support (as in the paper's code, which used this score): 0.449 +- 0.037 at d = 50. With the edge rule
    (the default) the published score, which breaks the Nishimori identity, collapses on these 4 instances
    (E g^2 / -E g' from 15 to 31): the wrong score, not the denoiser, is what is tested here."""
    alpha, d = 0.6779, 50
    se_pub = solve_state_evolution(alpha, RHO, 2, channel="hardmax", score="published").mmse
    se_exact = solve_state_evolution(alpha, RHO, 2, channel="hardmax").mmse
    traj = aim.gamp_rie_state_evolution(alpha, RHO, 2, channel="hardmax", score="published", c_init=1.5, n_iter=300)
    assert traj.mmse[-1] == pytest.approx(se_pub, abs=1e-5)
    errors = []
    for s in range(4):
        S, X, y, k = _instance(jax.random.key(100 + s), d, alpha, channel="hardmax")
        res = aim.gamp_rie(X, y, RHO, channel="hardmax", score="published", key=k, S_true=S, max_iter=100,
                           rie_outside="continuation")
        assert not res.diverged, res.status
        errors.append(res.error)
    mean, sem = np.mean(errors), np.std(errors, ddof=1) / 2
    assert abs(mean - se_pub) < 4 * sem, (mean, sem, se_pub)
    assert mean - se_exact > 5 * sem  # the exact score's SE is far below


def test_stored_runs_state_their_rie_rule_and_the_edge_rule_never_collapses():
    # chapter 5's stored runs: the main files were made with the edge rule (gamp_rie's default), the
    # continuation file with the RIE continued off the support, on the same instances and starts; with the
    # edge rule none of the 144 softmax runs is flagged, with the continuation some are at the smallest alpha
    def load(name):
        f = aim.datafiles.read(name)
        return {"header": f.header, **f.content}

    edge, cont = load("amp_softmax.json"), load("amp_softmax_continuation.json")
    rule = {"edge": edge["header"]["params"].pop("rie_outside"),
            "continuation": cont["header"]["params"].pop("rie_outside")}
    assert rule == {"edge": "edge", "continuation": "continuation"}
    assert "--rie-outside continuation" in cont["header"]["commands"][0]
    for part in ("softmax150", "hardmax", "finite"):
        assert aim.datafiles.read(f"amp_{part}.json").header["params"]["rie_outside"] == "edge"
    flagged = [[sum(r["diverged"] for r in p["runs"]) for p in curve] for curve in edge["curves"].values()]
    assert sum(map(sum, flagged)) == 0 and sum(len(p["runs"]) for c in edge["curves"].values() for p in c) == 144
    assert edge["header"]["params"] == cont["header"]["params"]
    assert sum(r["diverged"] for c in cont["curves"].values() for p in c for r in p["runs"]) >= 6


# --------------------------------------------------------------------------- the pieces of gamp_rie: options,
# state, step and stopping policy


@pytest.mark.parametrize("field, bad", [
    ("init", "zeros"), ("c_init", -1.0), ("c_init", np.inf), ("damping", 1.0), ("damping", True),
    ("max_iter", 0), ("max_iter", 2.0), ("tol", 0.0), ("tol", np.nan), ("min_iter", 0), ("patience", 1),
    ("q_hat_from", "cube"), ("max_ratio", -1.0), ("stall_patience", 1), ("stall_patience", 2.5),
    ("adaptive_damping", "yes"), ("rie_outside", "wrap"),
])
def test_options_validation_names_the_argument(field, bad):
    """One validation, GampRieOptions.validated, names the bad field (ValueError or ArgumentTypeError)."""
    with pytest.raises(ValueError, match=rf"^{field} must"):
        amp.GampRieOptions(**{field: bad}).validated()


def test_options_validated_resolves_and_normalises():
    assert amp.GampRieOptions().validated().c_init == 2.0
    opts = amp.GampRieOptions(init="mean", damping=np.float32(0.25), max_iter=np.int64(7)).validated()
    assert opts.c_init == 1.0 and type(opts.damping) is float and type(opts.max_iter) is int
    assert opts.validated() == opts  # idempotent
    with pytest.raises(TypeError, match="options"):
        amp.gamp_rie_start(np.ones((4, 2, 3)), np.full((4, 2, 2), 0.5), RHO, options=dict(init="mean"))


def test_key_is_keyword_only(key):
    S, X, y, k = _instance(key, 6, 0.5)
    with pytest.raises(TypeError):
        aim.gamp_rie(X, y, RHO, "softmax", 1.0, 0.0, k)


def _tree_equal(a, b):
    la, ta = jax.tree_util.tree_flatten(a)
    lb, tb = jax.tree_util.tree_flatten(b)
    return ta == tb and all(np.array_equal(np.asarray(x), np.asarray(z), equal_nan=True) for x, z in zip(la, lb))


def test_step_is_pure(key):
    """gamp_rie_step: the same state gives the same new state and record, bit for bit, and the state passed
    in is left as it was (checked on a copy made before the steps)."""
    S, X, y, k = _instance(key, 12, 0.5)
    opts = amp.GampRieOptions(damping=0.3, adaptive_damping=True)
    problem, state = amp.gamp_rie_start(X, y, RHO, key=k, S_true=S, options=opts)
    state, _ = amp.gamp_rie_step(problem, state)  # a state with a non-zero Onsager term and S_prev
    snapshot = jax.tree_util.tree_map(np.array, state)
    new1, rec1 = amp.gamp_rie_step(problem, state)
    new2, rec2 = amp.gamp_rie_step(problem, state)
    assert _tree_equal(state, snapshot)
    assert _tree_equal(new1, new2) and _tree_equal(tuple(rec1), tuple(rec2))
    assert new1.it == state.it + 1 == rec1.it and rec1.denoised and rec1.damping == 0.3
    assert np.array_equal(new1.S_prev, state.S_hat)


def test_driver_is_start_step_stop(key):
    """gamp_rie is the loop start -> step until stop, rows of the denoised iterations as the history."""
    S, X, y, k = _instance(key, 12, 0.5)
    res = aim.gamp_rie(X, y, RHO, key=k, S_true=S, max_iter=12, damping=0.2)
    problem, state = amp.gamp_rie_start(X, y, RHO, key=k, S_true=S,
                                        options=amp.GampRieOptions(max_iter=12, damping=0.2))
    policy = amp.GampRieStopPolicy.from_options(problem.options, problem.rho)
    rows, status = [], None
    while status is None:
        state, record = amp.gamp_rie_step(problem, state)
        rows.append(record)
        status = amp.gamp_rie_stop(policy, record, [r.residual for r in rows])
    assert status == res.status and state.it == res.n_iter and np.array_equal(state.S_hat, res.S_hat)
    assert np.array_equal([r.error for r in rows], res.history.error)


def test_stop_policy_returns_each_status():
    """gamp_rie_stop on synthetic records: every rule, in its order of precedence."""
    stop = amp.gamp_rie_stop
    policy = amp.GampRieStopPolicy(max_residual=225.0, tol=1e-5, min_iter=3, max_iter=50, patience=4,
                                   max_ratio=10.0, stall_patience=5, rie_outside="edge")
    ok = amp.GampRieRecord(it=10, residual=2e-3, q_hat=2.0, delta=0.5, mmse_pred=0.3, nishimori_ratio=1.0,
                           grow=0, best_residual=2e-3, best_it=10)
    assert stop(policy, ok) is None
    assert stop(policy, ok._replace(q_hat=math.nan, denoised=False)) == (
        "diverged at iteration 10: q_hat = nan is not a positive number")
    assert stop(policy, ok._replace(q_hat=-1.0)).endswith("q_hat = -1.0 is not a positive number")
    assert stop(policy, ok._replace(prior_input_finite=False)) == "diverged at iteration 10: non-finite prior input R"
    assert stop(policy, ok._replace(estimate_finite=False)) == "diverged at iteration 10: non-finite estimate"
    exploded = ok._replace(residual=300.0)
    assert stop(policy, exploded) == "diverged at iteration 10: residual 300 exploded"
    assert stop(policy._replace(rie_outside="continuation"), exploded).endswith(
        "amplifies edge eigenvalues by 2 Delta = 1: try rie_outside='edge'")
    collapse = stop(policy, ok._replace(nishimori_ratio=12.0))
    assert collapse.startswith("diverged at iteration 10: collapse, the output residuals are 12 times larger")
    assert "rie_outside='edge'" not in collapse
    assert "(q_hat_from='derivative' is no cure)" in stop(policy._replace(rie_outside="continuation"),
                                                          ok._replace(nishimori_ratio=np.nan))
    assert stop(policy._replace(max_ratio=np.inf), ok._replace(nishimori_ratio=1e9)) is None
    assert stop(policy, ok._replace(grow=4)) == "diverged at iteration 10: residual grew 4 iterations in a row"
    assert stop(policy, ok._replace(grow=4, residual=1e-4)) is None  # grown, but below 100 tol
    assert stop(policy, ok._replace(residual=1e-6)) == "converged"
    assert stop(policy, ok._replace(residual=1e-6, it=2)) is None  # before min_iter
    residuals = [0.5, 1e-4, 2e-4, 1.5e-4, 2e-4, 3e-4, 2e-4]
    stalled = ok._replace(it=7, residual=2e-4, best_residual=1e-4, best_it=2)
    assert stop(policy, stalled, residuals).startswith("stationary: the residual stopped decreasing (smallest")
    jumping = [0.5, 0.1, 0.6, 0.7, 0.6, 0.7, 0.6]
    osc = stop(policy, stalled._replace(residual=0.6, best_residual=0.1), jumping)
    assert osc.startswith("oscillating: not converged") and "over the last 6 iterations" in osc
    assert stop(policy._replace(stall_patience=None), stalled, residuals) is None
    assert stop(policy, ok._replace(it=50, best_it=50)) == "max_iter"
    assert stop(policy._replace(max_iter=10), ok) == "max_iter"


# --------------------------------------------------------------------------- checks that a mutant survived
# (second round): the symmetric score, the memory estimate, the messages, the stops, adaptive damping


def test_step_score_is_exactly_symmetric(key):
    """The score Gamma that gamp_rie_step hands on (the Onsager term of the next omega, the input of the prior
    input B) is the symmetric-matrix gradient (G + G^T) / 2, symmetric to the last bit: on softmax data, where
    the two quadratic forms x_a^T S x_b and x_b^T S x_a of omega differ by rounding, and on linear
    outputs with an antisymmetric part of 1e-10 (accepted: check_symmetric allows 1e-8), which is outside
    the model."""
    S, X, y, k = _instance(key, 12, 0.5)
    _, Xl, yl, _ = _instance(key, 12, 0.5, channel="linear")
    A = jax.random.normal(jax.random.key(11), yl.shape)
    yl = yl + 1e-10 * (A - jnp.swapaxes(A, -1, -2))
    for channel, X_, y_ in (("softmax", X, y), ("linear", Xl, yl)):
        problem, state = amp.gamp_rie_start(X_, y_, RHO, channel=channel, key=k)
        for _ in range(2):
            state, _ = amp.gamp_rie_step(problem, state)
            G = np.asarray(state.Gamma)
            asym = np.max(np.abs(G - np.swapaxes(G, -1, -2)))
            assert np.array_equal(G, np.swapaxes(G, -1, -2)), (channel, asym)


def test_iteration_memory_counts_the_forms_between_the_two_programs(key):
    """iteration_memory is the larger of the two compiled programs' temporaries (XLA's memory analysis) plus
    the (n, T, T) quadratic forms that the first program (_quadratic_forms) hands to the second: n T^2 x 8
    bytes on top, never less than either program alone."""
    S, X, y, _ = _instance(key, 12, 0.5)
    n, T, d = X.shape
    mem = amp.iteration_memory(X, y)
    step = amp._make_half_step("softmax", 1.0, 0.0, "exact", "square")
    Z = jnp.zeros((n, T, T))
    analyses = [c.memory_analysis() for c in step._compiled(X, y, jnp.eye(d), 0.5, Z, Z, 0.5, 0.5, n / d**2)]
    if mem is None or any(m is None for m in analyses):
        pytest.skip("memory analysis not available on this backend")
    assert mem == max(m.temp_size_in_bytes for m in analyses) + n * T * T * 8


def test_published_score_outside_the_hardmax_has_its_own_message():
    """score='published' for a channel other than the hardmax is refused with the message saying that it is
    the hardmax score of the paper; any other unknown score with the list of the channel's scores."""
    with pytest.raises(ValueError, match=r"^score must be 'exact' unless channel='hardmax' \('published' is"):
        aim.gamp_rie_state_evolution(0.1, RHO, score="published")
    unknown = r"^score must be one of \('exact',\) for channel 'softmax', got 'cube'"
    with pytest.raises(ValueError, match=unknown):
        aim.gamp_rie_state_evolution(0.1, RHO, score="cube")


def test_stop_policy_from_options_scales_the_explosion_with_the_prior():
    """GampRieStopPolicy.from_options: max_residual = 100 (1 + rho)^2 (the prior's second moment Q0 = 1 + rho,
    squared), the other rules copied from the options; at a narrow prior (rho = 0.05) a residual of 1, far
    below 100 Q0^2 = 110.25, is not an explosion."""
    opts = amp.GampRieOptions(tol=1e-4, min_iter=2, max_iter=9, patience=3, max_ratio=5.0,
                              stall_patience=None, rie_outside="continuation").validated()
    for rho, max_residual in ((0.5, 225.0), (1.0, 400.0), (3.0, 1600.0)):
        assert amp.GampRieStopPolicy.from_options(opts, rho) == amp.GampRieStopPolicy(
            max_residual=max_residual, tol=1e-4, min_iter=2, max_iter=9, patience=3, max_ratio=5.0,
            stall_patience=None, rie_outside="continuation")
    narrow = amp.GampRieStopPolicy.from_options(opts, 0.05)
    assert narrow.max_residual == pytest.approx(110.25, rel=1e-15)
    record = amp.GampRieRecord(it=1, residual=1.0, q_hat=2.0, delta=0.5, mmse_pred=0.05, nishimori_ratio=1.0,
                               best_residual=1.0, best_it=1)
    assert amp.gamp_rie_stop(narrow, record) is None


def test_non_finite_prior_input_is_reported_as_such(key):
    """Linear outputs 1e305 h on tokens 1e3 x, with q_hat from the derivative (for the linear channel
    6 alpha / V = 3, whatever the data): q_hat is finite but the prior input R overflows. The step skips
    the denoiser and records prior_input_finite=False; gamp_rie stops at iteration 1 with "non-finite prior
    input R" (not as a collapse), keeping the start as S_hat."""
    S, X, y, _ = _instance(key, 12, 0.5, channel="linear")
    X, y = 1e3 * X, 1e305 * y
    problem, state = amp.gamp_rie_start(X, y, RHO, channel="linear", options=amp.GampRieOptions(
        init="mean", q_hat_from="derivative"))
    new, record = amp.gamp_rie_step(problem, state)
    assert record.q_hat == pytest.approx(3.0, rel=1e-12)
    assert not record.prior_input_finite and not record.denoised and record.estimate_finite
    assert np.array_equal(new.S_hat, state.S_hat)
    res = aim.gamp_rie(X, y, RHO, channel="linear", init="mean", q_hat_from="derivative")
    assert res.diverged and res.status == "diverged at iteration 1: non-finite prior input R", res.status
    assert res.n_iter == 1 and len(res.history.error) == 0
    np.testing.assert_array_equal(res.S_hat, math.sqrt(RHO) * np.eye(12))


class _InfiniteRmt(_FakeRmt):
    """A stand-in for aim_tutorial.rmt whose RIE returns infinite eigenvalues: the new estimate
    ``O diag(inf) O^T`` is not finite."""

    def rie_eigenvalues(self, lam, delta, rho, outside="continuation"):
        return np.full(np.shape(lam), np.inf)


def test_non_finite_estimate_is_reported_and_not_kept(key, monkeypatch):
    """When the denoiser returns a non-finite estimate (here an RIE forced to infinite eigenvalues) the
    step keeps the last finite S_hat and records estimate_finite=False, and gamp_rie stops at iteration 1
    with "non-finite estimate", the start as S_hat."""
    S, X, y, _ = _instance(key, 8, 0.5, channel="linear")
    monkeypatch.setattr(amp, "_rmt", lambda: _InfiniteRmt(0.0))
    problem, state = amp.gamp_rie_start(X, y, RHO, channel="linear", options=amp.GampRieOptions(init="mean"))
    new, record = amp.gamp_rie_step(problem, state)
    assert not record.estimate_finite and record.prior_input_finite
    assert np.array_equal(new.S_hat, state.S_hat) and new.it == 1
    res = aim.gamp_rie(X, y, RHO, channel="linear", init="mean", max_ratio=np.inf)
    assert res.diverged and res.status == "diverged at iteration 1: non-finite estimate", res.status
    assert res.n_iter == 1
    np.testing.assert_array_equal(res.S_hat, math.sqrt(RHO) * np.eye(8))


class _MonotoneRmt(_FakeRmt):
    """A stand-in for aim_tutorial.rmt whose RIE returns ``S_hat = (1 + 2^-t) I``: iterates that converge
    monotonically (``S_t - S_{t-2} = -3 x 2^-t I``, no oscillation), the residual shrinking by 4 each time."""

    def rie_eigenvalues(self, lam, delta, rho, outside="continuation"):
        self.t += 1
        return np.full(np.shape(lam), 1.0 + 0.5**self.t)


def test_adaptive_damping_is_raised_by_an_oscillation_only(key, monkeypatch):
    """adaptive_damping raises the damping when the iterates oscillate with period 2 (S_t back near S_{t-2}:
    ||S_t - S_{t-2}||^2 < ||S_t - S_{t-1}||^2 / 4), not when they converge monotonically: with an RIE
    forced to S_t = (1 + 2^-t) I the damping stays 0 for all six iterations; with the period-2 jumps of
    _FakeRmt it is raised to 0.5 at iteration 3 (S_3 = S_1), used from iteration 4 on."""
    S, X, y, _ = _instance(key, 8, 0.5, channel="linear")
    kw = dict(channel="linear", init="mean", damping=0.0, adaptive_damping=True, max_ratio=np.inf, max_iter=6)
    monkeypatch.setattr(amp, "_rmt", lambda: _MonotoneRmt(0.0))
    res = aim.gamp_rie(X, y, RHO, **kw)
    assert res.n_iter == 6 and np.all(np.diff(res.history.residual) < 0), res.history.residual
    np.testing.assert_array_equal(res.history.damping, np.zeros(6))
    monkeypatch.setattr(amp, "_rmt", lambda: _FakeRmt(0.5))
    res = aim.gamp_rie(X, y, RHO, **kw)
    np.testing.assert_array_equal(res.history.damping, [0.0, 0.0, 0.0, 0.5, 0.5, 0.5])


def test_state_evolution_without_data_stays_uninformed():
    """alpha = 0 (allowed, alpha >= 0): no data, q_hat = 0 at every iteration, Delta = inf and the error is
    that of the prior mean sqrt(rho) I, 1 (the limit of mmse_rho(Delta) as Delta -> inf); converged."""
    se = aim.gamp_rie_state_evolution(0.0, RHO, n_iter=3)
    np.testing.assert_array_equal(se.q_hat, np.zeros(3))
    np.testing.assert_array_equal(se.delta, np.full(3, np.inf))
    np.testing.assert_array_equal(se.mmse, np.ones(3))
    assert se.converged and se.status == "converged"
    assert rmt.mmse_denoising(1e12, RHO) == pytest.approx(1.0, abs=1e-11)
