"""GAMP-RIE: approximate message passing for the attention-indexed model.

Chapter 5 (``book/05_amp.md``) teaches everything in this module; the
equation labels below refer to it.

The attention indices of one sample are linear measurements of the teacher,
``h_ab = Tr(Z^mu_ab S)`` with symmetric sensing matrices
``Z^mu_ab = (x_a x_b^T + x_b x_a^T - 2 delta_ab I) / (2 sqrt(d))`` (eq. (amp-sensing)), so learning
``S`` from ``(X, y)`` is a generalised linear model on a ``d x d`` symmetric
matrix. GAMP-RIE is the generalised approximate message passing (GAMP)
algorithm for that model, with the separable prior denoiser replaced by the
rotation-invariant estimator (RIE) of :func:`aim_tutorial.rmt.rie_denoise`.
One iteration, eqs. (amp-omega)-(amp-prior):

1. ``V = c``; ``omega_mu = X_mu S_hat X_mu^T / sqrt(d) - (Tr S_hat / sqrt(d)) I - 2 c Gamma_mu^{old}``
   (Onsager term), then damping: keep a fraction ``damping`` of the old ``omega`` and ``V``;
2. ``Gamma_mu = grad_omega log Z_out(y_mu | omega_mu, V)`` (``Gamma_aa = g_aa``, ``Gamma_ab = g_ab / 2``);
3. ``q_hat = (2 alpha / n) sum_mu (2 sum_a g_aa^2 + sum_{a<b} g_ab^2) = (4 alpha / n) sum_mu ||Gamma_mu||_F^2``,
   ``Delta = 1 / q_hat``;
4. ``R = S_hat + (2 Delta / d^{3/2}) sum_mu (X_mu^T Gamma_mu X_mu - Tr(Gamma_mu) I)``, which behaves like
   ``S + sqrt(Delta) Z`` with ``Z`` a GOE matrix;
5. ``S_hat <- RIE_Delta(R)``, ``c <- mmse_rho(Delta)``.

Only contractions are used: ``X_mu S_hat X_mu^T`` as ``(X S_hat) X^T`` and the
prior input as one ``(d, n T) x (n T, d)`` product, so an iteration costs
``O(n T d^2 + d^3)`` time and ``O(n T^2 + d^2)`` memory beyond the data (the
published implementation builds an ``n x d x d`` tensor).

Robustness: every iteration also computes ``-E[dg/domega]`` by forward-mode
autodiff of the score; its ratio to ``E[g^2]`` is 1 on the Nishimori line, and
a large ratio reveals a collapse of the predicted variance, reported as a
divergence (chapter 5, section "A failure mode: collapse").

Reference: Boncoraglio, Troiani, Erba, Zdeborova, *Bayes optimal learning of
attention-indexed models*, NeurIPS 2025 (arXiv 2506.01582), where GAMP-RIE is
applied to the attention-indexed model; Rangan, *Generalized approximate message
passing*, ISIT 2011; Maillard, Troiani, Martin, Krzakala, Zdeborova, arXiv
2408.03733 (GAMP-RIE).
"""

from __future__ import annotations

import importlib
import math
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
from threadpoolctl import threadpool_limits

from . import _checks
from ._amp_steps import _is_concrete, _make_half_step, _prior_input, _prior_step
from ._amp_types import (GampRieHistory, GampRieOptions, GampRieProblem, GampRieRecord, GampRieResult,
                         GampRieSEResult, GampRieState, GampRieStopPolicy)
from .config import algorithm_dtype
from .model import sample_teacher

# the old addresses of the half-iteration's pieces (amp_device, deep.gamp, the benchmarks and the tests
# read them here; the block sizes are read in _amp_steps: a change must be made there)
from ._amp_steps import BLOCK_BYTES, UNBLOCKED_BYTES, _block_rows, _quadratic_forms  # noqa: F401

__all__ = [
    "GampRieHistory",
    "GampRieOptions",
    "GampRieProblem",
    "GampRieRecord",
    "GampRieResult",
    "GampRieSEResult",
    "GampRieState",
    "GampRieStopPolicy",
    "gamp_rie",
    "gamp_rie_start",
    "gamp_rie_state_evolution",
    "gamp_rie_self_check",
    "gamp_rie_step",
    "gamp_rie_stop",
    "prior_input",
    "iteration_memory",
]

# the named tuples live in _amp_types.py (issue 49); their public address is this module
for _t in (GampRieHistory, GampRieOptions, GampRieProblem, GampRieRecord, GampRieResult, GampRieSEResult,
           GampRieState, GampRieStopPolicy):
    _t.__module__ = __name__
del _t

