"""The named tuples of GAMP-RIE: its results, settings, state and records (private to :mod:`aim_tutorial.amp`).

Split out of ``amp.py`` (issue 49). Their public address is :mod:`aim_tutorial.amp`: ``amp`` imports
them and sets their ``__module__`` to ``aim_tutorial.amp`` (reprs, pickles and the API page are
unchanged). The references below (:func:`gamp_rie`, ...) are to ``aim_tutorial.amp``.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Optional

import jax
import numpy as np

from . import _checks


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
        S_hat: the final estimate, shape ``(d, d)``, in the dtype of the iteration (the last finite iterate if the run diverged).
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
        consistent: the run passed its self-checks (:func:`gamp_rie_self_check`, no truth needed): the
            output channel's Nishimori identity at the last iteration, and the tokens' second moment
            against the model's. ``False``: ``mmse_pred`` is not to be trusted, even when ``converged``.
        consistency: what the self-checks found, a sentence.
        code: the :class:`aim_tutorial.amp_kernel.Status` the run stopped with (an ``IntEnum``: the
            rule that fired; ``status`` is its sentence).
    """

    S_hat: jax.Array
    mmse_pred: float
    error: float
    converged: bool
    diverged: bool
    n_iter: int
    status: str
    history: GampRieHistory
    consistent: bool = True
    consistency: str = ""
    code: Optional[int] = None


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



