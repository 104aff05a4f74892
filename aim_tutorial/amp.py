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

import functools
import importlib
import math
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from . import _checks
from .model import sample_teacher

__all__ = [
    "GampRieHistory",
    "GampRieResult",
    "GampRieSEResult",
    "gamp_rie",
    "gamp_rie_state_evolution",
    "prior_input",
    "iteration_memory",
]

MAX_ADAPTIVE_DAMPING = 0.5  # adaptive damping stops at the default: more made the hardmax drift away at alpha = 0.2


# --------------------------------------------------------------------------- #
# Dependencies (imported lazily: the random-matrix, channel and state-evolution
# modules are taught in chapters 2-4).
# --------------------------------------------------------------------------- #
def _rmt():
    return importlib.import_module("aim_tutorial.rmt")


def _channels():
    return importlib.import_module("aim_tutorial.channels")


# --------------------------------------------------------------------------- #
# Results
# --------------------------------------------------------------------------- #
class GampRieHistory(NamedTuple):
    """Per-iteration diagnostics of :func:`gamp_rie` (numpy arrays, one entry an iteration).

    Attributes:
        error: ``||S_hat - S_true||_F^2 / d`` after the iteration (``nan`` when no ``S_true`` is given).
        mmse_pred: the predicted error ``c = mmse_rho(Delta)`` after the iteration.
        residual: ``||S_hat_new - S_hat_old||_F^2 / d``.
        q_hat: the empirical ``q_hat`` of the iteration.
        delta: the effective noise ``Delta = 1 / q_hat``.
        nishimori_ratio: ``E[g^2] / (-E[g'])`` over the samples (the two estimators of ``q_hat``); 1 on
            the Nishimori line (up to finite-size corrections), large when the predicted variance ``V``
            has collapsed below the actual error.
        damping: the damping used in the iteration (it changes only with ``adaptive_damping``).
    """

    error: np.ndarray
    mmse_pred: np.ndarray
    residual: np.ndarray
    q_hat: np.ndarray
    delta: np.ndarray
    nishimori_ratio: np.ndarray
    damping: np.ndarray


class GampRieResult(NamedTuple):
    """Result of :func:`gamp_rie`.

    Attributes:
        S_hat: the final estimate, shape ``(d, d)`` (the last finite iterate if the run diverged).
        mmse_pred: predicted error ``c`` of the final estimate.
        error: ``||S_hat - S_true||_F^2 / d`` (``nan`` without ``S_true``).
        converged: the residual fell below ``tol``.
        diverged: a non-finite value appeared, or the residual grew without bound; ``S_hat`` is then
            the last finite iterate and must not be trusted.
        n_iter: number of iterations run.
        status: ``"converged"``, ``"max_iter"``, ``"stationary: ..."`` or ``"oscillating: ..."`` (see
            ``stall_patience``; both ``converged=False``) or a sentence saying why the run was declared
            divergent.
        history: :class:`GampRieHistory`.
    """

    S_hat: jax.Array
    mmse_pred: float
    error: float
    converged: bool
    diverged: bool
    n_iter: int
    status: str
    history: GampRieHistory


class GampRieSEResult(NamedTuple):
    """Result of :func:`gamp_rie_state_evolution`: the state evolution of GAMP-RIE, iteration by iteration.

    Attributes:
        mmse: predicted error ``c^t`` after iteration ``t`` (length ``n_iter``).
        q_hat: ``q_hat^t``.
        delta: ``1 / q_hat^t``.
        converged: the last step changed ``c`` by at most ``tol``.
        status: ``"converged"``, or a sentence saying why not: ``"oscillating: ..."`` (period-2
            jumps that do not shrink) or ``"not converged: ..."`` (still moving after ``n_iter``
            iterations).
    """

    mmse: np.ndarray
    q_hat: np.ndarray
    delta: np.ndarray
    converged: bool = False
    status: str = "not converged"


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
    compiled = step.lower(X, y, S0, 0.5, Z, Z, 0.5, 0.5, n / d**2).compile()
    mem = compiled.memory_analysis()
    return None if mem is None else int(mem.temp_size_in_bytes)