MAX_ADAPTIVE_DAMPING = 0.5  # adaptive damping stops at the default: more made the hardmax drift away at alpha = 0.2
# The self-checks of gamp_rie_self_check. Nishimori ratio E g^2 / -E g' at the last iteration, measured
# on normal runs (softmax T = 2, rho = 0.5, d = 40, 60, 80, 100, alpha = 0.1, 0.15, 0.2, 0.3, 0.5, 6 seeds
# each: 120 runs): at most 1.17 (d = 40, alpha = 0.1; 1.10 at d >= 80), below 1 beyond perfect recovery
# (alpha_PR / alpha); a prior of rho = 1e-4 on rho = 0.5 data: 2.6 to 3.3 (24 runs). Flagged above 1.5.
SELF_CHECK_MAX_RATIO = 1.5
# The tokens' mean square entry against 1, in standard errors sqrt(2 / (n T d)) (exact for iid N(0, 1)
# entries): at most 3.0 in 480 draws of Gaussian tokens (d = 8..100, alpha = 0.01..0.5); integer tokens
# (X rounded) 5.5 and 7.0 at d = 40, alpha = 0.1 (two seeds), 26 at d = 100. Flagged beyond 5 (6e-7 a run).
SELF_CHECK_TOKEN_Z = 5.0


# --------------------------------------------------------------------------- #
# Dependencies (imported lazily: the random-matrix, channel and state-evolution
# modules are taught in chapters 2-4).
# --------------------------------------------------------------------------- #
def _rmt():
    return importlib.import_module("aim_tutorial.rmt")


def _channels():
    return importlib.import_module("aim_tutorial.channels")


def _kernel():
    return importlib.import_module("aim_tutorial.amp_kernel")


# --------------------------------------------------------------------------- #
# The jitted half-iteration: omega, the output score, q_hat and the prior input
# --------------------------------------------------------------------------- #
def iteration_memory(X: jax.Array, y: jax.Array, *, channel: str = "softmax", beta: float = 1.0,
                     noise: float = 0.0) -> Optional[int]:
    """Bytes of temporary buffers XLA allocates for the compiled output half of one GAMP-RIE
    iteration on data ``(X, y)`` (forming ``omega``, the score and ``q_hat``), or ``None`` where the
    backend does not report it. Compiles, does not run. The input ``R`` of the denoiser adds one
    ``(d, d)`` matrix; no ``(n, d, d)`` tensor is ever formed.

    Example:
        >>> import jax, aim_tutorial as aim
        >>> S = aim.sample_teacher(jax.random.key(0), 20, 0.5)
        >>> X, y = aim.sample_data(jax.random.key(1), S, n=40, T=2)
        >>> mem = aim.amp.iteration_memory(X, y)
        >>> mem is None or mem < 8 * 40 * 20 * 20
        True
    """
    ch, beta, noise = _validate_common(channel, beta, noise, "exact")
    X = _checks.real_array("X", X, ndim=3)
    n, T, d = X.shape
    y = _checks.real_array("y", y, shape=(n, T, T))
    _channels().check_settings(ch, T, beta, noise, "exact")
    _channels().check_outputs(ch, "y", y, T, beta)
    step = _make_half_step(ch.name, float(beta), float(noise), "exact", "square")
    Z = jnp.zeros((n, T, T), X.dtype)
    S0 = jnp.eye(d, dtype=X.dtype)
    return step.temp_bytes(X, y, S0, 0.5, Z, Z, 0.5, 0.5, n / d**2)


def prior_input(X: jax.Array, Gamma: jax.Array) -> jax.Array:
    """The sum ``B = sum_mu (X_mu^T Gamma_mu X_mu - Tr(Gamma_mu) I_d)``, eq. (amp-prior).

    Computed as one ``(d, n T) x (n T, d)`` matrix product, never as an ``n x d x d`` tensor.

    Args:
        X: tokens, shape ``(n, T, d)``: a NumPy or JAX array, or nested lists (converted to float64,
            as are integer arrays).
        Gamma: symmetric matrices, shape ``(n, T, T)`` (converted likewise).

    Returns:
        ``B``, shape ``(d, d)``, symmetric.

    Raises:
        ValueError: ``X`` not a finite real ``(n, T, d)`` array, ``Gamma`` not a finite real
            ``(n, T, T)`` array (the checks are skipped for traced values, inside ``jax.jit``).

    Example:
        >>> import jax, jax.numpy as jnp, aim_tutorial as aim
        >>> X = jax.random.normal(jax.random.key(0), (4, 2, 5))
        >>> aim.prior_input(X, jnp.zeros((4, 2, 2))).shape
        (5, 5)
    """
    if _is_concrete(X):
        _checks.real_array("X", X, ndim=3)
    if len(np.shape(X)) != 3:
        raise ValueError(f"X must have shape (n, T, d), got shape {np.shape(X)}")
    n, T, _ = np.shape(X)
    if _is_concrete(Gamma):
        _checks.real_array("Gamma", Gamma, ndim=3)
    if np.shape(Gamma) != (n, T, T):
        raise ValueError(f"Gamma must have shape (n, T, T) = {(n, T, T)}, got shape {np.shape(Gamma)}")
    return _prior_input(jnp.asarray(X, jnp.float64) if _is_concrete(X) else X,
                        jnp.asarray(Gamma, jnp.float64) if _is_concrete(Gamma) else Gamma)


