"""The GAMP-RIE kernel: one set of bookkeeping and stopping rules for every loop that runs it.

:func:`aim_tutorial.gamp_rie` runs GAMP-RIE in a Python loop (the host),
:func:`aim_tutorial.amp_device.gamp_rie_batch` in a jitted ``lax.while_loop`` over many instances
(the device, under ``vmap`` or ``shard_map``). Both run the functions of this module, in the
pattern of an ``init``/``step`` pair with a stop rule:

- :func:`init`: ``(problem, S_hat) -> state``, the :class:`State` before the first iteration;
- :func:`step`: ``(problem, state) -> (state, record)``, one iteration on the host (the device
  loop runs the same output half and prior step, with the RIE in JAX, and the same
  :func:`advance`);
- :func:`advance`: the bookkeeping of an iteration (residual growth, adaptive damping, the
  smallest residual);
- :func:`stop_code`: the stopping rules, in their order, as one integer code, a :class:`Status`;
- :func:`finish`: the result of a stopped run, its status sentence written from its code.

:func:`advance` and :func:`stop_code` are written once for both: on Python numbers they run as
plain Python (one rule after the other, the first that fires returns; no array is made, so the
host loop pays nothing for them), on traced JAX arrays as ``jnp.where`` selections (elementwise:
a batch of instances at once, or one instance under ``vmap``). The settings are one
:class:`Options` object (:class:`aim_tutorial.amp.GampRieOptions`).

Reference: as :mod:`aim_tutorial.amp`; taught in chapter 5 (``book/05_amp.md``).
"""

from __future__ import annotations

import importlib
import math
from typing import TYPE_CHECKING, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from ._status import Coded

if TYPE_CHECKING:  # the aliases that __getattr__ below resolves at run time (amp imports this module)
    from .amp import GampRieOptions as Options
    from .amp import GampRieRecord as Record
    from .amp import GampRieState as State
    from .amp import GampRieStopPolicy as StopPolicy

__all__ = ["Options", "Record", "State", "Status", "StopPolicy", "advance", "finish", "init", "step", "stop_code"]


def _amp():
    return importlib.import_module("aim_tutorial.amp")


class Status(Coded):
    """How a run of GAMP-RIE ended: the code of :func:`stop_code`, each member with its message.

    ``RUNNING`` (0) is no end: the run goes on. Codes 1-6 are the divergences, in the order in
    which the rules are applied; then ``CONVERGED``, the stall (``STATIONARY`` or ``OSCILLATING``,
    by the median residual since the smallest) and ``MAX_ITER``. :meth:`sentence` writes the
    status string of a result (``GampRieResult.status``) from the last iteration's record.

    Example:
        >>> from aim_tutorial.amp_kernel import Status
        >>> Status.COLLAPSE.diverged, int(Status.CONVERGED), Status.MAX_ITER.message
        (True, 7, 'max_iter: the iteration limit was reached')
    """

    RUNNING = 0, "running"
    Q_HAT = 1, "diverged: q_hat is not a positive number"
    R_NONFINITE = 2, "diverged: the prior input R is not finite"
    ESTIMATE = 3, "diverged: the new estimate is not finite"
    EXPLODED = 4, "diverged: the residual exploded"
    COLLAPSE = 5, "diverged: collapse of the predicted variance (E g^2 / -E g' not below max_ratio)"
    GREW = 6, "diverged: the residual grew patience iterations in a row"
    CONVERGED = 7, "converged: the residual fell below tol"
    STATIONARY = 8, "stationary: no new smallest residual, the iterates fluctuate around a fixed point"
    OSCILLATING = 9, "oscillating: no new smallest residual, the iterates keep jumping"
    MAX_ITER = 10, "max_iter: the iteration limit was reached"

    @property
    def diverged(self) -> bool:
        """The run was declared divergent (codes 1-6)."""
        return Status.Q_HAT <= self <= Status.GREW

    def sentence(self, policy: StopPolicy, record: Record, residuals=()) -> Optional[str]:
        """The status string of a run that stopped with this code after the iteration of ``record``
        (``None`` for ``RUNNING``); ``residuals``: the run's residuals, read by the stall's."""
        it, residual = record.it, record.residual
        continued = policy.rie_outside == "continuation"
        if self is Status.RUNNING:
            return None
        if self is Status.Q_HAT:
            return f"diverged at iteration {it}: q_hat = {record.q_hat!r} is not a positive number"
        if self is Status.R_NONFINITE:
            return f"diverged at iteration {it}: non-finite prior input R"
        if self is Status.ESTIMATE:
            return f"diverged at iteration {it}: non-finite estimate"
        if self is Status.EXPLODED:
            return (f"diverged at iteration {it}: residual {residual:.3g} exploded"
                    + ("; the RIE continued off the support amplifies edge eigenvalues "
                       f"by 2 Delta = {2 * record.delta:.3g}: try rie_outside='edge'" if continued else ""))
        if self is Status.COLLAPSE:
            ratio, c = record.nishimori_ratio, record.mmse_pred
            return (f"diverged at iteration {it}: collapse, the output residuals are {ratio:.3g} times larger "
                    f"than the predicted variance V (E g^2 / -E g' = {ratio:.3g}); the predicted error "
                    f"eps = {c:.3g} is not to be trusted"
                    + ("; with rie_outside='edge' the collapsing instances of chapter 5 converge "
                       "(q_hat_from='derivative' is no cure)" if continued else ""))
        if self is Status.GREW:
            return f"diverged at iteration {it}: residual grew {record.grow} iterations in a row"
        if self is Status.CONVERGED:
            return "converged"
        if self is Status.MAX_ITER:
            return "max_iter"
        # the stall: "oscillating" was introduced when undamped hardmax runs at alpha = 0.2 (d = 24) jumped
        # with residuals ~0.66 and were reported as "stationary ... around a fixed point"
        window = list(residuals)[record.best_it - 1:]
        typical, tol, best_it, c = float(np.median(window)), policy.tol, record.best_it, record.mmse_pred
        if self is Status.STATIONARY:
            return (f"stationary: the residual stopped decreasing (smallest {record.best_residual:.2g} at "
                    f"iteration {best_it}, tol {tol:g}; median {typical:.2g} since); the iterates fluctuate "
                    "around a fixed point")
        return (f"oscillating: not converged, the residual stopped decreasing and stays large (median "
                f"{typical:.2g} over the last {len(window)} iterations, smallest {record.best_residual:.2g} at "
                f"iteration {best_it}, tol {tol:g}, against a predicted error {c:.2g}); the iterates keep jumping "
                "and are not at a fixed point: more damping (damping=0.5 or adaptive_damping=True) may help")


