"""Two-layer GAMP-RIE: one RIE denoiser a layer and the joint output channel of chapter 7.

Deep attention is a generalised linear model with one matrix a layer: the indices of layer ``l``
are ``h^l_mu = Tr(Z^mu S_l)`` with the same sensing matrices ``Z^mu`` for every layer (chapter 5's
eq. (amp-sensing)), and the output depends on the two layers' indices jointly. GAMP-RIE for it
keeps, for each layer, what one-layer GAMP-RIE keeps (an estimate ``S_hat_l``, its predicted error
``c_l``, the means ``omega^l`` and the scores ``Gamma^l``) and replaces the one-layer output
channel by the two-layer one of eq. (eq-deep-Zout):

1. ``V_l = c_l``; ``omega^l_mu = X_mu S_hat_l X_mu^T / sqrt(d) - (Tr S_hat_l / sqrt(d)) I - 2 c_l Gamma^l_mu``
   (each layer its own Onsager term: the denoisers act layer by layer, so the derivative of
   ``S_hat_l`` with respect to the other layer's input is zero), then damping;
2. ``(Gamma^1_mu, Gamma^2_mu) = grad_(omega^1, omega^2) log Z_out(y_mu | omega^1_mu, omega^2_mu, V_1, V_2)``,
   the score of the partition function that the state evolution of chapter 7 averages
   (:func:`aim_tutorial.deep.deep_q_hat` with ``n_nodes``: the midpoint rule over the first layer);
3. ``q_hat_lm = (4 alpha / n) sum_mu <Gamma^l_mu, Gamma^m_mu>`` (the ``2 x 2`` matrix of eq. (eq-deep-qhat));
4. ``R_l = S_hat_l + (2 / (q_hat_ll d^{3/2})) sum_mu (X_mu^T Gamma^l_mu X_mu - Tr(Gamma^l_mu) I)``;
5. ``S_hat_l <- RIE_{rho_l, 1/q_hat_ll}(R_l)``, ``c_l <- mmse_{rho_l}(1 / q_hat_ll)``.

Steps 4 and 5 keep only the diagonal of ``q_hat``: each layer is denoised as if its input were
``S_l`` plus Gaussian noise of variance ``1 / q_hat_ll``, the assumption of the per-layer state
evolution (:func:`aim_tutorial.deep.deep_state_evolution_diagonal`, a conjecture), whose map this
iteration follows. The off-diagonal ``q_hat_12`` is computed and reported at every iteration.
With one layer and a one-layer channel the same loop is one-layer GAMP-RIE
(:func:`aim_tutorial.gamp_rie`), iterate for iterate; the tests check it.

The iteration's bookkeeping and its stopping rules are those of the GAMP-RIE kernel
(:mod:`aim_tutorial.amp_kernel`: :func:`~aim_tutorial.amp_kernel.advance`,
:func:`~aim_tutorial.amp_kernel.stop_code`, :class:`~aim_tutorial.amp_kernel.Status`), applied to
the layers' sums: the residual ``sum_l ||S_hat_l,new - S_hat_l||_F^2 / d``, the predicted error
``sum_l c_l``, the smallest ``q_hat_ll`` and the largest Nishimori ratio. That ratio,
``E g^2 / -E g'`` a layer, needs the score's derivative, computed by autodiff on the first
``check_samples`` samples only (the second derivatives of the quadrature cost six gradients a sample).
On so few samples the estimate of ``-E g'`` is noisy (for layer 1 it even changes sign), so a ratio
at or above ``options.max_ratio`` is computed again on all ``n`` samples before the collapse rule
reads it: a run stops as a collapse only when every sample says so.

Taught in chapter 7 (``book/07_deep_attention.md``). ``T = 2`` (the deterministic rule of the
channel is written for two tokens).
"""

from __future__ import annotations

import math
from functools import partial
from typing import Callable, NamedTuple, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .. import _checks
from ..config import algorithm_dtype, algorithm_products, gamp_jit
from ._common import quad_batch_size as _quad_batch_size
from ._common import width_ratios as _rhos
from .channel import _log_zout_grid

__all__ = ["DeepGampHistory", "DeepGampResult", "deep_gamp_rie"]

_C_UPPER = np.array([2.0, 1.0, 2.0])  # the variances of (h_11, h_12, h_22) in units of V (T = 2)