# --------------------------------------------------------------------------- #
# The algorithm
# --------------------------------------------------------------------------- #
def _validate_common(channel, beta, noise, score):
    ch = _channels().get(channel)
    beta = _checks.positive("beta", beta)
    noise = _checks.nonnegative("noise", noise)
    if not isinstance(score, str):
        raise _checks.ArgumentTypeError(f"score must be one of {ch.scores} for channel {ch.name!r}, got {score!r}")
    if score not in ch.scores:
        if score == "published":
            raise ValueError("score must be 'exact' unless channel='hardmax' ('published' is the hardmax score "
                             "of the paper)")
        raise ValueError(f"score must be one of {ch.scores} for channel {ch.name!r}, got {score!r}")
    return ch, beta, noise


def gamp_rie_start(X, y, rho: float, *, channel: str = "softmax", beta: float = 1.0, noise: float = 0.0,
                   key: Optional[jax.Array] = None, S_true=None, score: str = "exact", log_outputs: bool = False,
                   options: Optional[GampRieOptions] = None, dtype=None) -> tuple[GampRieProblem, GampRieState]:
    """Check the data and settings of a GAMP-RIE run and build its problem and starting state.

    Args and Raises: as in :func:`gamp_rie`, with the iteration settings in ``options`` (``None``:
    the defaults, ``GampRieOptions()``).

    Returns:
        ``(problem, state)``: the :class:`GampRieProblem` and the :class:`GampRieState` before the
        first iteration (``S_hat`` from ``options.init``, ``c = V = c_init``, ``Gamma = omega = 0``).

    Example:
        >>> import jax, aim_tutorial as aim
        >>> from aim_tutorial.amp import GampRieOptions, gamp_rie_start
        >>> S = aim.sample_teacher(jax.random.key(0), 20, 0.5)
        >>> X, y = aim.sample_data(jax.random.key(1), S, n=60, T=2)
        >>> problem, state = gamp_rie_start(X, y, 0.5, S_true=S, options=GampRieOptions(init="mean"))
        >>> state.c, state.it, problem.alpha
        (1.0, 0, 0.15)
    """
    ch, beta, noise = _validate_common(channel, beta, noise, score)
    rho = _checks.positive("rho", rho)
    dtype = algorithm_dtype(dtype)
    options = GampRieOptions() if options is None else options
    if not isinstance(options, GampRieOptions):
        raise _checks.ArgumentTypeError(f"options must be a GampRieOptions, got {type(options).__name__}")
    options = options.validated()
    log_outputs = _checks.boolean("log_outputs", log_outputs)
    _checks.real_array("X", X, ndim=3)
    n, T, d = np.shape(X)
    _checks.real_array("y", y, ndim=3)
    if np.shape(y) != (n, T, T):
        raise ValueError(f"y must have shape (n, T, T) = {(n, T, T)}, got shape {np.shape(y)}")
    _channels().check_settings(ch, T, beta, noise, score)
    _channels().check_outputs(ch, "y", y, T, beta, log_outputs=log_outputs)
    if S_true is not None:
        _checks.square_symmetric("S_true", S_true)
        if np.shape(S_true) != (d, d):
            raise ValueError(f"S_true must have shape (d, d) = {(d, d)}, got {np.shape(S_true)}")
        S_true = jnp.asarray(S_true, dtype=dtype)
    if key is not None:
        key = _checks.prng_key("key", key)
    if options.init == "prior":
        if key is None:
            raise ValueError("key must be a jax.random key for init='prior' (or use init='mean')")
        S_hat = sample_teacher(key, d, rho).astype(dtype)  # drawn in float64: both dtypes start alike
    else:
        S_hat = jnp.sqrt(rho) * jnp.eye(d, dtype=dtype)
    half_step = (_make_half_step(ch, beta, noise, score, options.q_hat_from, True) if log_outputs
                 else _make_half_step(ch, beta, noise, score, options.q_hat_from))
    problem = GampRieProblem(
        X=jnp.asarray(X, dtype=dtype), y=jnp.asarray(y, dtype=dtype), rho=rho, alpha=n / d**2,
        half_step=half_step, S_ref=S_true if S_true is not None else jax.device_put(np.zeros((d, d), dtype)),
        has_truth=S_true is not None, options=options, rmt=_rmt())
    return problem, _kernel().init(problem, S_hat)