def __getattr__(name):
    # the settings and the pytrees are defined in aim_tutorial.amp (their public home since before this
    # module); they are this module's too
    aliases = {"Options": "GampRieOptions", "StopPolicy": "GampRieStopPolicy", "State": "GampRieState",
               "Record": "GampRieRecord"}
    if name in aliases:
        return getattr(_amp(), aliases[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --------------------------------------------------------------------------- #
# The operations the rules are written in: Python's on numbers, jnp's on traced arrays
# --------------------------------------------------------------------------- #
class _Python:
    """On Python numbers (the host loop): plain Python, lazy where it can be, no array made."""

    @staticmethod
    def where(c, a, b):
        return a if c else b

    @staticmethod
    def both(a, b):
        return bool(a) and bool(b)

    @staticmethod
    def then(a, f: Callable):  # a and f(), f called only when needed
        return bool(a) and bool(f())

    @staticmethod
    def or_else(a, f: Callable):  # a or f(), f called only when needed
        return bool(a) or bool(f())

    @staticmethod
    def not_(a):
        return not a

    isfinite = staticmethod(math.isfinite)
    minimum = staticmethod(min)


class _Traced:
    """On JAX arrays (the device loop): elementwise, every branch computed."""

    where = staticmethod(jnp.where)
    both = staticmethod(jnp.logical_and)
    not_ = staticmethod(jnp.logical_not)
    isfinite = staticmethod(jnp.isfinite)
    minimum = staticmethod(jnp.minimum)

    @staticmethod
    def then(a, f: Callable):
        return jnp.logical_and(a, f())

    @staticmethod
    def or_else(a, f: Callable):
        return jnp.logical_or(a, f())


def _ops(x):
    return _Traced if isinstance(x, jax.core.Tracer) else _Python


# --------------------------------------------------------------------------- #
# The kernel
# --------------------------------------------------------------------------- #
def init(problem, S_hat):
    """The :class:`State` before the first iteration: ``S_hat`` (the start: a prior sample or
    ``sqrt(rho) I``, see :func:`aim_tutorial.amp.gamp_rie_start`), ``c = V = c_init``,
    ``Gamma = omega = 0``, the damping of ``problem.options``.

    Example:
        >>> import jax, aim_tutorial as aim
        >>> from aim_tutorial import amp_kernel
        >>> from aim_tutorial.amp import GampRieOptions, gamp_rie_start
        >>> S = aim.sample_teacher(jax.random.key(0), 20, 0.5)
        >>> X, y = aim.sample_data(jax.random.key(1), S, n=60, T=2)
        >>> problem, state = gamp_rie_start(X, y, 0.5, options=GampRieOptions(init="mean"))
        >>> start = amp_kernel.init(problem, state.S_hat)
        >>> start.c, start.V, start.it, start.Gamma.shape
        (1.0, 1.0, 0, (60, 2, 2))
    """
    o = problem.options
    n, T, _ = problem.X.shape
    zeros = jax.device_put(np.zeros((n, T, T), problem.X.dtype))  # a transfer: jnp.zeros compiles a program
    return _amp().GampRieState(S_hat=S_hat, c=o.c_init, Gamma=zeros, omega=zeros, V=o.c_init, damping=o.damping,
                               S_prev=S_hat)


def advance(options, state, it, residual, moved: Callable):
    """The bookkeeping of an iteration whose new estimate is finite: ``(grow, damping,
    best_residual, best_it)`` after it.

    ``grow`` counts the iterations in a row whose residual grew; with ``options.adaptive_damping``
    the damping becomes ``(1 + damping) / 2`` (at most ``MAX_ADAPTIVE_DAMPING``) when the residual
    grew two iterations in a row or the iterates oscillate with period 2 (``moved() =
    ||S_new - S_prev||^2 / d`` below ``residual / 4``; ``moved`` is called only when needed on the
    host), and ``grow`` restarts; the smallest residual and its iteration follow. ``state``: the
    :class:`State` before the iteration; ``it``: the iteration (from 1). Python numbers or traced
    arrays (elementwise).

    Example:
        >>> from aim_tutorial import amp_kernel
        >>> from aim_tutorial.amp import GampRieOptions, GampRieState
        >>> st = GampRieState(S_hat=None, c=1.0, Gamma=None, omega=None, V=1.0, damping=0.0, S_prev=None,
        ...                   residual=0.1, grow=1, best_residual=0.05, best_it=2, it=3)
        >>> amp_kernel.advance(GampRieOptions(adaptive_damping=True), st, 4, 0.2, lambda: 1.0)
        (0, 0.5, 0.05, 2)
    """
    ops = _ops(residual)
    grow = ops.where(residual > state.residual, state.grow + 1, 0)
    damping = state.damping
    if options.adaptive_damping:
        # adaptive damping: half damping from the start slows the hardmax at large alpha, none makes it
        # oscillate at small alpha (chapter 5, section "Damping: the path, not the fixed point").
        # A period-2 oscillation: S_new is back near S_{t-2} while far from S_{t-1}.
        limit = _amp().MAX_ADAPTIVE_DAMPING

        def oscillating():
            return ops.then(ops.both(it >= 2, residual > options.tol), lambda: moved() < 0.25 * residual)

        bump = ops.then(damping < limit, lambda: ops.or_else(grow >= 2, oscillating))
        damping = ops.where(bump, ops.minimum(limit, (1.0 + damping) / 2), damping)
        grow = ops.where(bump, 0, grow)
    better = residual < state.best_residual
    return grow, damping, ops.where(better, residual, state.best_residual), ops.where(better, it, state.best_it)


def _stall_median(residuals, best_it, it):
    """The median residual since the smallest (iterations ``best_it`` to ``it``); ``residuals``: the
    run's residuals (a list on the host, the history's column, ``nan`` past ``it``, when traced)."""
    if isinstance(best_it, jax.core.Tracer):
        idx = jnp.arange(residuals.shape[-1]) + 1
        return jnp.nanmedian(jnp.where((idx >= best_it) & (idx <= it), residuals, jnp.nan))
    return float(np.median(list(residuals)[best_it - 1:]))


def _stall_code(policy, record, residuals):
    """``STATIONARY`` when the median residual since the smallest is at most ``0.01 c + 100 tol``
    (``c`` the predicted error: a fixed point, up to finite-size fluctuations), else ``OSCILLATING``."""
    typical = _stall_median(residuals, record.best_it, record.it)
    return _ops(record.it).where(typical <= 0.01 * record.mmse_pred + 100 * policy.tol, Status.STATIONARY,
                                 Status.OSCILLATING)


def stop_code(policy, record, residuals=()):
    """The :class:`Status` code at which a run stops after the iteration of ``record``:
    ``Status.RUNNING`` (0) to go on.

    The rules, in this order: ``q_hat`` not positive, ``R`` or the estimate not finite, the residual
    above ``policy.max_residual`` (an explosion), ``E g^2 / -E g'`` not below ``max_ratio`` (a
    collapse), the residual grown ``patience`` iterations in a row (and above ``100 tol``); then
    the residual below ``tol`` (from ``min_iter`` on), no new smallest residual for
    ``stall_patience`` iterations (``STATIONARY`` when the median residual since the smallest is
    at most ``0.01 c + 100 tol``, ``c`` the predicted error, else ``OSCILLATING``) and ``max_iter``.
    On Python numbers (the host) it returns a :class:`Status`, on traced arrays an integer array
    (the first rule that fires, elementwise; the stall's median needs one instance: use ``vmap``).

    Args:
        policy: the :class:`StopPolicy`.
        record: the :class:`Record` of the iteration.
        residuals: the residuals of the run so far, this iteration's last (the stall reads those since
            the smallest); traced: the residual column of the history, ``nan`` past the last row.

    Example:
        >>> from aim_tutorial.amp import GampRieRecord, GampRieStopPolicy
        >>> from aim_tutorial.amp_kernel import stop_code
        >>> policy = GampRieStopPolicy(max_residual=225.0)
        >>> row = dict(q_hat=2.0, delta=0.5, mmse_pred=0.3, nishimori_ratio=1.0)
        >>> stop_code(policy, GampRieRecord(it=5, residual=1e-3, best_it=5, **row))
        <Status.RUNNING: 0>
        >>> stop_code(policy, GampRieRecord(it=5, residual=1e-7, **row)).sentence(policy, GampRieRecord(it=5))
        'converged'
    """
    ops = _ops(record.it)
    it, residual, p = record.it, record.residual, policy
    S = Status

    def stall():
        return _stall_code(policy, record, residuals)

    # (the rule, its code): each a function, so that the host evaluates no rule after the first that fires
    rules = [
        (lambda: ops.not_(ops.then(ops.isfinite(record.q_hat), lambda: record.q_hat > 0)), S.Q_HAT),
        (lambda: ops.not_(record.prior_input_finite), S.R_NONFINITE),
        (lambda: ops.not_(record.estimate_finite), S.ESTIMATE),
        (lambda: residual > p.max_residual, S.EXPLODED),
        (lambda: ops.not_(record.nishimori_ratio < p.max_ratio), S.COLLAPSE),
        (lambda: ops.both(record.grow >= p.patience, residual > 100 * p.tol), S.GREW),
        (lambda: ops.both(it >= p.min_iter, residual < p.tol), S.CONVERGED),
    ]
    if p.stall_patience is not None:
        rules.append((lambda: ops.both(it >= p.min_iter, it - record.best_it >= p.stall_patience), stall))
    rules.append((lambda: it >= p.max_iter, S.MAX_ITER))
    if ops is _Python:
        for rule, code in rules:
            if rule():
                return S(code() if callable(code) else code)
        return S.RUNNING
    code = jnp.full(jnp.shape(it), int(S.RUNNING), jnp.int32)
    for rule, value in reversed(rules):  # the first rule that fires wins
        code = jnp.where(rule(), value() if callable(value) else int(value), code)
    return code.astype(jnp.int32)


def step(problem, state):
    """One iteration of GAMP-RIE on the host, ``state -> (new state, record)``:
    :func:`aim_tutorial.amp.gamp_rie_step`."""
    return _amp().gamp_rie_step(problem, state)


def finish(problem, state, history, code: Status, record, residuals=None):
    """The :class:`aim_tutorial.amp.GampRieResult` of a run that stopped with ``code`` after the
    iteration of ``record``, in ``state``, with the per-iteration ``history``
    (:class:`aim_tutorial.amp.GampRieHistory`): the status sentence of the code, the self-checks
    of :func:`aim_tutorial.amp.gamp_rie_self_check`."""
    amp = _amp()
    code = Status(int(code))
    policy = amp.GampRieStopPolicy.from_options(problem.options, problem.rho)
    status = code.sentence(policy, record, history.residual if residuals is None else residuals)
    consistent, consistency = amp.gamp_rie_self_check(problem.X, history.nishimori_ratio)
    return amp.GampRieResult(
        S_hat=state.S_hat,
        mmse_pred=float(state.c),
        error=float(history.error[-1]) if len(history.error) else float("nan"),
        converged=code is Status.CONVERGED,
        diverged=code.diverged,
        n_iter=int(state.it),
        status=status,
        history=history,
        consistent=consistent,
        consistency=consistency,
        code=code,
    )