class DeepGampHistory(NamedTuple):
    """One row an iteration that reached the denoisers.

    Attributes:
        error: ``(n_iter, L)``, ``||S_hat_l - S_l||_F^2 / d`` after the iteration (``nan`` without a teacher).
        mmse_pred: ``(n_iter, L)``, the predicted errors ``c_l = mmse_{rho_l}(1 / q_hat_ll)``.
        residual: ``(n_iter,)``, ``sum_l ||S_hat_l,new - S_hat_l,old||_F^2 / d``.
        q_hat: ``(n_iter, L, L)``, the conjugate overlaps (the off-diagonal is reported, not used).
        nishimori_ratio: ``(n_iter, L)``, ``E g_l^T C g_l / (-E sum_k C_k dg_lk / domega_lk)`` on the
            first ``check_samples`` samples (1 on the Nishimori line).
        damping: ``(n_iter,)``, the damping of the iteration.
    """

    error: np.ndarray
    mmse_pred: np.ndarray
    residual: np.ndarray
    q_hat: np.ndarray
    nishimori_ratio: np.ndarray
    damping: np.ndarray


class DeepGampResult(NamedTuple):
    """Result of :func:`deep_gamp_rie`.

    Attributes:
        S_hat: tuple of the ``L`` estimates ``(d, d)``.
        error: ``(L,)``, the last iteration's errors ``||S_hat_l - S_l||_F^2 / d`` (``nan`` without a teacher).
        mmse_pred: ``(L,)``, the last predicted errors ``c_l``.
        converged: the summed residual fell below ``tol``.
        diverged: a divergence rule fired (``code.diverged``).
        n_iter: iterations run.
        status: why the run stopped, a sentence (as ``GampRieResult.status`` of :func:`aim_tutorial.gamp_rie`).
        code: the :class:`aim_tutorial.amp_kernel.Status` of the stop.
        history: :class:`DeepGampHistory`.
    """

    S_hat: tuple
    error: np.ndarray
    mmse_pred: np.ndarray
    converged: bool
    diverged: bool
    n_iter: int
    status: str
    code: object
    history: DeepGampHistory


class _State(NamedTuple):
    """The iterate: per-layer lists and the kernel's bookkeeping (the fields :func:`amp_kernel.advance` reads)."""

    S_hat: tuple
    c: np.ndarray
    Gamma: jax.Array  # (L, n, T, T)
    omega: jax.Array  # (L, n, T, T)
    V: np.ndarray
    damping: float
    S_prev: tuple
    residual: float = math.inf
    grow: int = 0
    best_residual: float = math.inf
    best_it: int = 0
    it: int = 0


# --------------------------------------------------------------------------- the output half


def _omega(forms, trace_S, sqd, c, Gamma_old, omega_old, V_old, damping):
    T = forms.shape[-1]
    eye = jnp.eye(T, dtype=forms.dtype)
    new = forms / sqd - (trace_S / sqd)[:, None, None, None] * eye - 2.0 * c[:, None, None, None] * Gamma_old
    return damping * omega_old + (1.0 - damping) * new, damping * V_old + (1.0 - damping) * c