def gamp_rie_step(problem: GampRieProblem, state: GampRieState) -> tuple[GampRieState, GampRieRecord]:
    """One iteration of GAMP-RIE, eqs. (amp-omega)-(amp-prior): ``state -> (new state, record)``.

    A function of its arguments only (``state`` is not changed). The output half runs jitted
    (``problem.half_step``), the Hilbert transform of the RIE and ``mmse_rho(Delta)`` on the host.
    When ``q_hat`` is not positive or ``R`` not finite the denoiser is skipped: ``S_hat`` and ``c``
    stay, ``record.denoised`` is False; when the new estimate is not finite ``S_hat`` stays.

    Example:
        >>> import jax, aim_tutorial as aim
        >>> from aim_tutorial.amp import GampRieOptions, gamp_rie_start, gamp_rie_step
        >>> S = aim.sample_teacher(jax.random.key(0), 20, 0.5)
        >>> X, y = aim.sample_data(jax.random.key(1), S, n=60, T=2)
        >>> problem, state = gamp_rie_start(X, y, 0.5, S_true=S, options=GampRieOptions(init="mean"))
        >>> new, record = gamp_rie_step(problem, state)
        >>> new.it, record.it, record.denoised, record.damping  # the first iteration is not damped
        (1, 1, True, 0.0)
    """
    p, o = problem, problem.options
    it = state.it + 1
    damp = 0.0 if state.it == 0 else state.damping
    omega, V, Gamma, q_hat, lam, O, ratio = p.half_step(p.X, p.y, state.S_hat, state.c, state.Gamma, state.omega,
                                                        state.V, damp, p.alpha)
    q_hat, ratio = float(q_hat), float(ratio)
    out = state._replace(omega=omega, V=V, Gamma=Gamma, it=it)  # the new state, S_hat and c to come
    # the two failures before the denoiser (a lax port: lax.cond on these flags)
    if not (math.isfinite(q_hat) and q_hat > 0):
        return out, GampRieRecord(it=it, q_hat=q_hat, denoised=False)
    lam = np.asarray(lam)
    if not np.all(np.isfinite(lam)):
        return out, GampRieRecord(it=it, q_hat=q_hat, prior_input_finite=False, denoised=False)
    delta = 1.0 / q_hat
    # RIE: the eigendecomposition of R was done in the jitted half step, the Hilbert transform is here.
    # The edge rule is the default: continued off the support, the RIE amplifies the edge fluctuations of R
    # by 2 Delta, and at small alpha (Delta large) about half the runs collapsed (chapter 5, section
    # "A failure mode: collapse")
    xi = jnp.asarray(p.rmt.rie_eigenvalues(lam.astype(float), delta, p.rho, outside=o.rie_outside), p.X.dtype)
    # dispatched first (JAX returns at once): the device computes the new estimate while the host
    # computes mmse_rho(Delta)
    S_new, residual, err, finite = _prior_step(O, xi, state.S_hat, p.S_ref)
    c = float(p.rmt.mmse_denoising(delta, p.rho))
    residual = float(residual)
    row = dict(it=it, error=float(err) if p.has_truth else float("nan"), mmse_pred=c, residual=residual,
               q_hat=q_hat, delta=delta, nishimori_ratio=ratio, damping=damp)
    if not (bool(finite) and math.isfinite(residual) and math.isfinite(c)):
        return out._replace(c=c), GampRieRecord(**row, estimate_finite=False)
    # the bookkeeping (residual growth, adaptive damping, the smallest residual): the kernel's, as on the device
    grow, damping, best_residual, best_it = _kernel().advance(
        o, state, it, residual, lambda: float(jnp.sum((S_new - state.S_prev) ** 2)) / state.S_hat.shape[0])
    new = out._replace(S_hat=S_new, c=c, damping=damping, S_prev=state.S_hat, residual=residual, grow=grow,
                       best_residual=best_residual, best_it=best_it)
    return new, GampRieRecord(**row, grow=grow, best_residual=best_residual, best_it=best_it)


def one_blas_thread():
    """A context in which the BLAS libraries that NumPy and SciPy load (OpenBLAS) use one thread.

    :func:`gamp_rie` runs its iterations in it. XLA runs the output half of an iteration on its
    own threads; the eigendecomposition (LAPACK, reached through SciPy) and the host's RIE run on
    OpenBLAS's, which keep spinning for a while after each call and take the cores from XLA's
    next program (measured: the benchmarks page, ``benchmarks/design_history.json``). Use it around hand-written loops of
    :func:`gamp_rie_step` too. It wraps ``threadpoolctl.threadpool_limits(1, "blas")``.

    Example:
        >>> from aim_tutorial.amp import one_blas_thread
        >>> with one_blas_thread():
        ...     pass
    """
    return threadpool_limits(limits=1, user_api="blas")