class GampRieOptions(NamedTuple):
    """The iteration settings of :func:`gamp_rie` (its keyword arguments of the same names).

    :meth:`validated` checks every field; :func:`gamp_rie` and :func:`gamp_rie_start` call it.

    Attributes:
        init: ``"prior"`` (a fresh sample of the prior, as in the paper; needs a ``key``) or
            ``"mean"`` (``S_hat = sqrt(rho) I``, the posterior mean at ``alpha = 0``).
        c_init: the initial predicted error ``c = V``, ``> 0``; ``None``: ``2 (1 + rho) - 2 rho = 2``
            for ``init="prior"`` (the expected error of an independent prior sample), ``1`` for
            ``init="mean"``.
        damping: fraction of the old ``omega`` and ``V`` kept each iteration, in ``[0, 1)``; the
            first iteration is never damped.
        max_iter: maximal number of iterations, ``>= 1``.
        tol: stopping threshold on the residual ``||S_hat_new - S_hat||_F^2 / d``, ``> 0``.
        min_iter: iterations run before the ``tol`` and ``stall_patience`` rules apply, ``>= 1``.
        patience: the run is declared divergent when the residual has grown this many iterations
            in a row (and exceeds ``100 tol``), ``>= 2``.
        q_hat_from: ``"square"`` (eq. (amp-gout): ``q_hat = 4 alpha mean ||Gamma||_F^2``, which
            uses the Nishimori identity) or ``"derivative"`` (``-2 alpha E[2 sum g'_aa + sum
            g'_ab]`` by forward-mode autodiff of the score: the textbook GAMP variance; for the
            softmax it equals the state-evolution ``(T^2 + T - 2) alpha / V`` exactly).
        max_ratio: the run is declared divergent (a collapse) when ``E[g^2] / (-E[g'])`` is not
            below this, in ``(0, inf]``: the square estimator of ``q_hat`` then feeds on itself
            (``V`` shrinks like ``V^2``) and would stop at a spurious "perfect recovery" with
            ``c ~ 0`` (chapter 5, section "A failure mode: collapse").
        stall_patience: stop (``converged=False``) when the residual has not reached a new minimum
            for this many iterations, an integer ``>= 2`` or ``None`` (no such rule). The status
            is ``"stationary: ..."`` when the median residual since the smallest one is at most
            ``0.01 c + 100 tol`` (``c`` the predicted error: the iterates fluctuate around a fixed
            point, a little above ``tol`` at finite ``d``), else ``"oscillating: ..."`` (the iterates
            keep jumping: not a fixed point; more damping or ``adaptive_damping`` may help).
        adaptive_damping: ``True``: start from ``damping`` (``0`` is the intended start) and set
            ``damping <- (1 + damping) / 2``, up to ``MAX_ADAPTIVE_DAMPING = 0.5``, each time the
            residual has grown two iterations in a row or the iterates oscillate with period 2
            (``||S_t - S_{t-2}||^2 < ||S_t - S_{t-1}||^2 / 4``).
        rie_outside: what the RIE does with an eigenvalue of ``R`` off the limiting support
            (:func:`aim_tutorial.rmt.rie_eigenvalues`): ``"edge"`` (the nearest edge's cleaned
            value) or ``"continuation"`` (the formula continued off the support, as in the paper's
            code; it amplifies the edge fluctuations of ``R`` by ``2 Delta``).

    Example:
        >>> from aim_tutorial.amp import GampRieOptions
        >>> GampRieOptions(init="mean").validated().c_init
        1.0
        >>> GampRieOptions(damping=1.0).validated()
        Traceback (most recent call last):
        ...
        ValueError: damping must be in [0, 1), got 1.0
    """

    init: str = "prior"
    c_init: Optional[float] = None
    damping: float = 0.5
    max_iter: int = 200
    tol: float = 1e-5
    min_iter: int = 3
    patience: int = 10
    q_hat_from: str = "square"
    max_ratio: float = 10.0
    stall_patience: Optional[int] = 25
    adaptive_damping: bool = False
    rie_outside: str = "edge"

    def validated(self) -> GampRieOptions:
        """These options with every field checked, as floats, ints and bools, and ``c_init`` resolved.

        Raises:
            ValueError: a field out of its range (the message names the field and the range);
                :class:`aim_tutorial._checks.ArgumentTypeError` (a ``TypeError`` and a
                ``ValueError``) for a field of the wrong kind.
        """
        damping = _checks.in_range("damping", self.damping, 0.0, 1.0, high_open=True)
        max_iter = _checks.integer_at_least("max_iter", self.max_iter, 1)
        adaptive_damping = _checks.boolean("adaptive_damping", self.adaptive_damping)
        rie_outside = _checks.one_of("rie_outside", self.rie_outside, ("continuation", "edge"))
        min_iter = _checks.integer_at_least("min_iter", self.min_iter, 1)
        patience = _checks.integer_at_least("patience", self.patience, 2)
        tol = _checks.positive("tol", self.tol)
        max_ratio = _checks.positive("max_ratio", self.max_ratio, allow_inf=True)
        stall_patience = self.stall_patience
        if stall_patience is not None:
            stall_patience = _checks.integer_at_least("stall_patience", stall_patience, 2)
        init = _checks.one_of("init", self.init, ("prior", "mean"))
        q_hat_from = _checks.one_of("q_hat_from", self.q_hat_from, ("square", "derivative"))
        c_init = self.c_init
        if c_init is None:
            c_init = 2.0 if init == "prior" else 1.0
        c_init = _checks.positive("c_init", c_init)
        return GampRieOptions(init=init, c_init=c_init, damping=damping, max_iter=max_iter, tol=tol,
                              min_iter=min_iter, patience=patience, q_hat_from=q_hat_from, max_ratio=max_ratio,
                              stall_patience=stall_patience, adaptive_damping=adaptive_damping,
                              rie_outside=rie_outside)


class GampRieProblem(NamedTuple):
    """What stays fixed during a run of GAMP-RIE (built by :func:`gamp_rie_start`).

    Attributes:
        X: tokens, in the algorithm's dtype (``dtype`` of :func:`gamp_rie`), shape ``(n, T, d)``.
        y: outputs (their logs with ``log_outputs=True``), in that dtype, shape ``(n, T, T)``.
        rho: width ratio of the prior.
        alpha: ``n / d^2``.
        half_step: the jitted output half of an iteration (``omega``, ``Gamma``, ``q_hat``, the
            eigendecomposition of ``R``) for the channel settings.
        S_ref: the teacher, or zeros when none is given (the error is then ``nan``).
        has_truth: a teacher was given.
        options: the validated :class:`GampRieOptions`.
        rmt: the module that supplies ``rie_eigenvalues`` and ``mmse_denoising`` (:mod:`aim_tutorial.rmt`).
    """

    X: jax.Array
    y: jax.Array
    rho: float
    alpha: float
    half_step: object
    S_ref: jax.Array
    has_truth: bool
    options: GampRieOptions
    rmt: object