@partial(gamp_jit, static_argnames=("n_nodes", "sub", "m"))
@algorithm_products
def _deep_output_half(forms, trace_S, sqd, c, Gamma_old, omega_old, V_old, damping, alpha, D, beta, skip, *,
                      n_nodes, sub, m):
    """The output half for the two-layer channel (``T = 2``): ``omega``, ``V``, ``Gamma`` ``(2, n, 2, 2)``,
    ``q_hat`` ``(2, 2)`` and the Nishimori ratio a layer on the first ``m`` samples."""
    omega, V = _omega(forms, trace_S, sqd, c, Gamma_old, omega_old, V_old, damping)
    u = jnp.stack([omega[:, :, 0, 0], omega[:, :, 0, 1], omega[:, :, 1, 1]], axis=-1)  # (2, n, 3)

    def log_z(z, Dm):
        return _log_zout_grid(Dm, z[:3], z[3:], V[0], V[1], beta, skip, n_nodes)

    z = jnp.concatenate([u[0], u[1]], axis=-1)  # (n, 6)
    g = jax.lax.map(lambda a: jax.grad(log_z)(*a), (z, D), batch_size=sub)  # (n, 6)
    g = g.reshape(-1, 2, 3).transpose(1, 0, 2)  # (2, n, 3): layer, sample, (11, 12, 22)
    Cu = jnp.asarray(_C_UPPER, g.dtype)
    q_hat = 2.0 * alpha * jnp.einsum("lnk,k,mnk->lm", g, Cu, g) / g.shape[1]
    # -E[sum_k C_k dg_lk/domega_lk] on the first m samples: the Hessian's diagonal, six derivatives a sample
    H = jax.lax.map(lambda a: jnp.diagonal(jax.hessian(log_z)(*a)), (z[:m], D[:m]), batch_size=max(1, sub // 6))
    curv = -jnp.mean(H.reshape(m, 2, 3) * Cu, axis=0).sum(axis=-1)  # (2,)
    square = jnp.einsum("lnk,k,lnk->l", g[:, :m], Cu, g[:, :m]) / m
    Gamma = jnp.stack([jnp.stack([g[..., 0], g[..., 1] / 2], -1), jnp.stack([g[..., 1] / 2, g[..., 2]], -1)], -2)
    return omega, V, Gamma, q_hat, square / curv


def _confirmed_half(half_some, half_all, fewer: bool, max_ratio: float):
    """The output half whose Nishimori ratio is ``half_some``'s (on the first samples) unless that
    reaches ``max_ratio``: then the same iteration's ratio on all samples (``half_all``; the means,
    scores and ``q_hat`` do not depend on the samples the ratio uses). ``fewer``: whether
    ``half_some`` uses fewer samples than there are."""

    def half(*args):
        out = half_some(*args)
        if fewer and not bool(jnp.max(out[4]) < max_ratio):
            out = half_all(*args)
        return out

    return half


def _one_layer_half(channel, beta, score="exact"):
    """The output half of a one-layer channel in the same form (``L = 1``): the reduction that the tests use."""
    from .. import channels

    ch = channels.get(channel)

    @gamp_jit
    @algorithm_products
    def half(forms, trace_S, sqd, c, Gamma_old, omega_old, V_old, damping, alpha, y):
        omega, V = _omega(forms, trace_S, sqd, c, Gamma_old, omega_old, V_old, damping)
        G = ch.score(y, omega[0], V[0], beta, score).astype(omega.dtype)
        Gamma = ((G + jnp.swapaxes(G, -1, -2)) / 2)[None]
        q_hat = 4.0 * alpha * jnp.mean(jnp.sum(Gamma**2, axis=(-2, -1)))
        return omega, V, Gamma, q_hat.reshape(1, 1), jnp.ones(1, omega.dtype)

    return half


@gamp_jit
@algorithm_products
def _prior_inputs(X, S_hats, Gamma, q_diag):
    """``R_l = S_hat_l + prior_input(X, 2 Gamma^l / (q_hat_ll d^{3/2}))`` and its eigendecomposition, a layer."""
    from ..amp import _prior_input

    d = X.shape[-1]
    R = jnp.stack([S_hats[ell] + _prior_input(X, (2.0 / (q_diag[ell] * d**1.5)) * Gamma[ell])
                   for ell in range(Gamma.shape[0])])
    lam, O = jnp.linalg.eigh(R)
    return lam, O


def _forms(X, S_hats):
    from ..amp import _quadratic_forms

    return jnp.stack([_quadratic_forms(X, S) for S in S_hats])


# --------------------------------------------------------------------------- the loop


def _run(X, rhos, half: Callable, S_start, S_ref, has_truth, options, alpha):
    """GAMP-RIE with ``L = len(rhos)`` layers: the layers' output half ``half(forms, trace_S, sqd, c,
    Gamma_old, omega_old, V_old, damping, alpha) -> (omega, V, Gamma, q_hat, ratio)``, a per-layer RIE,
    and the kernel's bookkeeping and stopping rules on the layers' sums."""
    from .. import amp, amp_kernel, rmt

    L = len(rhos)
    n, T, d = X.shape
    dtype = X.dtype
    sqd = jnp.asarray(math.sqrt(d), dtype)
    zeros = jax.device_put(np.zeros((L, n, T, T), dtype))
    c0 = np.full(L, options.c_init)
    state = _State(S_hat=tuple(S_start), c=c0, Gamma=zeros, omega=zeros, V=c0.copy(), damping=options.damping,
                   S_prev=tuple(S_start))
    policy = amp.GampRieStopPolicy(max_residual=100.0 * sum((1.0 + r) ** 2 for r in rhos), tol=options.tol,
                                   min_iter=options.min_iter, max_iter=options.max_iter, patience=options.patience,
                                   max_ratio=options.max_ratio, stall_patience=options.stall_patience,
                                   rie_outside=options.rie_outside)
    rows, residuals = [], []
    code, record = amp_kernel.Status.RUNNING, amp.GampRieRecord(it=0)
    while code is amp_kernel.Status.RUNNING:
        it = state.it + 1
        damp = 0.0 if state.it == 0 else state.damping
        forms = _forms(X, state.S_hat)
        trace_S = jnp.stack([jnp.trace(S) for S in state.S_hat])
        omega, V, Gamma, q_hat, ratio = half(forms, trace_S, sqd, jnp.asarray(state.c, dtype), state.Gamma,
                                             state.omega, jnp.asarray(state.V, dtype), damp, alpha)
        q_hat, ratio = np.asarray(q_hat, float), np.asarray(ratio, float)
        q_diag = np.diag(q_hat)
        state = state._replace(omega=omega, V=np.asarray(V, float), Gamma=Gamma, it=it)
        q_min = float(np.min(q_diag))
        if not (np.all(np.isfinite(q_diag)) and q_min > 0):
            record = amp.GampRieRecord(it=it, q_hat=q_min, denoised=False)
            code = amp_kernel.stop_code(policy, record, residuals)
            break
        lam, O = _prior_inputs(X, jnp.stack(state.S_hat), Gamma, jnp.asarray(q_diag, dtype))
        lam = np.asarray(lam, float)
        if not np.all(np.isfinite(lam)):
            record = amp.GampRieRecord(it=it, q_hat=q_min, prior_input_finite=False, denoised=False)
            code = amp_kernel.stop_code(policy, record, residuals)
            break
        S_new, errs, res, cs, finite = [], [], [], [], True
        for ell in range(L):
            delta = 1.0 / q_diag[ell]
            xi = jnp.asarray(rmt.rie_eigenvalues(lam[ell], delta, rhos[ell], outside=options.rie_outside), dtype)
            S_l, r_l, e_l, f_l = amp._prior_step(O[ell], xi, state.S_hat[ell], S_ref[ell])
            S_new.append(S_l)
            res.append(float(r_l))
            errs.append(float(e_l) if has_truth else math.nan)
            cs.append(float(rmt.mmse_denoising(delta, rhos[ell])))
            finite = finite and bool(f_l)
        residual = float(sum(res))
        row = dict(it=it, error=float(sum(errs)), mmse_pred=float(sum(cs)), residual=residual, q_hat=q_min,
                   delta=float(1.0 / q_min), nishimori_ratio=float(np.max(ratio)), damping=damp)
        if not (finite and math.isfinite(residual) and all(math.isfinite(x) for x in cs)):
            record = amp.GampRieRecord(**row, estimate_finite=False)
            code = amp_kernel.stop_code(policy, record, residuals)
            break

        def moved(S_new=S_new, state=state):
            return sum(float(jnp.sum((a - b) ** 2)) for a, b in zip(S_new, state.S_prev)) / d

        grow, damping, best_residual, best_it = amp_kernel.advance(options, state, it, residual, moved)
        state = state._replace(S_hat=tuple(S_new), c=np.array(cs), damping=damping, S_prev=state.S_hat,
                               residual=residual, grow=grow, best_residual=best_residual, best_it=best_it)
        record = amp.GampRieRecord(**row, grow=grow, best_residual=best_residual, best_it=best_it)
        residuals.append(residual)
        rows.append((errs, cs, residual, q_hat, ratio, damp))
        code = amp_kernel.stop_code(policy, record, residuals)
    status = code.sentence(policy, record, residuals)
    history = DeepGampHistory(
        error=np.array([r[0] for r in rows]).reshape(-1, L), mmse_pred=np.array([r[1] for r in rows]).reshape(-1, L),
        residual=np.array([r[2] for r in rows]), q_hat=np.array([r[3] for r in rows]).reshape(-1, L, L),
        nishimori_ratio=np.array([r[4] for r in rows]).reshape(-1, L), damping=np.array([r[5] for r in rows]))
    last_err = history.error[-1] if len(rows) else np.full(L, np.nan)
    return DeepGampResult(S_hat=state.S_hat, error=np.asarray(last_err), mmse_pred=np.asarray(state.c, float),
                          converged=code is amp_kernel.Status.CONVERGED, diverged=code.diverged, n_iter=state.it,
                          status=status, code=code, history=history)


def _start(options, key, d, rhos, dtype):
    from ..model import sample_teacher

    if options.init == "prior":
        if key is None:
            raise ValueError("key must be a jax.random key for init='prior' (or use init='mean')")
        keys = jax.random.split(key, len(rhos))
        return [sample_teacher(k, d, r).astype(dtype) for k, r in zip(keys, rhos)]
    return [jnp.sqrt(r) * jnp.eye(d, dtype=dtype) for r in rhos]


def _outputs_to_differences(logy, beta):
    """``D_mu = (A_11 - A_22, A_12 - A_22)`` from the log-outputs ``log y = beta A`` up to a row constant (``T = 2``)."""
    top = (logy[:, 0, 0] - logy[:, 0, 1]) / beta  # A_11 - A_12
    bottom = (logy[:, 1, 0] - logy[:, 1, 1]) / beta  # A_21 - A_22 = A_12 - A_22 (A is symmetric)
    return np.stack([top + bottom, bottom], axis=-1)


def deep_gamp_rie(X, y, rhos: Sequence[float], *, beta: float = 1.0, c: float = 1.0, S_true=None,
                  key: Optional[jax.Array] = None, options=None, n_nodes: int = 64, check_samples: int = 256,
                  log_outputs: bool = False, dtype=None) -> DeepGampResult:
    """Two-layer GAMP-RIE for deep attention (``L = 2``, ``T = 2``): one RIE a layer, the joint channel.

    The iteration of the module's docstring: the layers' means ``omega^l`` with their own Onsager
    terms, the joint score of ``log Z_out`` (eq. (eq-deep-Zout), the midpoint rule of
    :func:`aim_tutorial.deep.deep_q_hat` with ``n_nodes x n_nodes`` cells over the first layer), and
    each layer denoised by its RIE with the noise ``1 / q_hat_ll``: the algorithm whose state
    evolution is the per-layer map of :func:`aim_tutorial.deep.deep_state_evolution_diagonal`.

    Args:
        X: tokens ``(n, 2, d)``.
        y: noiseless two-layer outputs ``(n, 2, 2)`` (:func:`aim_tutorial.deep.deep_output`), every entry in
            ``(0, 1)``; or, with ``log_outputs=True``, their logs (``aim.sample_deep_data(...,
            log_outputs=True)``): at ``beta = 1`` and ``d = 60`` some outputs are already 1 in float64,
            their log-ratio lost, which the logs keep.
        rhos: the two width ratios ``(rho_1, rho_2)``, each ``> 0``.
        beta: inverse temperature ``> 0``; c: skip strength ``>= 1`` (then ``B = c I + softmax`` is
            invertible, which the channel's stable form uses).
        S_true: optional pair of teachers ``(d, d)``, for the error (it does not enter the iteration).
        key: ``jax.random`` key, needed for ``options.init = "prior"``.
        options: :class:`aim_tutorial.amp.GampRieOptions` (``None``: ``GampRieOptions(init="mean")``,
            the posterior mean at ``alpha = 0``, ``c = V = 1``: the state evolution's start).
        n_nodes: cells a direction of the quadrature of ``Z_out``, an integer ``>= 8``. Chapter 7
            measures the rule's error: 128 and 256 agree at the errors a run reaches near the
            transition; 64 is off by more than the outer standard error at ``V = (0.036, 0.0036)``.
        check_samples: samples on which the Nishimori ratio is computed, ``>= 1`` (at most ``n``); a
            ratio at or above ``options.max_ratio`` there is computed again on all ``n`` samples.
        log_outputs: ``y`` holds log-probabilities.
        dtype: the algorithm's float type (:func:`aim_tutorial.config.algorithm_dtype`).

    Returns:
        :class:`DeepGampResult`; ``status`` says why it stopped.

    Raises:
        ValueError: shapes that do not match, ``T != 2`` or two layers not given, outputs not in
            ``(0, 1)`` (the log-ratios of saturated outputs are lost in floating point: use log-outputs), or a setting
            out of range (each message names it).

    Example:
        >>> import jax, aim_tutorial as aim
        >>> from aim_tutorial.amp import GampRieOptions
        >>> Ss, X, y, n, _ = aim.make_instance(jax.random.key(0), 20, [0.5, 0.5], 0.25, 2, channel="deep")
        >>> r = aim.deep.deep_gamp_rie(X, y, [0.5, 0.5], S_true=Ss, n_nodes=16,
        ...                            options=GampRieOptions(init="mean", max_iter=3))
        >>> r.status, r.n_iter, r.error.shape, r.history.q_hat.shape
        ('max_iter', 3, (2,), (3, 2, 2))
    """
    from ..amp import GampRieOptions

    rhos = _rhos(rhos)
    if len(rhos) != 2:
        raise ValueError(f"rhos must hold two width ratios (L = 2), got {rhos!r}")
    beta = _checks.positive("beta", beta)
    c = _checks.finite("c", c)
    if c < 1:
        raise ValueError(f"c must be >= 1 (B = c I + softmax invertible for every index), got {c!r}")
    n_nodes = _checks.integer_at_least("n_nodes", n_nodes, 8)
    check_samples = _checks.integer_at_least("check_samples", check_samples, 1)
    options = GampRieOptions(init="mean") if options is None else options
    if not isinstance(options, GampRieOptions):
        raise _checks.ArgumentTypeError(f"options must be a GampRieOptions, got {type(options).__name__}")
    options = options.validated()
    _checks.real_array("X", X, ndim=3)
    n, T, d = np.shape(X)
    if T != 2:
        raise ValueError(f"X must hold T = 2 tokens a sample (the channel's quadrature is written for T = 2), "
                         f"got T = {T}")
    _checks.real_array("y", y, ndim=3)
    if np.shape(y) != (n, T, T):
        raise ValueError(f"y must have shape (n, T, T) = {(n, T, T)}, got shape {np.shape(y)}")
    log_outputs = _checks.boolean("log_outputs", log_outputs)
    y64 = np.asarray(y, dtype=float)
    if log_outputs:
        if not (np.all(np.isfinite(y64)) and np.all(y64 <= 0)):
            raise ValueError("y must hold log-probabilities (finite, <= 0) with log_outputs=True")
        logy = y64
    else:
        if not (np.all(y64 > 0) and np.all(y64 < 1)):
            raise ValueError("y must be softmax outputs with every entry in (0, 1): a saturated output (0 or 1 in "
                             "floating point) has lost its log-ratio; sample log-outputs (aim.sample_deep_data(..., "
                             "log_outputs=True)) and pass log_outputs=True")
        logy = np.log(y64)
    dtype = algorithm_dtype(dtype)
    S_ref = [jax.device_put(np.zeros((d, d), dtype))] * 2
    if S_true is not None:
        if len(S_true) != 2:
            raise ValueError(f"S_true must hold two teachers (d, d), got {len(S_true)}")
        S_ref = []
        for ell, S in enumerate(S_true):
            _checks.square_symmetric(f"S_true[{ell}]", S)
            if np.shape(S) != (d, d):
                raise ValueError(f"S_true[{ell}] must have shape (d, d) = {(d, d)}, got {np.shape(S)}")
            S_ref.append(jnp.asarray(S, dtype=dtype))
    if key is not None:
        key = _checks.prng_key("key", key)
    S_start = _start(options, key, d, rhos, dtype)
    D = jnp.asarray(_outputs_to_differences(logy, beta), dtype)
    sub = _quad_batch_size(2, n_nodes)
    m = min(check_samples, n)
    settings = dict(D=D, beta=beta, skip=c, n_nodes=n_nodes, sub=min(sub, n))
    half = _confirmed_half(partial(_deep_output_half, **settings, m=m),
                           partial(_deep_output_half, **settings, m=n), m < n, options.max_ratio)
    return _run(jnp.asarray(X, dtype), rhos, half, S_start, S_ref, S_true is not None, options, n / d**2)