def gamp_rie_stop(policy: GampRieStopPolicy, record: GampRieRecord, residuals=()) -> Optional[str]:
    """The status at which a run stops after the iteration of ``record``, or ``None`` to go on: the
    sentence of the code of :func:`aim_tutorial.amp_kernel.stop_code` (the rules of both loops).

    The rules, in this order: ``q_hat`` not positive, ``R`` or the estimate not finite, the residual
    above ``policy.max_residual`` (an explosion), ``E g^2 / -E g'`` not below ``max_ratio`` (a
    collapse), the residual grown ``patience`` iterations in a row: ``"diverged at iteration
    ...: <why>"``; then ``"converged"`` (residual below ``tol``, from ``min_iter`` on),
    ``"stationary: ..."`` or ``"oscillating: ..."`` (no new smallest residual for ``stall_patience``
    iterations) and ``"max_iter"``.

    Args:
        policy: the :class:`GampRieStopPolicy`.
        record: the :class:`GampRieRecord` of the iteration.
        residuals: the residuals of the run so far, this iteration's last (the ``stall_patience``
            rule reads those since the smallest).

    Example:
        >>> from aim_tutorial.amp import GampRieRecord, GampRieStopPolicy, gamp_rie_stop
        >>> policy = GampRieStopPolicy(max_residual=225.0)
        >>> row = dict(q_hat=2.0, delta=0.5, mmse_pred=0.3, nishimori_ratio=1.0)
        >>> gamp_rie_stop(policy, GampRieRecord(it=5, residual=1e-3, best_it=5, **row)) is None
        True
        >>> gamp_rie_stop(policy, GampRieRecord(it=5, residual=1e-7, **row))
        'converged'
    """
    k = _kernel()
    return k.stop_code(policy, record, residuals).sentence(policy, record, residuals)


def _stall_status(window, best_residual, best_it, tol, c):
    """The status of a run stopped by ``stall_patience`` whose residuals since the smallest one (at
    iteration ``best_it``) are ``window``: the kernel's stall rule
    (:func:`aim_tutorial.amp_kernel.stop_code`) and its sentence."""
    k = _kernel()
    residuals = [math.nan] * (best_it - 1) + list(window)
    record = GampRieRecord(it=best_it + len(window) - 1, mmse_pred=c, best_residual=best_residual, best_it=best_it)
    policy = GampRieStopPolicy(max_residual=math.inf, tol=tol)
    return k._stall_code(policy, record, residuals).sentence(policy, record, residuals)


