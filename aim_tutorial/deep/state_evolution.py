"""Deep attention, the per-layer state evolution: a conjecture (eq. (eq-deep-se) of chapter 7).

Each layer is denoised by its own RIE with the noise ``1 / q_hat_ll`` of the two-layer channel
(:func:`aim_tutorial.deep.deep_q_hat`), the off-diagonal ``q_hat_12`` dropped; the fixed point is
solved for with common random numbers (:func:`deep_state_evolution_diagonal`).
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Sequence

import numpy as np

from .. import _checks
from .._status import Coded
from ._common import channel_settings as _channel_settings
from ._common import node_count as _node_count
from ._common import width_ratios as _rhos
from .channel import deep_q_hat
from .model import limit_overlap_matrix

__all__ = ["DeepSEResult", "DeepSEStatus", "deep_state_evolution_diagonal"]


class _OutOfCalls(Exception):
    """The root finder of :func:`deep_state_evolution_diagonal` reached ``max_iter`` evaluations."""


class DeepSEStatus(Coded):
    """Why the per-layer state evolution stopped at one ``alpha``: the codes of ``DeepSEResult.code``.

    Each member's message is the status string of :class:`DeepSEResult` (``status``).

    Example:
        >>> from aim_tutorial.deep import DeepSEStatus
        >>> DeepSEStatus.MAX_ITER.message, DeepSEStatus.MAX_ITER.converged, int(DeepSEStatus.FIXED_POINT)
        ('max_iter', False, 0)
    """

    FIXED_POINT = 0, "fixed point"
    PERFECT_RECOVERY = 1, "perfect recovery"
    MAX_ITER = 2, "max_iter"

    @property
    def converged(self) -> bool:
        """A fixed point was found or perfect recovery reached (``DeepSEResult.converged``)."""
        return self is not DeepSEStatus.MAX_ITER


class DeepSEResult(NamedTuple):
    """Result of :func:`deep_state_evolution_diagonal` (one entry per ``alpha``).

    Attributes:
        alpha: ``(A,)``.
        mmse: ``(A, 2)`` per-layer errors ``V_l = Q0_ll - q_ll`` at the fixed point.
        q_hat: ``(A, 2, 2)``, the full ``q_hat`` at the fixed point (its off-diagonal
            entry is what the diagonal closure neglects).
        converged: ``(A,)`` bool, a fixed point was found or perfect recovery reached.
        iterations: ``(A,)``, evaluations of the map (damped steps plus root-finder calls),
            at most ``max_iter``; one more evaluation at the returned ``V`` gives ``q_hat``
            and ``residual``.
        status: ``(A,)`` strings, why each stopped: ``"fixed point"`` (the root
            finder met ``tol``), ``"perfect recovery"`` (every ``V_l < V_stop``) or
            ``"max_iter"`` (neither, within ``max_iter`` evaluations).
        residual: ``(A,)``, ``max_l |log F_l(V) - log V_l|`` at the returned ``V``
            (``nan`` for perfect recovery).
        code: ``(A,)`` int, the :class:`DeepSEStatus` of each ``alpha`` (``DeepSEStatus(code[i])``;
            its message is ``status[i]``).
    """

    alpha: np.ndarray
    mmse: np.ndarray
    q_hat: np.ndarray
    converged: np.ndarray
    iterations: np.ndarray
    status: tuple = ()
    residual: np.ndarray | None = None
    code: np.ndarray | None = None


def deep_state_evolution_diagonal(key, alpha, rhos: Sequence[float], T: int = 2, beta: float = 1.0,
                                  c: float = 1.0, n_omega: int = 1000, n_inner: int = 2048,
                                  damping: float = 0.5, tol: float = 1e-6, max_iter: int = 200,
                                  V_floor: float = 1e-4, V_stop: float = 1e-3, warm_tol: float = 3e-2,
                                  V_start=None, n_nodes: Optional[int] = None) -> DeepSEResult:
    """Per-layer-RIE state evolution of two-layer deep attention: a **conjecture**, eq. (eq-deep-se).

    The fixed point, reached from ``V = (1, 1)`` (``alpha = 0``), of the map

        q = [[Q0_11 - V_1, sqrt(rho_1 rho_2)], [sqrt(rho_1 rho_2), Q0_22 - V_2]],
        q_hat = deep_q_hat(alpha, q, V),
        F_l(V) = mmse_{rho_l}(1 / q_hat_ll),

    i.e. each layer is denoised by its own RIE with the noise ``1/q_hat_ll`` and the
    off-diagonal ``q_hat_12`` is dropped. This is exact when the output channel
    gives ``q_hat_12 = 0`` (e.g. when every layer's attention map is observed,
    eq. (eq-deep-decouple)); for deep attention ``q_hat_12 != 0`` and the prior term
    couples the layers through a spherical integral that the book does not solve.
    With common random numbers (the same ``key`` at every call) ``F`` is a smooth
    deterministic function of ``V``, so the fixed point is solved for, in two stages:
    damped steps ``V <- (1 - damping) F(V) + damping V`` until the relative change
    is below ``warm_tol``, then Powell's hybrid method (``scipy.optimize.root``) on
    ``log F(V) = log V``. Near the perfect-recovery threshold the damped map's
    contraction factor tends to one, so the damped steps alone would need hundreds
    of calls; if the root finder fails, or lands below ``V_stop``, the damped steps
    go on until every ``V_l < V_stop`` (perfect recovery) or ``max_iter``.

    Args:
        key: ``jax.random`` key for :func:`deep_q_hat`.
        alpha: scalar or 1-d array, ``>= 0``.
        rhos: ``(rho_1, rho_2)``.
        T, beta, c, n_omega, n_inner: as :func:`deep_q_hat`. The self-normalised
            estimate of ``q_hat_11`` is biased upwards at small ``V`` unless
            ``n_inner`` is large (chapter 7 measures it): hence the default 2048.
        damping: fraction of the old ``V`` kept in the damped steps, in ``[0, 1)``.
        tol: relative tolerance of the root finder on ``V`` (``xtol``), ``> 0``.
        max_iter: most evaluations of ``F`` in the iteration for one ``alpha``, ``>= 1``
            (the root finder is stopped there too).
        V_floor: smallest ``V`` used in the channel (the Monte Carlo is unreliable below).
        V_stop: once every ``V_l < V_stop`` the iteration is taken to go to perfect
            recovery and stops.
        warm_tol: relative change at which the damped steps hand over to the root finder.
        V_start: optional ``(V_1, V_2)`` start instead of ``(1, 1)`` (continuation along
            increasing ``alpha``: the map is monotone, so from above any fixed point the
            damped steps stay above the largest one).
        n_nodes: as :func:`deep_q_hat`: ``None`` for the inner Monte Carlo, an integer for the
            Gauss-Hermite rule (then ``n_inner`` is not used).

    Returns:
        :class:`DeepSEResult`; ``status`` says why each ``alpha`` stopped.

    Chapter 7.
    """
    key = _checks.prng_key("key", key)
    rhos = _rhos(rhos)
    if len(rhos) != 2:
        raise ValueError(f"rhos must hold two width ratios (L = 2), got {rhos!r}")
    T, beta, c, n_omega, n_inner = _channel_settings(T, beta, c, n_omega, n_inner)
    n_nodes = _node_count(T, n_nodes)
    damping, tol, max_iter, V_floor, V_stop, warm_tol = _iteration_settings(damping, tol, max_iter, V_floor, V_stop,
                                                                            warm_tol)
    a = _alphas(alpha)
    start = _start(V_start)
    Q0 = limit_overlap_matrix(rhos)
    channel = dict(T=T, beta=beta, c=c, n_omega=n_omega, n_inner=n_inner, n_nodes=n_nodes)
    out_V = np.ones((a.size, 2))
    out_qh = np.zeros((a.size, 2, 2))
    conv = np.zeros(a.size, dtype=bool)
    its = np.zeros(a.size, dtype=int)
    status = ["fixed point"] * a.size
    resid = np.full(a.size, np.nan)
    for idx, al in enumerate(a):
        if al == 0:
            conv[idx], resid[idx] = True, 0.0
            continue
        calls = [0]
        F = _layer_map(key, al, Q0, rhos, V_floor, calls, channel)
        V, state = _fixed_point(F, start.copy(), calls, damping=damping, tol=tol, max_iter=max_iter,
                                V_floor=V_floor, V_stop=V_stop, warm_tol=warm_tol)
        its[idx] = calls[0]  # (at most max_iter; the evaluation below reports q_hat and the residual)
        Fv, qh = F(V)
        if state != "perfect recovery":
            resid[idx] = float(np.max(np.abs(np.log(Fv) - np.log(V))))
        out_V[idx], out_qh[idx] = V, qh
        status[idx], conv[idx] = state, state != "max_iter"
    by_message = {m.message: m for m in DeepSEStatus}
    code = np.array([by_message[st] for st in status], dtype=int)
    return DeepSEResult(a, out_V, out_qh, conv, its, tuple(status), resid, code)


def _iteration_settings(damping, tol, max_iter, V_floor, V_stop, warm_tol):
    """The settings of the iteration of :func:`deep_state_evolution_diagonal`, checked."""
    damping = _checks.nonnegative("damping", damping)
    if damping >= 1:
        raise ValueError(f"damping must be in [0, 1), got {damping!r}")
    max_iter = _checks.integer_at_least("max_iter", max_iter, 1)
    tol = _checks.positive("tol", tol)
    warm_tol = _checks.positive("warm_tol", warm_tol)
    V_floor = _checks.positive("V_floor", V_floor)
    V_stop = _checks.positive("V_stop", V_stop)
    if V_floor >= 1:
        raise ValueError(f"V_floor must be in (0, 1) (the error at alpha = 0 is 1), got {V_floor!r}")
    return damping, tol, max_iter, V_floor, V_stop, warm_tol


def _alphas(alpha):
    """``alpha``, a scalar or a 1-d array in ``[0, inf)``, as a 1-d float array."""
    if isinstance(alpha, (bool, np.bool_)):
        raise _checks.ArgumentTypeError(f"alpha must be a scalar or 1-d array in [0, inf), got {alpha!r}")
    _checks.real_array("alpha", alpha, ndim=(0, 1))
    a = np.atleast_1d(np.asarray(alpha, dtype=float))
    if a.ndim != 1 or np.any(a < 0) or not np.all(np.isfinite(a)):
        raise ValueError("alpha must be a scalar or 1-d array in [0, inf)")
    return a


def _start(V_start):
    """The start ``(V_1, V_2)``: ``(1, 1)`` (``alpha = 0``) or ``V_start``, two errors in ``(0, 1]``."""
    if V_start is not None:
        _checks.real_array("V_start", V_start, ndim=1)
    start = np.ones(2) if V_start is None else np.asarray(V_start, dtype=float)
    if start.shape != (2,) or np.any(~(start > 0)) or np.any(start > 1):
        raise ValueError(f"V_start must be two errors (V_1, V_2) in (0, 1] (the error at alpha = 0 is 1; "
                         f"above it q is not an overlap matrix), got {V_start!r}")
    return start


def _layer_map(key, al, Q0, rhos, V_floor, calls, channel):
    """The map ``V -> (F(V), q_hat)`` at ``alpha = al``, counting its evaluations in ``calls[0]``.

    ``F_l(V) = mmse_{rho_l}(1 / q_hat_ll)`` with ``q_hat = deep_q_hat(key, al, Q0 - diag(V), V, **channel)``:
    the same ``key`` at every call (common random numbers), so ``F`` is a deterministic function of ``V``.
    """
    from ..rmt import mmse_denoising

    def F(V):
        calls[0] += 1
        # (above V_l = 1, q = Q0 - diag(V) is no overlap matrix: its determinant turns negative;
        # the root finder, stepping in log V, may probe there, and F is flat at its value at 1)
        Vc = np.clip(V, V_floor, 1.0)
        qh = deep_q_hat(key, al, Q0 - np.diag(Vc), tuple(Vc), **channel).q_hat
        return np.array([mmse_denoising(1.0 / max(qh[l, l], 1e-12), rhos[l]) for l in range(2)]), qh

    return F


def _fixed_point(F, V, calls, *, damping, tol, max_iter, V_floor, V_stop, warm_tol):
    """``(V, status)`` from the start ``V``: damped steps, Powell's hybrid method, damped steps again.

    The two stages of :func:`deep_state_evolution_diagonal`; the budget of ``max_iter`` evaluations
    of ``F`` is counted in ``calls[0]``, the root finder's probes included.
    """
    from scipy.optimize import root

    def damped(V, until):
        while calls[0] < max_iter:
            new = (1 - damping) * F(V)[0] + damping * V
            change = np.max(np.abs(new - V) / np.maximum(V, V_floor))
            V = new
            if np.all(V < V_stop) or change < until:
                break
        return V

    V = damped(V, warm_tol)
    state = "max_iter"
    if np.all(V < V_stop):
        state = "perfect recovery"
    elif calls[0] < max_iter:
        def G(u):
            if calls[0] >= max_iter:  # (hybr's maxfev does not count its probes: the budget is ours)
                raise _OutOfCalls
            return np.log(np.maximum(F(np.exp(u))[0], 1e-300)) - u

        try:
            sol = root(G, np.log(V), method="hybr",
                       options=dict(xtol=tol, maxfev=max(max_iter - calls[0], 1)))
            Vr, found = np.exp(sol.x), sol.success
        except _OutOfCalls:
            Vr, found = V, False
        if found and np.all(Vr >= V_stop):
            V, state = Vr, "fixed point"
        else:  # no root above V_stop: the damped steps decide
            V = damped(V, 0.0)
            if np.all(V < V_stop):
                state = "perfect recovery"
    return V, state
