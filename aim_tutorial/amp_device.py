"""GAMP-RIE with the whole loop on the device: many instances as one program.

:func:`aim_tutorial.gamp_rie` runs one instance, its loop in Python: each iteration hands the
eigenvalues of ``R`` to the host, where :mod:`aim_tutorial.rmt` cleans them and computes
``mmse_rho(Delta)``, and the host decides whether to stop. :func:`gamp_rie_batch` runs ``B``
instances of the same sizes (a sweep point: several seeds) as one jitted ``lax.while_loop``:
the iteration of :func:`aim_tutorial.amp.gamp_rie_step` for every instance at once (``vmap``; on a
CPU each instance its own call of the program, as many at once as there are cores, see
``_run_streams``), the
RIE and ``mmse_rho`` in JAX (:mod:`aim_tutorial.rmt_device`), and the kernel's bookkeeping and
stopping rules (:func:`aim_tutorial.amp_kernel.advance`, :func:`aim_tutorial.amp_kernel.stop_code`:
the functions the host loop runs, traced) on the device, each instance frozen at the iteration
where its own rule fired, the loop ending when every instance has stopped. Nothing goes back to the
host, except when an effective noise ``Delta`` falls outside the range where
:mod:`aim_tutorial.rmt_device` is validated (``[1e-12, 1e6]``): that iteration's RIE and
``mmse_rho`` are then computed by :mod:`aim_tutorial.rmt` (a host callback), so the results are
those of :func:`aim_tutorial.gamp_rie` whatever ``Delta`` does.

Each instance gets the result :func:`aim_tutorial.gamp_rie` gives it (the same iterates up to
rounding, ``tests/test_amp_device.py``: errors within 1e-10 in float64), with the same stop code
and status sentence (:func:`aim_tutorial.amp_kernel.finish` writes it from the code and the last
iteration's record, as for the host loop).

Reference: as :mod:`aim_tutorial.amp`; taught in chapter 5 (``book/05_amp.md``).
"""

from __future__ import annotations

import concurrent.futures
import functools
import operator
import os
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from . import _checks
from . import amp as _amp
from . import amp_kernel as _kernel
from . import rmt as _rmt_host
from . import rmt_device as _rd
from .config import algorithm_products, gamp_jit

__all__ = ["gamp_rie_batch"]

_FIELDS = _amp.GampRieHistory._fields  # the columns of the device's history
_RUNNING = int(_kernel.Status.RUNNING)
# the loop carries the last iteration's record packed by kind, three arrays (one leaf a field cost
# the loop an operation a field an iteration)
_KINDS = {kind: tuple(f for f, v in zip(_amp.GampRieRecord._fields, _amp.GampRieRecord(it=0))
                      if type(v) is kind) for kind in (float, int, bool)}


def _pack(record):
    """A :class:`~aim_tutorial.amp.GampRieRecord` of ``(B,)`` arrays as three ``(B, fields)`` arrays."""
    return tuple(jnp.stack([jnp.asarray(getattr(record, f), dtype) for f in _KINDS[kind]], axis=-1)
                 for kind, dtype in ((float, jnp.float64), (int, int), (bool, bool)))


def _unpack(packed, b):
    """Instance ``b``'s record from :func:`_pack`'s arrays (NumPy), in Python numbers as
    :func:`aim_tutorial.amp.gamp_rie_step` writes them."""
    fields = {f: kind(v) for kind, a in zip((float, int, bool), packed) for f, v in zip(_KINDS[kind], a[b])}
    return _amp.GampRieRecord(**fields)


def _host_denoise(lam, delta, rho, outside):
    """The RIE and ``mmse_rho`` of every instance on the host (:mod:`aim_tutorial.rmt`): the
    fallback for a ``Delta`` outside the range of :mod:`aim_tutorial.rmt_device`."""
    lam, delta = np.asarray(lam, float), np.asarray(delta, float)
    xi = np.empty_like(lam)
    c = np.empty(delta.shape)
    for b in range(delta.shape[0]):
        xi[b] = _rmt_host.rie_eigenvalues(lam[b], float(delta[b]), rho, outside=outside)
        c[b] = _rmt_host.mmse_denoising(float(delta[b]), rho)
    return xi, c