def gamp_rie(
    X,
    y,
    rho: float,
    *,
    channel: str = "softmax",
    beta: float = 1.0,
    noise: float = 0.0,
    key: Optional[jax.Array] = None,
    S_true=None,
    init: str = "prior",
    c_init: Optional[float] = None,
    damping: float = 0.5,
    max_iter: int = 200,
    tol: float = 1e-5,
    min_iter: int = 3,
    score: str = "exact",
    patience: int = 10,
    q_hat_from: str = "square",
    max_ratio: float = 10.0,
    stall_patience: Optional[int] = 25,
    adaptive_damping: bool = False,
    log_outputs: bool = False,
    rie_outside: str = "edge",
    dtype=None,
) -> GampRieResult:
    """GAMP-RIE for the single-layer attention-indexed model, eqs. (amp-omega)-(amp-prior).

    Estimates the teacher ``S`` from ``(X, y)``, treating the attention indices as the linear
    measurements of eq. (amp-sensing). From ``S_hat`` and ``c = V`` each iteration forms the
    Onsager-corrected ``omega`` (eq. (amp-omega)), the output score ``Gamma`` and ``q_hat``
    (eq. (amp-gout)), the prior input ``R = S_hat + (2 Delta / d^{3/2}) B`` with ``Delta = 1 / q_hat``
    (eq. (amp-prior)), then ``S_hat = RIE_Delta(R)`` and ``c = mmse_rho(Delta)``; ``omega`` and ``V``
    are damped after the first iteration. It stops at the first rule of :func:`gamp_rie_stop` that
    fires: the residual ``||S_hat_new - S_hat||_F^2 / d`` below ``tol``, a divergence, a stall, or
    ``max_iter``. An iteration costs ``O(n T d^2 + d^3)`` time and ``O(n T^2 + d^2)`` memory beyond
    the data (the output half is jitted, the Hilbert transform of the RIE runs on the host); no
    ``n x d x d`` tensor is formed. The iteration settings (``init`` to ``rie_outside`` below) are the
    fields of :class:`GampRieOptions`, which describes each in full; the pieces
    (:func:`gamp_rie_start`, :func:`gamp_rie_step`, :func:`gamp_rie_stop`) can be run by hand.

    Args:
        X: tokens, shape ``(n, T, d)``.
        y: outputs, shape ``(n, T, T)``, finite and possible outputs of the channel (row-stochastic
            with no exact zero for ``"softmax"``, or the log-probabilities with ``log_outputs=True``;
            one-hot rows for ``"hardmax"``; the symmetric noisy indices for ``"linear"``; the
            channel's :attr:`~aim_tutorial.channels.Channel.check_outputs` says which).
        rho: width ratio of the teacher's prior, ``rho > 0``.
        channel: a registered channel (``"softmax"``, ``"hardmax"`` with ``T = 2``, ``"linear"``, ...)
            or a :class:`~aim_tutorial.channels.Channel`.
        beta: inverse temperature of the softmax, ``beta > 0``.
        noise: variance ``>= 0`` of the Gaussian noise on ``h`` (``Delta`` diagonal, ``Delta/2`` off).
        key: a ``jax.random`` key; needed by ``init="prior"`` (``ValueError`` if it is ``None``),
            unused by ``init="mean"`` (checked when given).
        S_true: the teacher ``(d, d)``, only to record the error in the history.
        score: ``"exact"``, or ``"published"`` (hardmax only: the score used by the paper's code).
        log_outputs: ``y`` holds the log-probabilities ``log softmax(beta h)`` (``channel="softmax"``
            only), as :func:`aim_tutorial.sample_data` returns them with ``log_outputs=True``: at
            large ``beta`` the probabilities underflow to 0, their logs stay finite and give the
            same iteration.
        init: ``"prior"`` (a sample of the prior; needs ``key``) or ``"mean"`` (``sqrt(rho) I``).
        c_init: the initial predicted error ``c = V > 0``; ``None``: 2 for ``"prior"``, 1 for ``"mean"``.
        damping: fraction of the old ``omega`` and ``V`` kept each iteration, in ``[0, 1)``.
        max_iter: maximal number of iterations, ``>= 1``.
        tol: stop (converged) when the residual is below ``tol > 0``.
        min_iter: iterations run before ``tol`` and ``stall_patience`` apply, ``>= 1``.
        patience: diverged when the residual grew this many iterations in a row, ``>= 2``.
        q_hat_from: ``"square"`` (eq. (amp-gout)) or ``"derivative"`` (``-E[g']`` by autodiff).
        max_ratio: diverged (a collapse) when ``E[g^2] / (-E[g'])`` is not below this, in ``(0, inf]``.
        stall_patience: stop when no new smallest residual came for this many iterations (``>= 2``,
            or ``None``): status ``"stationary: ..."`` or ``"oscillating: ..."``.
        adaptive_damping: raise the damping towards 0.5 when the iterates grow or oscillate.
        rie_outside: ``"edge"`` or ``"continuation"``: the RIE off the support of ``R``'s spectrum.
        dtype: the dtype of the iteration (``X``, ``y``, the estimate, the contractions and the
            eigendecomposition), ``"float32"`` or ``"float64"`` (or a NumPy/JAX dtype); ``None``:
            float64 on a CPU, float32 on a GPU/TPU (:func:`aim_tutorial.config.algorithm_dtype`,
            overridden by ``AIM_DTYPE``). The RIE's cleaned eigenvalues and ``mmse_rho`` are
            computed in float64 on the host either way; the start ``init="prior"`` is drawn in
            float64, then cast, so that both dtypes start from the same matrix.

    Returns:
        :class:`GampRieResult` with the last finite ``S_hat``, ``converged``, ``diverged``,
        ``status`` (the string of :func:`gamp_rie_stop`), ``code`` (its
        :class:`aim_tutorial.amp_kernel.Status`) and the per-iteration
        :class:`GampRieHistory`.

    Raises:
        ValueError: invalid data (``X`` not a finite real ``(n, T, d)`` array with ``n, T, d >= 1``,
            ``y`` not ``(n, T, T)``, not finite, or not outputs of the channel, e.g. softmax
            probabilities with exact zeros: pass ``log_outputs=True`` data) or settings (each
            argument is checked and named); :class:`aim_tutorial._checks.ArgumentTypeError` (a
            ``TypeError`` and a ``ValueError``) for an argument of the wrong kind.

    Example:
        >>> import jax, aim_tutorial as aim
        >>> S = aim.sample_teacher(jax.random.key(0), 40, 0.5)
        >>> X, y = aim.sample_data(jax.random.key(1), S, n=int(0.15 * 40**2), T=2)
        >>> res = aim.gamp_rie(X, y, 0.5, key=jax.random.key(2), S_true=S)
        >>> res.S_hat.shape, len(res.history.error) == res.n_iter
        ((40, 40), True)

    Reference: arXiv 2506.01582 (GAMP-RIE); taught in chapter 5 (``book/05_amp.md``).
    """
    options = GampRieOptions(init=init, c_init=c_init, damping=damping, max_iter=max_iter, tol=tol,
                             min_iter=min_iter, patience=patience, q_hat_from=q_hat_from, max_ratio=max_ratio,
                             stall_patience=stall_patience, adaptive_damping=adaptive_damping,
                             rie_outside=rie_outside)
    with one_blas_thread():
        problem, state = gamp_rie_start(X, y, rho, channel=channel, beta=beta, noise=noise, key=key, S_true=S_true,
                                        score=score, log_outputs=log_outputs, options=options, dtype=dtype)
        kernel, state, record, code, hist = _iterate(problem, state)
    history = GampRieHistory(**{k: np.asarray(v, dtype=float) for k, v in hist.items()})
    return kernel.finish(problem, state, history, code, record)