class GampRieState(NamedTuple):
    """The iterate of GAMP-RIE: what one iteration (:func:`gamp_rie_step`) hands to the next.

    Attributes:
        S_hat: the estimate, shape ``(d, d)``: always the last finite one.
        c: its predicted error ``mmse_rho(Delta)`` (``c_init`` at the start).
        Gamma: the output score of the last iteration, shape ``(n, T, T)`` (the Onsager term).
        omega: the last (damped) ``omega``, shape ``(n, T, T)``.
        V: the last (damped) variance.
        damping: the damping of every iteration after the first (it grows with ``adaptive_damping``).
        S_prev: the estimate before ``S_hat`` (``S_hat`` itself at the start, read from iteration 2 on).
        residual: the residual of the last iteration (``inf`` at the start).
        grow: how many iterations in a row the residual has grown.
        best_residual: the smallest residual so far (``inf`` at the start).
        best_it: the iteration of ``best_residual`` (0 at the start).
        it: iterations done.
    """

    S_hat: jax.Array
    c: float
    Gamma: jax.Array
    omega: jax.Array
    V: float
    damping: float
    S_prev: jax.Array
    residual: float = math.inf
    grow: int = 0
    best_residual: float = math.inf
    best_it: int = 0
    it: int = 0


class GampRieRecord(NamedTuple):
    """What one iteration reports: a row of :class:`GampRieHistory` (its first seven fields after
    ``it``) and what :func:`gamp_rie_stop` needs besides.

    Attributes:
        it: the iteration, from 1.
        error, mmse_pred, residual, q_hat, delta, nishimori_ratio, damping: as in
            :class:`GampRieHistory` (``nan`` where the iteration did not get that far).
        prior_input_finite: the eigenvalues of the prior input ``R`` are finite.
        estimate_finite: the new estimate, its residual and its predicted error are finite.
        denoised: the denoiser ran (``q_hat > 0`` and ``R`` finite); otherwise the iteration
            leaves no row in the history.
        grow, best_residual, best_it: as in :class:`GampRieState`, after the iteration.
    """

    it: int
    error: float = math.nan
    mmse_pred: float = math.nan
    residual: float = math.nan
    q_hat: float = math.nan
    delta: float = math.nan
    nishimori_ratio: float = math.nan
    damping: float = 0.0
    prior_input_finite: bool = True
    estimate_finite: bool = True
    denoised: bool = True
    grow: int = 0
    best_residual: float = math.inf
    best_it: int = 0


class GampRieStopPolicy(NamedTuple):
    """The stopping rules of GAMP-RIE, applied by :func:`gamp_rie_stop` (fields as in
    :class:`GampRieOptions`; ``max_residual = 100 (1 + rho)^2``: a larger residual is an explosion)."""

    max_residual: float
    tol: float = 1e-5
    min_iter: int = 3
    max_iter: int = 200
    patience: int = 10
    max_ratio: float = 10.0
    stall_patience: Optional[int] = 25
    rie_outside: str = "edge"

    @classmethod
    def from_options(cls, options: GampRieOptions, rho: float) -> GampRieStopPolicy:
        """The policy of validated ``options`` for a prior of width ratio ``rho``."""
        return cls(max_residual=100.0 * (1.0 + rho) ** 2, tol=options.tol, min_iter=options.min_iter,
                   max_iter=options.max_iter, patience=options.patience, max_ratio=options.max_ratio,
                   stall_patience=options.stall_patience, rie_outside=options.rie_outside)