def prior_input(X: jax.Array, Gamma: jax.Array) -> jax.Array:
    """The sum ``B = sum_mu (X_mu^T Gamma_mu X_mu - Tr(Gamma_mu) I_d)``, eq. (amp-prior).

    Computed as one ``(d, n T) x (n T, d)`` matrix product, never as an ``n x d x d`` tensor.

    Args:
        X: tokens, shape ``(n, T, d)``.
        Gamma: symmetric matrices, shape ``(n, T, T)``.

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


def _is_concrete(x) -> bool:
    return not isinstance(x, jax.core.Tracer)


def _prior_input(X, Gamma):
    """:func:`prior_input` without the checks (inside the jitted iteration)."""
    n, T, d = X.shape
    GX = jnp.einsum("nab,nbd->nad", Gamma, X)
    B = GX.reshape(n * T, d).T @ X.reshape(n * T, d)
    B = (B + B.T) / 2
    return B - jnp.sum(jnp.trace(Gamma, axis1=-2, axis2=-1)) * jnp.eye(d, dtype=X.dtype)


@functools.lru_cache(maxsize=None)
def _make_half_step(channel, beta: float, noise: float, score: str, q_hat_from: str = "square",
                    log_outputs: bool = False):
    """Jitted output half of an iteration for one channel (cached per channel settings); with
    ``log_outputs`` ``y`` holds ``log y`` (the channel's ``log_score``)."""
    channel = _channels().get(channel)
    channel_score = channel.log_score if log_outputs else channel.score

    def score_fn(y, omega, V):
        G = channel_score(y, omega, V + noise / 2, beta, score)
        return (G + jnp.swapaxes(G, -1, -2)) / 2

    def half_step(X, y, S_hat, c, Gamma_old, omega_old, V_old, damping, alpha):
        n, T, d = X.shape
        sqd = jnp.sqrt(jnp.asarray(d, X.dtype))
        eye_T = jnp.eye(T, dtype=X.dtype)
        XS = X @ S_hat  # (n, T, d): O(n T d^2)
        omega_new = (
            jnp.einsum("nad,nbd->nab", XS, X) / sqd
            - jnp.trace(S_hat) / sqd * eye_T
            - 2.0 * c * Gamma_old
        )
        omega = damping * omega_old + (1.0 - damping) * omega_new
        V = damping * V_old + (1.0 - damping) * c
        Gamma = score_fn(y, omega, V)
        q_hat_square = 4.0 * alpha * jnp.mean(jnp.sum(Gamma**2, axis=(-2, -1)))
        # -E[dg/domega] over the T(T+1)/2 free entries (a <= b), by forward-mode autodiff
        iu, ju = np.triu_indices(T)
        E = np.zeros((len(iu), T, T))
        E[np.arange(len(iu)), iu, ju] = 1.0
        E[np.arange(len(iu)), ju, iu] = 1.0
        pick = np.zeros((len(iu), T, T))
        pick[np.arange(len(iu)), iu, ju] = 1.0

        def directional(Ek):
            return jax.jvp(lambda w: score_fn(y, w, V), (omega,), (jnp.broadcast_to(Ek, omega.shape),))[1]

        dG = jax.vmap(directional)(jnp.asarray(E))  # (K, n, T, T)
        # 2 sum_a dg_aa/domega_aa + sum_{a<b} dg_ab/domega_ab, with g_aa = Gamma_aa, g_ab = 2 Gamma_ab
        q_hat_derivative = -4.0 * alpha * jnp.mean(jnp.einsum("knab,kab->n", dG, jnp.asarray(pick)))
        q_hat = q_hat_square if q_hat_from == "square" else q_hat_derivative
        # on the Nishimori line E g^2 = -E g': the ratio is 1 up to finite-size corrections
        ratio = q_hat_square / q_hat_derivative
        B = _prior_input(X, Gamma)
        R = S_hat + (2.0 / (q_hat * d**1.5)) * B
        lam, O = jnp.linalg.eigh(R)
        return omega, V, Gamma, q_hat, lam, O, ratio

    return jax.jit(half_step)


@jax.jit
def _prior_step(O, xi, S_hat, S_true):
    """``S_new = O diag(xi) O^T``, the residual ``||S_new - S_hat||^2/d`` and the error against ``S_true``."""
    d = S_hat.shape[0]
    S_new = (O * xi) @ O.T
    S_new = (S_new + S_new.T) / 2
    residual = jnp.sum((S_new - S_hat) ** 2) / d
    error = jnp.sum((S_new - S_true) ** 2) / d
    return S_new, residual, error, jnp.all(jnp.isfinite(S_new))


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


def gamp_rie(
    X,
    y,
    rho: float,
    channel: str = "softmax",
    beta: float = 1.0,
    noise: float = 0.0,
    key: Optional[jax.Array] = None,
    *,
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
) -> GampRieResult:
    """GAMP-RIE for the single-layer attention-indexed model, eqs. (amp-omega)-(amp-prior).

    Iterates (``V = c``, Onsager-corrected ``omega``, output score ``Gamma``, ``q_hat``,
    prior input ``R``, ``S_hat = RIE_Delta(R)``, ``c = mmse_rho(Delta)``) until
    ``||S_hat_new - S_hat||_F^2 / d < tol``. Each iteration costs ``O(n T d^2 + d^3)``
    time and ``O(n T^2 + d^2)`` memory beyond the data.

    Args:
        X: tokens, shape ``(n, T, d)``.
        y: outputs, shape ``(n, T, T)``, finite and possible outputs of the channel (row-stochastic
            with no exact zero for ``"softmax"``, or the log-probabilities with ``log_outputs=True``;
            one-hot rows for ``"hardmax"``; the symmetric noisy indices for ``"linear"``; the
            channel's :attr:`~aim_tutorial.channels.Channel.check_outputs` says which).
        rho: width ratio of the teacher's prior, ``rho > 0``.
        channel: ``"softmax"``, ``"hardmax"`` (``T = 2``) or ``"linear"``.
        beta: inverse temperature of the softmax, ``beta > 0``.
        noise: variance ``>= 0`` of the Gaussian noise on ``h`` (``Delta`` diagonal, ``Delta/2`` off).
        key: a ``jax.random`` key; needed by ``init="prior"`` (``ValueError`` if it is ``None``),
            unused by ``init="mean"`` (checked when given).
        S_true: the teacher ``(d, d)``, only to record the error in the history.
        init: ``"prior"`` (a fresh sample of the prior, as in the paper) or ``"mean"``
            (``S_hat = sqrt(rho) I``, the posterior mean at ``alpha = 0``; needs no key).
        c_init: the initial predicted error ``c = V``; default ``2 (1 + rho) - 2 rho = 2`` for
            ``init="prior"`` (the expected error of an independent prior sample) and
            ``1`` for ``init="mean"``.
        damping: fraction of the old ``omega`` and ``V`` kept each iteration, in ``[0, 1)``.
        adaptive_damping: start from ``damping`` (``0`` is the intended start) and keep more of the
            old iterate, ``damping <- (1 + damping) / 2`` up to ``MAX_ADAPTIVE_DAMPING = 0.5`` (the
            default damping), each time the residual has grown two iterations in a row or the iterates
            oscillate with period 2 (``||S_t - S_{t-2}||^2 < ||S_t - S_{t-1}||^2 / 4``). Half damping from
            the start slows the hardmax iteration at large ``alpha`` and no damping makes it
            oscillate at small ``alpha`` (both shown in chapter 5); in trials, letting the rule go
            above 0.5 made some hardmax runs at ``alpha = 0.2`` drift away from a fixed point.
        rie_outside: what the RIE does with an eigenvalue of ``R`` off the limiting support
            (:func:`aim_tutorial.rmt.rie_eigenvalues`): ``"edge"`` (the default: the nearest edge's
            cleaned value) or ``"continuation"`` (the formula continued off the support, as in the
            paper's code). At small ``alpha`` the first iterations have ``Delta = 1/q_hat`` large, the
            continuation amplifies the edge fluctuations of ``R`` by ``2 Delta`` and about half the
            runs collapse; with ``"edge"`` they converge (chapter 5, section on collapse).
        max_iter: maximal number of iterations, ``>= 1``.
        tol: stopping threshold on ``||S_hat_new - S_hat||_F^2 / d``, ``> 0``.
        min_iter: iterations run before the stopping rule is checked.
        score: ``"exact"``, or ``"published"`` (hardmax only: the score used by the paper's code).
        patience: the run is declared divergent when the residual has grown this many
            iterations in a row (and exceeds ``100 tol``).
        q_hat_from: ``"square"`` (default, eq. (amp-gout): ``q_hat = 4 alpha mean ||Gamma||_F^2``,
            which uses the Nishimori identity) or ``"derivative"`` (``-2 alpha E[2 sum g'_aa +
            sum g'_ab]`` by forward-mode autodiff of the score: the textbook GAMP variance; for the
            softmax it equals the state-evolution ``(T^2 + T - 2) alpha / V`` exactly).

        max_ratio: the run is declared divergent (a collapse) when ``E[g^2] / (-E[g'])`` exceeds this:
            the square estimator of ``q_hat`` then feeds on itself (``V`` shrinks like ``V^2``) and the
            iteration would stop at a spurious "perfect recovery" with ``c ~ 0``.

        stall_patience: stop (``converged=False``) when the residual has not reached a new minimum
            for this many iterations. At finite ``d`` the iterates can fluctuate around the fixed point
            a little above ``tol`` while the error no longer moves: status ``"stationary: ..."`` when
            the median residual of those iterations is below ``0.01 c + 100 tol`` (``c`` the predicted
            error); above it the iterates keep jumping (typically a period-2 oscillation of the
            undamped hardmax at small ``alpha``) and the status is ``"oscillating: ..."``, with the
            residual: not a fixed point (more damping or ``adaptive_damping=True`` may help).
            ``None`` disables this rule.
        log_outputs: ``y`` holds the log-probabilities ``log softmax(beta h)`` (``channel="softmax"``
            only), as :func:`aim_tutorial.sample_data` returns them with ``log_outputs=True``: at large
            ``beta`` (``>= 100``) the probabilities underflow to 0 and their logs are lost; the
            log-probabilities stay finite and give the same iteration.

    Implementation: the output half of an iteration (``omega``, ``Gamma``, ``q_hat``, ``R`` and
    the eigendecomposition of ``R``) is one jitted function; the Hilbert transform at the ``d``
    eigenvalues (:func:`aim_tutorial.rmt.rie_eigenvalues`) and ``mmse_rho(Delta)`` run on the host,
    then a jitted step rebuilds ``S_hat``. Memory: ``X``, ``X S_hat`` (``n T d``) and
    ``O(n T^2 + d^2)`` more; never an ``n x d x d`` tensor.

    Returns:
        :class:`GampRieResult` with ``S_hat``, ``converged``, ``diverged``, ``status`` and the
        per-iteration :class:`GampRieHistory`.

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
    ch, beta, noise = _validate_common(channel, beta, noise, score)
    rho = _checks.positive("rho", rho)
    damping = _checks.in_range("damping", damping, 0.0, 1.0, high_open=True)
    max_iter = _checks.integer_at_least("max_iter", max_iter, 1)
    adaptive_damping = _checks.boolean("adaptive_damping", adaptive_damping)
    rie_outside = _checks.one_of("rie_outside", rie_outside, ("continuation", "edge"))
    log_outputs = _checks.boolean("log_outputs", log_outputs)
    min_iter = _checks.integer_at_least("min_iter", min_iter, 1)
    patience = _checks.integer_at_least("patience", patience, 2)
    tol = _checks.positive("tol", tol)
    max_ratio = _checks.positive("max_ratio", max_ratio, allow_inf=True)
    if stall_patience is not None:
        stall_patience = _checks.integer_at_least("stall_patience", stall_patience, 2)
    _checks.one_of("init", init, ("prior", "mean"))
    _checks.one_of("q_hat_from", q_hat_from, ("square", "derivative"))
    _checks.real_array("X", X, ndim=3)
    n, T, d = np.shape(X)
    _checks.real_array("y", y, ndim=3)
    if np.shape(y) != (n, T, T):
        raise ValueError(f"y must have shape (n, T, T) = {(n, T, T)}, got shape {np.shape(y)}")
    _channels().check_settings(ch, T, beta, noise, score)
    _channels().check_outputs(ch, "y", y, T, beta, log_outputs=log_outputs)
    X = jnp.asarray(X, dtype=jnp.float64)
    y = jnp.asarray(y, dtype=jnp.float64)
    if S_true is not None:
        _checks.square_symmetric("S_true", S_true)
        if np.shape(S_true) != (d, d):
            raise ValueError(f"S_true must have shape (d, d) = {(d, d)}, got {np.shape(S_true)}")
        S_true = jnp.asarray(S_true, dtype=jnp.float64)
    if c_init is None:
        c_init = 2.0 if init == "prior" else 1.0
    c_init = _checks.positive("c_init", c_init)
    if key is not None:
        key = _checks.prng_key("key", key)
    if init == "prior":
        if key is None:
            raise ValueError("key must be a jax.random key for init='prior' (or use init='mean')")
        S_hat = sample_teacher(key, d, rho)
    else:
        S_hat = jnp.sqrt(rho) * jnp.eye(d)

    rmt = _rmt()
    S_ref = S_true if S_true is not None else jnp.zeros((d, d))
    half_step = (_make_half_step(ch, beta, noise, score, q_hat_from, True) if log_outputs
                 else _make_half_step(ch, beta, noise, score, q_hat_from))
    alpha = n / d**2
    c = c_init
    Gamma = jnp.zeros((n, T, T))
    omega = jnp.zeros((n, T, T))
    V = c
    hist = {k: [] for k in GampRieHistory._fields}
    converged = diverged = False
    status = "max_iter"
    last_finite = S_hat
    S_prev = None  # the iterate before S_hat (adaptive damping looks for period-2 oscillations)
    grow = 0
    best_residual, best_it = math.inf, 0
    it = 0
    for it in range(1, max_iter + 1):
        damp = 0.0 if it == 1 else damping
        used_damping = damp
        omega, V, Gamma, q_hat, lam, O, ratio = half_step(X, y, S_hat, c, Gamma, omega, V, damp, alpha)
        q_hat, ratio = float(q_hat), float(ratio)
        if not (math.isfinite(q_hat) and q_hat > 0):
            diverged, status = True, f"diverged at iteration {it}: q_hat = {q_hat!r} is not a positive number"
            break
        delta = 1.0 / q_hat
        lam = np.asarray(lam)
        if not np.all(np.isfinite(lam)):
            diverged, status = True, f"diverged at iteration {it}: non-finite prior input R"
            break
        # RIE: the eigendecomposition of R is done in the jitted step, the Hilbert transform here
        xi = jnp.asarray(rmt.rie_eigenvalues(lam, delta, rho, outside=rie_outside))
        c = float(rmt.mmse_denoising(delta, rho))
        S_new, residual, err, finite = _prior_step(O, xi, S_hat, S_ref)
        residual = float(residual)
        err = float(err) if S_true is not None else float("nan")
        for k, v in zip(GampRieHistory._fields, (err, c, residual, q_hat, delta, ratio, used_damping)):
            hist[k].append(v)
        if not (bool(finite) and math.isfinite(residual) and math.isfinite(c)):
            diverged, status = True, f"diverged at iteration {it}: non-finite estimate"
            break
        prev = hist["residual"][-2] if len(hist["residual"]) > 1 else math.inf
        grow = grow + 1 if residual > prev else 0
        if adaptive_damping and damping < MAX_ADAPTIVE_DAMPING:
            # a period-2 oscillation: S_new is back near S_{t-2} while far from S_{t-1}
            oscillating = (S_prev is not None and residual > tol
                           and float(jnp.sum((S_new - S_prev) ** 2)) / d < 0.25 * residual)
            if grow >= 2 or oscillating:
                damping = min(MAX_ADAPTIVE_DAMPING, (1.0 + damping) / 2)
                grow = 0
        S_prev = S_hat
        S_hat = S_new
        last_finite = S_new
        if residual > 100.0 * (1.0 + rho) ** 2:
            diverged, status = True, (f"diverged at iteration {it}: residual {residual:.3g} exploded"
                                      + ("; the RIE continued off the support amplifies edge eigenvalues "
                                         f"by 2 Delta = {2 * delta:.3g}: try rie_outside='edge'"
                                         if rie_outside == "continuation" else ""))
            break
        if not ratio < max_ratio:
            diverged = True
            status = (f"diverged at iteration {it}: collapse, the output residuals are {ratio:.3g} times larger "
                      f"than the predicted variance V (E g^2 / -E g' = {ratio:.3g}); the predicted error "
                      f"eps = {c:.3g} is not to be trusted"
                      + ("; with rie_outside='edge' the collapsing instances of chapter 5 converge "
                         "(q_hat_from='derivative' is no cure)" if rie_outside == "continuation" else ""))
            break
        if grow >= patience and residual > 100 * tol:
            diverged, status = True, f"diverged at iteration {it}: residual grew {grow} iterations in a row"
            break
        if it >= min_iter and residual < tol:
            converged, status = True, "converged"
            break
        if residual < best_residual:
            best_residual, best_it = residual, it
        if stall_patience is not None and it >= min_iter and it - best_it >= stall_patience:
            status = _stall_status(hist["residual"][best_it - 1:], best_residual, best_it, tol, c)
            break
    history = GampRieHistory(**{k: np.asarray(v, dtype=float) for k, v in hist.items()})
    error = float(history.error[-1]) if len(history.error) else float("nan")
    return GampRieResult(
        S_hat=last_finite,
        mmse_pred=float(c),
        error=error,
        converged=converged,
        diverged=diverged,
        n_iter=it,
        status=status,
        history=history,
    )


def _stall_status(window, best_residual, best_it, tol, c):
    """The status of a run stopped by ``stall_patience``: ``stationary`` only when the residuals since
    the smallest one stay small against the predicted error ``c`` (a fixed point, up to finite-size
    fluctuations), else ``oscillating`` with the residual (the iterates jump: not a fixed point)."""
    typical = float(np.median(window))
    if typical <= 0.01 * c + 100 * tol:
        return (f"stationary: the residual stopped decreasing (smallest {best_residual:.2g} at iteration "
                f"{best_it}, tol {tol:g}; median {typical:.2g} since); the iterates fluctuate around a fixed point")
    return (f"oscillating: not converged, the residual stopped decreasing and stays large (median "
            f"{typical:.2g} over the last {len(window)} iterations, smallest {best_residual:.2g} at iteration "
            f"{best_it}, tol {tol:g}, against a predicted error {c:.2g}); the iterates keep jumping and are "
            f"not at a fixed point: more damping (damping=0.5 or adaptive_damping=True) may help")


def gamp_rie_state_evolution(
    alpha: float,
    rho: float,
    T: int = 2,
    channel: str = "softmax",
    beta: float = 1.0,
    noise: float = 0.0,
    *,
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