def _iterate(problem: GampRieProblem, state: GampRieState):
    """The loop of :func:`gamp_rie`: steps until a rule of :func:`gamp_rie_stop` fires.

    Returns ``(kernel, state, record, code, hist)``: the kernel module, the last state and record, the
    stop code and the history's columns as lists (one entry per iteration that denoised).
    """
    kernel = _kernel()
    policy = GampRieStopPolicy.from_options(problem.options, problem.rho)
    hist = {k: [] for k in GampRieHistory._fields}
    code = kernel.Status.RUNNING
    while code == kernel.Status.RUNNING:
        state, record = kernel.step(problem, state)
        if record.denoised:
            for k, v in hist.items():
                v.append(getattr(record, k))
        code = kernel.stop_code(policy, record, hist["residual"])
    return kernel, state, record, code, hist


def gamp_rie_self_check(X, nishimori_ratio) -> tuple[bool, str]:
    """GAMP-RIE's account of itself, checked without the truth: ``(consistent, sentence)``.

    The predicted error ``mmse_pred = mmse_rho(Delta)`` holds when the model fits the data. Two of its
    assumptions are checked:

    - the output channel's Nishimori identity ``E g^2 = -E g'`` at the last iteration: the ratio is
      about 1 at a Bayes-optimal fixed point and below 1 beyond perfect recovery (``V`` is then larger
      than the actual error); above ``SELF_CHECK_MAX_RATIO = 1.5`` the output residuals are larger
      than the predicted variance: the actual error is larger than predicted (a prior ``rho`` that
      does not fit the data gave 2.6 to 3.3 with a predicted error of 9e-5 and an actual one of 1.4);
    - the tokens: the mean square entry of ``X`` against the model's 1 (iid ``N(0, 1)`` tokens),
      flagged beyond ``SELF_CHECK_TOKEN_Z = 5`` standard errors (integer tokens converged with a
      predicted error of 0.29 and an actual one of 0.86).

    The thresholds come from the spread of normal runs (see the constants in the source). A run
    that passes is not proven right, one that fails is not to be trusted.

    Args:
        X: the tokens of the run, shape ``(n, T, d)``.
        nishimori_ratio: the history's ``nishimori_ratio`` (its last entry is read; empty: no
            iteration reached the denoiser, which fails the check).

    Returns:
        ``(consistent, consistency)``: a bool and a sentence saying what was found.

    Example:
        >>> import numpy as np
        >>> from aim_tutorial.amp import gamp_rie_self_check
        >>> X = np.random.default_rng(0).standard_normal((400, 2, 20))
        >>> gamp_rie_self_check(X, [1.3, 1.02])[0], gamp_rie_self_check(np.round(X), [1.02])[0]
        (True, False)
    """
    ratios = np.asarray(nishimori_ratio, dtype=float).ravel()
    ratio = float(ratios[-1]) if ratios.size else math.nan
    # on the device that holds the tokens (no copy of them to the host); a float32 sum of 1e8
    # squares is good to about 1e-7, far below the standard error sqrt(2 / size) = 1.4e-4 there
    size = int(np.prod(np.shape(X)))
    m2 = float(jnp.mean(jnp.square(jnp.asarray(X))))
    z = (m2 - 1.0) / math.sqrt(2.0 / size)
    found = []
    if not ratio <= SELF_CHECK_MAX_RATIO:
        found.append(f"the output channel's Nishimori ratio E g^2 / -E g' is {ratio:.3g} at the last iteration "
                     f"(about 1 or below in runs that fit the model; flagged above {SELF_CHECK_MAX_RATIO:g}): "
                     "the outputs vary more than the predicted error allows, the actual error is larger "
                     "(a prior rho or a channel that does not fit the data?)")
    if not abs(z) <= SELF_CHECK_TOKEN_Z:
        found.append(f"the tokens' mean square entry is {m2:.4g}, {z:.3g} standard errors from the model's 1 "
                     f"(iid N(0, 1) tokens; flagged beyond {SELF_CHECK_TOKEN_Z:g}): the predicted error "
                     "assumes such tokens")
    if found:
        return False, "inconsistent: the predicted error mmse_pred is not to be trusted: " + "; ".join(found)
    return True, (f"consistent: Nishimori ratio {ratio:.3g} (flagged above {SELF_CHECK_MAX_RATIO:g}), tokens' "
                  f"mean square entry {m2:.4g} ({z:.2g} standard errors from 1)")