@functools.lru_cache(maxsize=32)
def _program(half_step, options: _amp.GampRieOptions, rho: float, has_truth: bool, one_at_a_time: bool = False):
    """The jitted loop over a batch for one channel setting and one set of options.

    ``one_at_a_time`` (on a CPU): the instances one after another inside the program, each its
    own loop until it stops (``lax.map`` over the instances of a ``while_loop``), not all at once
    under ``vmap``. On a CPU ``vmap`` gained nothing the cores were not already doing and cost
    more: XLA fused the batched product ``X S`` with the sums that follow it into one slow
    kernel, an instance that stops early still ran until half of the batch had stopped, and
    every batch size was a program to compile. On several host devices that share a CPU's
    threads ``vmap`` also hung: the eigendecompositions are then one batched LAPACK call that
    waits for its parts inside a pool thread, and with every pool thread of every device waiting
    so, none was left to run them. Measured: the benchmarks page, ``benchmarks/design_history.json``.
    """
    o = options
    policy = _amp.GampRieStopPolicy.from_options(o, rho)

    def output_half(X, y, S_hat, c, Gamma, omega, V, damp, alpha):
        return half_step.rest(_amp._quadratic_forms(X, S_hat), X, y, S_hat, c, Gamma, omega, V, damp, alpha)

    def denoise(lam, delta, ok):
        """Cleaned eigenvalues and mmse of every instance (``ok``: the instances that denoise)."""
        lam64, delta64 = lam.astype(jnp.float64), jnp.where(ok, delta, 1.0).astype(jnp.float64)

        def device():
            xi = jax.vmap(lambda lm, dl: _rd.rie_eigenvalues(lm, dl, rho, outside=o.rie_outside))(lam64, delta64)
            return xi, jax.vmap(lambda dl: _rd.mmse_denoising(dl, rho))(delta64)

        def host():
            shapes = (jax.ShapeDtypeStruct(lam64.shape, jnp.float64), jax.ShapeDtypeStruct(delta64.shape, jnp.float64))
            return jax.pure_callback(functools.partial(_host_denoise, rho=rho, outside=o.rie_outside),
                                     shapes, lam64, delta64)

        out_of_range = jnp.any(ok & ~_rd.in_range(delta64))
        xi, c = jax.lax.cond(out_of_range, host, device)
        return xi.astype(lam.dtype), c

    def body(carry):
        st, X, y, S_ref, alpha = carry
        s = st["state"]  # a batch of GampRieState
        active = st["code"] == _RUNNING
        it = s.it + 1
        damp = jnp.where(s.it == 0, 0.0, s.damping).astype(X.dtype)
        batched = (X, y, s.S_hat, s.c, s.Gamma, s.omega, s.V, damp)
        if one_at_a_time:  # a batch of one (see run)
            omega, V, Gamma, q_hat, lam, O, ratio = (
                v[None] for v in output_half(*(a[0] for a in batched), alpha))
        else:
            omega, V, Gamma, q_hat, lam, O, ratio = jax.vmap(
                output_half, in_axes=(0, 0, 0, 0, 0, 0, 0, 0, None))(*batched, alpha)
        q_hat, ratio = q_hat.astype(jnp.float64), ratio.astype(jnp.float64)
        ok_q = jnp.isfinite(q_hat) & (q_hat > 0)
        ok_R = jnp.all(jnp.isfinite(lam), axis=-1)
        den = ok_q & ok_R
        delta = 1.0 / jnp.where(den, q_hat, 1.0)
        xi, c_new = denoise(lam, delta, active & den)
        S_new, residual, err, finite = jax.vmap(_amp._prior_step)(O, xi, s.S_hat, S_ref)
        residual, err = residual.astype(jnp.float64), err.astype(jnp.float64)
        est_ok = finite & jnp.isfinite(residual) & jnp.isfinite(c_new)
        good = den & est_ok
        # the iteration's bookkeeping: the kernel's, as in gamp_rie_step
        d = S_new.shape[-1]
        grow, damping, best_residual, best_it = _kernel.advance(
            o, s, it, residual,
            lambda: jnp.sum((S_new - s.S_prev) ** 2, axis=(-2, -1)).astype(jnp.float64) / d)
        # the record of the iteration, as gamp_rie_step writes it (nan where the iteration did not get so far)
        nan = jnp.full_like(residual, jnp.nan)
        record = _amp.GampRieRecord(
            it=it, error=jnp.where(den, err, nan) if has_truth else nan, mmse_pred=jnp.where(den, c_new, nan),
            residual=jnp.where(den, residual, nan), q_hat=q_hat, delta=jnp.where(den, delta, nan),
            nishimori_ratio=jnp.where(den, ratio, nan), damping=jnp.where(den, damp.astype(jnp.float64), 0.0),
            prior_input_finite=~ok_q | ok_R, estimate_finite=~den | est_ok, denoised=den,
            grow=jnp.where(good, grow, 0), best_residual=jnp.where(good, best_residual, jnp.inf),
            best_it=jnp.where(good, best_it, 0))
        # the history row (an iteration that denoised leaves one, a finite estimate or not)
        k = st["k"]
        row = jnp.stack([getattr(record, f) for f in _FIELDS], axis=-1)
        hist = jax.vmap(lambda h, kk, r: jax.lax.dynamic_update_slice(h, r[None], (kk, 0)))(st["hist"], k, row)
        hist = jnp.where(den[:, None, None], hist, st["hist"])
        # the stopping rules: the kernel's, each instance with its own residuals
        code = jax.vmap(lambda r, res: _kernel.stop_code(policy, r, res))(record, hist[..., _FIELDS.index("residual")])
        keep = good[:, None, None]
        new = dict(
            state=_amp.GampRieState(
                S_hat=jnp.where(keep, S_new, s.S_hat), c=jnp.where(den, c_new.astype(s.c.dtype), s.c),
                Gamma=Gamma, omega=omega, V=V, damping=jnp.where(good, damping, s.damping),
                S_prev=jnp.where(keep, s.S_hat, s.S_prev), residual=jnp.where(good, residual, s.residual),
                grow=jnp.where(good, grow, s.grow), best_residual=jnp.where(good, best_residual, s.best_residual),
                best_it=jnp.where(good, best_it, s.best_it), it=it),
            k=jnp.where(den, k + 1, k), hist=hist, code=code, record=_pack(record),
        )
        # an instance that has stopped keeps its state
        st = jax.tree.map(lambda a, b: jnp.where(active.reshape(active.shape + (1,) * (a.ndim - 1)), a, b), new, st)
        return st, X, y, S_ref, alpha

    def loop(st, X, y, S_ref, alpha, floor):
        """Iterate until at most ``floor`` instances are still running (``floor = 0``: all stopped)."""

        def cond(carry):
            return jnp.sum(carry[0]["code"] == _RUNNING) > floor

        return jax.lax.while_loop(cond, lambda c: body(c[:5]) + (floor,), (st, X, y, S_ref, alpha, floor))[0]

    if not one_at_a_time:
        return loop

    def run(st, X, y, S_ref, alpha, floor):
        """Each instance's loop until it stops, one instance after another (``floor`` unused)."""

        def one(args):
            s, x, yy, sr = (jax.tree.map(lambda a: a[None], a) for a in args)
            return jax.tree.map(lambda a: a[0], loop(s, x, yy, sr, alpha, 0))

        return jax.lax.map(one, (st, X, y, S_ref))

    return run


def _one_at_a_time(devices) -> bool:
    """Whether a device's instances run one after another, each its own loop (on CPU devices;
    see ``_program``), rather than under ``vmap`` (accelerators)."""
    return all(dv.platform == "cpu" for dv in devices)


@functools.lru_cache(maxsize=32)
def _runner(loop, devices: tuple):
    """The loop jitted for one device, or for several: under ``shard_map`` each device runs its own
    loop over its own instances (no communication between devices inside the loop; a collective
    in the loop's condition hung XLA's forced host devices on 2 cores)."""
    loop = algorithm_products(loop)
    if len(devices) == 1:
        return gamp_jit(loop)
    mesh = Mesh(np.asarray(devices), ("instances",))
    split, whole = PartitionSpec("instances"), PartitionSpec()
    return gamp_jit(jax.shard_map(loop, mesh=mesh, in_specs=(split, split, split, split, whole, whole),
                                 out_specs=split, check_vma=False))


def _run_compacting(run, st, X, y, S_ref, alpha, devices):
    """Run the batch, and each time at most half of its instances are still running, go on with
    those alone, in a batch of the next power of two (padded with copies of one of them, whose
    results are dropped): an instance that stops early no longer costs an iteration of the
    slowest. Each batch size is one compiled program (``B``, then powers of two below it). A
    program that runs its instances one after another (``_program``'s ``one_at_a_time``) runs
    each until it stops: one call.
    With several ``devices`` the batch is a multiple of their number, its instances split over
    them (``jax.sharding``: a mesh over the instance axis). Returns the final state of every
    instance (NumPy)."""
    m = len(devices)
    mesh = Mesh(np.asarray(devices), ("instances",)) if m > 1 else None
    B = X.shape[0]
    final = jax.tree.map(np.array, jax.device_get(st))
    idx = np.arange(B)  # the instance of each row of the current batch
    rows = np.arange(B)
    while True:
        # pad to a multiple of the devices with copies of the first row
        size = -(-rows.size // m) * m
        pick = np.concatenate([rows, np.full(size - rows.size, rows[0])])
        st, X, y, S_ref, idx = jax.tree.map(lambda a, pick=pick: a[pick], st), X[pick], y[pick], S_ref[pick], idx[pick]
        if mesh is not None:
            split = NamedSharding(mesh, PartitionSpec("instances"))
            st, X, y, S_ref = jax.device_put((st, X, y, S_ref), split)
            alpha = jax.device_put(alpha, NamedSharding(mesh, PartitionSpec()))
        # each device stops when at most half of its rows run (a batch of m rows cannot shrink)
        floor = (size // m) // 2 if size > m else 0
        out = jax.device_get(run(st, X, y, S_ref, alpha, jnp.asarray(floor)))
        stopped = set()
        for r in np.flatnonzero(out["code"] != _RUNNING):  # copies: the first row of each instance
            if idx[r] not in stopped:
                stopped.add(idx[r])
                for whole, part in zip(jax.tree.leaves(final), jax.tree.leaves(out)):
                    whole[idx[r]] = part[r]
        running = [r for r in np.flatnonzero(out["code"] == _RUNNING) if idx[r] not in stopped]
        _, first = np.unique(idx[running], return_index=True)
        rows = np.asarray(running, dtype=int)[first]
        if rows.size == 0:
            return final
        rows = np.concatenate([rows, np.full((1 << int(np.ceil(np.log2(rows.size)))) - rows.size, rows[0])])
        st = out


def _cores() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


def _run_streams(run, st, X, y, S_ref, alpha, device, streams: int):
    """On one CPU device: each instance its own call of the program (a batch of one), ``streams``
    calls at a time (threads, each taking the next instance as it finishes one: an instance that
    stops early frees its thread for the next). One compiled program for every batch size. Returns
    the final state of every instance (NumPy), as :func:`_run_compacting` does.

    Why: one instance's iteration does not keep the cores busy (its eigendecomposition, its RIE and
    much of its score run on one thread), and XLA runs programs called from several threads at
    once; three or four streams on 2 cores were no faster than two. Measured: the benchmarks page, ``benchmarks/design_history.json``."""
    B = X.shape[0]

    def one(b):  # instance b's arrays, sliced when its turn comes (not all copied at once)
        return jax.tree.map(operator.itemgetter(slice(b, b + 1)), (st, X, y, S_ref))

    # compiled once, here, before the threads call it (concurrent first calls would each compile)
    compiled = run.lower(*one(0), alpha, jnp.asarray(0)).compile()

    def job(b):
        return _run_compacting(compiled, *one(b), alpha, [device])

    with concurrent.futures.ThreadPoolExecutor(max_workers=streams) as pool:
        parts = list(pool.map(job, range(B)))
    return jax.tree.map(lambda *p: np.concatenate(p), *parts)


def gamp_rie_batch(X, y, rho: float, *, channel: str = "softmax", beta: float = 1.0, noise: float = 0.0,
                   keys=None, S_true=None, score: str = "exact", log_outputs: bool = False,
                   options: Optional[_amp.GampRieOptions] = None, dtype=None, devices=None,
                   streams: Optional[int] = None) -> list:
    """GAMP-RIE on ``B`` instances of the same sizes at once, the whole loop on the device.

    The algorithm, its settings and its stopping rules are those of :func:`aim_tutorial.gamp_rie`
    (its iteration settings gathered in ``options``, a :class:`~aim_tutorial.amp.GampRieOptions`);
    each instance stops at its own rule and gets the result :func:`aim_tutorial.gamp_rie` would
    give it. One jitted program: the first call for a channel setting and sizes compiles it.

    Args:
        X: tokens of the instances, shape ``(B, n, T, d)``.
        y: their outputs, shape ``(B, n, T, T)``.
        rho: width ratio of the prior, ``rho > 0``.
        channel, beta, noise, score, log_outputs, dtype: as in :func:`aim_tutorial.gamp_rie`.
        keys: ``B`` ``jax.random`` keys (an array of keys, or a sequence), one per instance, for
            ``options.init = "prior"`` (the start each gets from :func:`aim_tutorial.gamp_rie` with
            that key); unused with ``init="mean"``.
        S_true: the teachers, shape ``(B, d, d)``, only to record the errors.
        options: the iteration settings (``None``: the defaults, ``GampRieOptions()``).
        devices: the JAX devices the instances are split over (``None``: every visible
            accelerator, :func:`jax.devices`, on several hosts every device of every host after
            :func:`jax.distributed.initialize`; on a CPU the first device only, since host
            devices forced with ``XLA_FLAGS`` share the same cores). The batch is padded to a
            multiple of their number (copies whose results are dropped); each device runs its own
            loop over its instances (``shard_map``); one device gives the same numbers. On CPU
            devices a device's instances run one after another inside its program, each its own
            loop (see ``_program``: faster, and on forced host devices batched ones hung at
            ``d >= 36``); on one CPU device, each instance in its own call (``streams``).
        streams: on one CPU device, how many instances run at once (threads, each instance its
            own call of the program, see ``_run_streams``; ``None``: the cores this process may
            use, at most ``B``). ``1``: one after another. Unused on accelerators and on several
            devices (the devices run at once). The results do not depend on it.

    Returns:
        a list of ``B`` :class:`~aim_tutorial.amp.GampRieResult`, in the order of the instances.

    Raises:
        ValueError, TypeError: as :func:`aim_tutorial.gamp_rie` for each instance, and for ``X``,
            ``y``, ``keys`` or ``S_true`` whose first axes do not agree.

    Example:
        >>> import jax, aim_tutorial as aim
        >>> from aim_tutorial.amp import GampRieOptions
        >>> from aim_tutorial.amp_device import gamp_rie_batch
        >>> S = jax.vmap(lambda k: aim.sample_teacher(k, 20, 0.5))(jax.random.split(jax.random.key(0), 3))
        >>> data = [aim.sample_data(k, s, n=80, T=2) for k, s in zip(jax.random.split(jax.random.key(1), 3), S)]
        >>> X, y = jax.numpy.stack([a for a, _ in data]), jax.numpy.stack([b for _, b in data])
        >>> results = gamp_rie_batch(X, y, 0.5, S_true=S, options=GampRieOptions(init="mean"))
        >>> [r.status.split(":")[0] for r in results]
        ['converged', 'converged', 'stationary']
        >>> results[0].n_iter == aim.gamp_rie(X[0], y[0], 0.5, S_true=S[0], init="mean").n_iter
        True
    """
    _checks.real_array("X", X, ndim=4)
    _checks.real_array("y", y, ndim=4)
    B = np.shape(X)[0]
    if np.shape(y)[0] != B:
        raise ValueError(f"y must hold as many instances as X ({B}), got shape {np.shape(y)}")
    if S_true is not None:
        _checks.real_array("S_true", S_true, ndim=3)
        if np.shape(S_true)[0] != B:
            raise ValueError(f"S_true must hold as many instances as X ({B}), got shape {np.shape(S_true)}")
    options = _amp.GampRieOptions() if options is None else options
    if not isinstance(options, _amp.GampRieOptions):
        raise _checks.ArgumentTypeError(f"options must be a GampRieOptions, got {type(options).__name__}")
    if streams is not None:
        streams = _checks.integer_at_least("streams", streams, 1)
    if keys is not None:
        keys = list(keys)
        if len(keys) != B:
            raise ValueError(f"keys must hold one key per instance ({B}), got {len(keys)}")
    # each instance checked and started as gamp_rie does it
    starts = [_amp.gamp_rie_start(X[b], y[b], rho, channel=channel, beta=beta, noise=noise,
                                  key=None if keys is None else keys[b],
                                  S_true=None if S_true is None else S_true[b], score=score,
                                  log_outputs=log_outputs, options=options, dtype=dtype) for b in range(B)]
    problems = [p for p, _ in starts]
    p0 = problems[0]
    o = p0.options
    if devices is None:
        devices = jax.devices()[:1] if jax.default_backend() == "cpu" else jax.devices()
    devices = list(devices)
    if not devices or not all(isinstance(dv, jax.Device) for dv in devices):
        raise _checks.ArgumentTypeError(f"devices must be a non-empty sequence of JAX devices, got {devices!r}")
    loop = _program(p0.half_step, o, p0.rho, p0.has_truth, one_at_a_time=_one_at_a_time(devices))
    dt = p0.X.dtype
    # the batch's state: the kernel's start of each instance (gamp_rie_start's), stacked; the loop's own
    # carry beside it (the history, its length k, the stop code, the last iteration's record)
    kinds = dict(c=dt, V=dt, damping=jnp.float64, residual=jnp.float64, grow=int, best_residual=jnp.float64,
                 best_it=int, it=int)
    state = _amp.GampRieState(*(
        jnp.asarray(np.stack([np.asarray(getattr(s, f)) for _, s in starts]), kinds.get(f))
        for f in _amp.GampRieState._fields))
    record = _pack(_amp.GampRieRecord(*(np.full((B,), v) for v in _amp.GampRieRecord(it=0))))
    st = dict(state=state, k=jnp.zeros((B,), int), hist=jnp.full((B, o.max_iter, len(_FIELDS)), jnp.nan),
              code=jnp.zeros((B,), jnp.int32), record=record)
    Xb = jnp.stack([p.X for p in problems])
    yb = jnp.stack([p.y for p in problems])
    S_ref = jnp.stack([p.S_ref for p in problems])
    alpha = jnp.asarray(p0.alpha, dt)
    with _amp.one_blas_thread():  # the eigendecompositions run on LAPACK: see one_blas_thread
        run = _runner(loop, tuple(devices))
        if len(devices) == 1 and _one_at_a_time(devices):
            out = _run_streams(run, st, Xb, yb, S_ref, alpha, devices[0], min(B, streams or _cores()))
        else:
            out = _run_compacting(run, st, Xb, yb, S_ref, alpha, devices)
    results = []
    for b in range(B):
        k = int(out["k"][b])
        hist = _amp.GampRieHistory(**{f: np.asarray(out["hist"][b, :k, i], dtype=float) for i, f in enumerate(_FIELDS)})
        record = _unpack(out["record"], b)
        state = _amp.GampRieState(*(v[b] for v in out["state"]))
        results.append(_kernel.finish(problems[b], state._replace(S_hat=jnp.asarray(state.S_hat)), hist,
                                      out["code"][b], record))
    return results