def gamp_rie_state_evolution(
    alpha: float,
    rho: float,
    T: int = 2,
    *,
    channel: str = "softmax",
    beta: float = 1.0,
    noise: float = 0.0,
    c_init: Optional[float] = None,
    n_iter: int = 50,
    damping: float = 0.0,
    score: str = "exact",
    tol: float = 1e-8,
) -> GampRieSEResult:
    """The state evolution of GAMP-RIE, iteration by iteration, eq. (amp-se).

    ``V^t = damping V^{t-1} + (1 - damping) c^t`` (no damping at ``t = 1``),
    ``q_hat^t = q_hat(V^t)`` (the channel's ``2 alpha E[2 sum g_aa^2 + sum_{a<b} g_ab^2]`` at
    variance ``V^t``), ``c^{t+1} = mmse_rho(1 / q_hat^t)``, from ``c^1 = c_init``.
    With ``damping = 0`` it is the state evolution of chapter 4, eq. (bo-se), run from ``q = Q0 - c_init``;
    with damping it follows the damping of ``V`` only (a heuristic: damping ``omega`` changes the
    path, not the fixed point).

    Args:
        alpha: sample complexity ``n / d^2 >= 0``.
        rho: width ratio ``> 0``.
        T: tokens a sequence (``2`` for hardmax).
        channel: ``"softmax"``, ``"hardmax"`` or ``"linear"``.
        beta, noise, score: as in :func:`gamp_rie`.
        c_init: starting error (``2`` matches ``init="prior"``, ``1`` matches ``init="mean"``).
            Default: ``2``, the default of :func:`gamp_rie`, capped at the prior's second moment
            ``Q0 = 1 + rho`` (the uninformed start ``q = 0``) for ``channel="hardmax"``, whose
            integrals need ``q = Q0 - c >= 0`` (for the other channels ``q = max(Q0 - c, 0)``).
        n_iter: number of iterations.
        damping: in ``[0, 1)``.
        tol: ``converged`` when the last iteration changed ``c`` by at most ``tol``.

    Returns:
        :class:`GampRieSEResult` with arrays of length ``n_iter``, ``converged`` and ``status``
        (``"converged"``, ``"oscillating: ..."`` or ``"not converged: ..."``).

    Example:
        >>> import aim_tutorial as aim
        >>> se = aim.gamp_rie_state_evolution(0.13, 0.5, n_iter=100)
        >>> round(float(se.mmse[-1]), 3)
        0.221

    Reference: arXiv 2506.01582 (GAMP-RIE); taught in chapter 5 (``book/05_amp.md``).
    """
    ch, beta, noise = _validate_common(channel, beta, noise, score)
    alpha = _checks.nonnegative("alpha", alpha)
    rho = _checks.positive("rho", rho)
    T = _checks.integer_at_least("T", T, 2)
    _channels().check_settings(ch, T, beta, noise, score)
    if c_init is None:
        c_init = min(2.0, 1.0 + rho) if ch.name == "hardmax" else 2.0
    c_init = _checks.positive("c_init", c_init)
    tol = _checks.positive("tol", tol)
    if ch.name == "hardmax" and c_init > 1.0 + rho:
        # the hardmax integrals are functions of t = q / V' >= 0
        raise ValueError(f"c_init must be in (0, Q0] = (0, {1.0 + rho}] for channel='hardmax' (overlap q >= 0)")
    n_iter = _checks.integer_at_least("n_iter", n_iter, 1)
    damping = _checks.in_range("damping", damping, 0.0, 1.0, high_open=True)
    rmt = _rmt()
    c, V = c_init, c_init
    out = {"mmse": [], "q_hat": [], "delta": []}
    for t in range(n_iter):
        V = c if t == 0 else damping * V + (1 - damping) * c
        q_hat = _q_hat_of_V(alpha, rho, T, ch, beta, noise, score, V)
        delta = 1.0 / q_hat if q_hat > 0 else math.inf
        c = float(rmt.mmse_denoising(delta, rho)) if math.isfinite(delta) else 1.0
        out["mmse"].append(c)
        out["q_hat"].append(q_hat)
        out["delta"].append(delta)
    arrays = {k: np.asarray(v, dtype=float) for k, v in out.items()}
    converged, status = _se_status(arrays["mmse"], c_init, tol)
    return GampRieSEResult(**arrays, converged=converged, status=status)


def _se_status(mmse, c_init, tol):
    """``(converged, status)`` of a state-evolution trajectory: the last change of ``c`` against ``tol``,
    and, when it is larger, whether the trajectory oscillates (period 2: ``c^t`` back near ``c^{t-2}``)."""
    c = np.concatenate([[c_init], mmse])
    step = abs(float(c[-1] - c[-2]))
    if not np.all(np.isfinite(mmse)):
        return False, "not converged: a non-finite error appeared"
    if step <= tol:
        return True, "converged"
    if len(c) >= 4:
        d1, d2 = c[-1] - c[-2], c[-2] - c[-3]
        if d1 * d2 < 0 and abs(float(c[-1] - c[-3])) < 0.5 * step:
            return False, (f"oscillating: c jumps by {step:.3g} each iteration (period 2) after {len(mmse)} "
                           f"iterations, tol {tol:g}; more damping may help")
    return False, (f"not converged: the last iteration changed c by {step:.3g} > tol = {tol:g} after "
                   f"{len(mmse)} iterations (raise n_iter)")


def _q_hat_of_V(alpha, rho, T, ch, beta, noise, score, V):
    """``q_hat`` of the channel at variance ``V`` (overlap ``q = Q0 - V``, at least 0), eq. (amp-se)."""
    ch = _channels().get(ch)
    q = max(1.0 + rho - V, 0.0)
    return float(alpha * np.asarray(ch.se_H(np.asarray(q), np.asarray(V + noise / 2), T, beta, score)))
