"""GAMP-RIE with the loop on the device (aim_tutorial.amp_device) against gamp_rie's host loop.

Each instance of a batch must get the result gamp_rie gives it: the same status sentence, the
same number of iterations, the same history and estimate up to rounding. The largest difference
measured over 48 runs (softmax T = 2, 3, hardmax, linear with noise; default, adaptive damping,
continuation, max_iter) was 2.7e-11 in the error history; the tolerance is 1e-9.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import aim_tutorial as aim
from aim_tutorial import amp_device, rmt_device
from aim_tutorial.amp import GampRieOptions
from aim_tutorial.amp_device import gamp_rie_batch

RHO = 0.5
TOL = 1e-9


def _one(key, d, alpha, T=2, channel="softmax", noise=0.0):
    """One instance from ``key``: the teacher and its data."""
    k1, k2 = jax.random.split(key)
    s = aim.sample_teacher(k1, d, RHO)
    x, yy = aim.sample_data(k2, s, n=int(round(alpha * d * d)), T=T, channel=channel, noise=noise)
    return s, x, yy


def _stack(instances):
    return tuple(jnp.stack(a) for a in zip(*instances))


def _batch(seed, B, d, alpha, T=2, channel="softmax", noise=0.0):
    return _stack(_one(k, d, alpha, T, channel, noise) for k in jax.random.split(jax.random.key(seed), B))


def _same(host, dev):
    assert dev.status == host.status
    assert dev.n_iter == host.n_iter and dev.converged == host.converged and dev.diverged == host.diverged
    for f in host.history._fields:
        a, b = getattr(host.history, f), getattr(dev.history, f)
        assert a.shape == b.shape, f
        if a.size == 0:
            continue
        np.testing.assert_allclose(b, a, rtol=0, atol=TOL * max(1.0, float(np.nanmax(np.abs(a)))), err_msg=f)
    np.testing.assert_allclose(np.asarray(dev.S_hat), np.asarray(host.S_hat), rtol=0, atol=TOL)
    assert abs(dev.mmse_pred - host.mmse_pred) <= TOL


def _compare(S, X, y, options, keys=None, **kw):
    B = X.shape[0]
    dev = gamp_rie_batch(X, y, RHO, keys=keys, S_true=S, options=options, **kw)
    assert len(dev) == B
    for b in range(B):
        host = aim.gamp_rie(X[b], y[b], RHO, key=None if keys is None else keys[b], S_true=S[b],
                            **options._asdict(), **kw)
        _same(host, dev[b])
    return dev


def test_batch_matches_gamp_rie_softmax_prior_start():
    """Five instances from prior starts (their keys): they stop at different iterations, each
    frozen at its own (on a CPU each runs its own loop; under ``vmap`` the batch is compacted on
    the way: test_batch_under_vmap_matches_gamp_rie)."""
    S, X, y = _batch(0, 5, 20, 0.3)
    keys = list(jax.random.split(jax.random.key(1), 5))
    dev = _compare(S, X, y, GampRieOptions(), keys=keys)
    assert len({r.n_iter for r in dev}) > 1  # different stopping iterations: the compaction ran


def test_batch_under_vmap_matches_gamp_rie(monkeypatch):
    """The instances under ``vmap`` (what a GPU or TPU runs; a CPU runs them one after another,
    each its own loop) get gamp_rie's results too, softmax (5 instances that stop at different
    iterations: 5, then powers of two) and hardmax."""
    monkeypatch.setattr(amp_device, "_one_at_a_time", lambda devices: False)
    amp_device._program.cache_clear()
    try:
        S, X, y = _batch(0, 5, 20, 0.3)  # they stop at different iterations: the batch is compacted
        dev = _compare(S, X, y, GampRieOptions(), keys=list(jax.random.split(jax.random.key(1), 5)))
        assert len({r.n_iter for r in dev}) > 1
        S, X, y = _batch(5, 2, 16, 1.0, channel="hardmax")
        _compare(S, X, y, GampRieOptions(init="mean", max_iter=8), channel="hardmax")
    finally:
        amp_device._program.cache_clear()


def test_batch_matches_gamp_rie_at_max_iter_and_mean_start():
    S, X, y = _batch(2, 2, 20, 0.3, T=3)
    dev = _compare(S, X, y, GampRieOptions(init="mean", max_iter=4))
    assert [r.status for r in dev] == ["max_iter", "max_iter"]


@pytest.mark.slow
def test_batch_matches_gamp_rie_hardmax_adaptive_damping():
    S, X, y = _batch(3, 3, 20, 1.0, channel="hardmax")
    keys = list(jax.random.split(jax.random.key(4), 3))
    _compare(S, X, y, GampRieOptions(adaptive_damping=True, damping=0.0), keys=keys, channel="hardmax")


@pytest.mark.slow
def test_batch_matches_gamp_rie_linear_noise_continuation():
    S, X, y = _batch(5, 3, 20, 0.2, channel="linear", noise=0.3)
    keys = list(jax.random.split(jax.random.key(6), 3))
    _compare(S, X, y, GampRieOptions(rie_outside="continuation", max_iter=40), keys=keys, channel="linear",
             noise=0.3)


def test_divergence_matches_gamp_rie():
    """q_hat overflows at the first iteration (linear outputs 1e200 h): diverged, the same sentence."""
    S, X, y = _batch(7, 2, 16, 0.2, channel="linear")
    dev = _compare(S, X, 1e200 * y, GampRieOptions(init="mean"), channel="linear")
    assert all(r.diverged and "diverged at iteration 1" in r.status for r in dev)


def test_host_fallback_outside_the_device_range(monkeypatch):
    """With the device's range shrunk to nothing, every iteration's RIE and mmse run on the host
    (a callback): the same results."""
    monkeypatch.setattr(rmt_device, "DELTA_MAX", 1e-30)
    amp_device._program.cache_clear()
    try:
        S, X, y = _batch(8, 2, 16, 0.3)
        _compare(S, X, y, GampRieOptions(init="mean", max_iter=6))
    finally:
        amp_device._program.cache_clear()


def test_bad_batches_are_refused():
    S, X, y = _batch(9, 2, 8, 0.3)
    with pytest.raises(ValueError, match="X"):
        gamp_rie_batch(X[0], y, RHO)
    with pytest.raises(ValueError, match="y"):
        gamp_rie_batch(X, y[:1], RHO)
    with pytest.raises(ValueError, match="S_true"):
        gamp_rie_batch(X, y, RHO, S_true=S[:1])
    with pytest.raises(ValueError, match="keys"):
        gamp_rie_batch(X, y, RHO, keys=[jax.random.key(0)])
    with pytest.raises(TypeError, match="options"):
        gamp_rie_batch(X, y, RHO, options={"init": "mean"})
    with pytest.raises(ValueError, match="rho"):
        gamp_rie_batch(X, y, -1.0, options=GampRieOptions(init="mean"))


def test_streams_do_not_change_the_results():
    """On a CPU the instances run in ``streams`` programs at once (threads), each instance its own
    call: every stream count gives the same numbers, to the last bit, in the order of the instances
    (4 instances that stop at different iterations, so that threads finish out of order)."""
    S, X, y = _batch(12, 4, 12, 0.3)
    keys = list(jax.random.split(jax.random.key(13), 4))
    runs = {k: gamp_rie_batch(X, y, RHO, keys=keys, S_true=S, streams=k) for k in (1, 2, 3, 8)}
    assert len({r.n_iter for r in runs[1]}) > 1
    for k, res in runs.items():
        assert len(res) == 4
        for a, b in zip(runs[1], res):
            assert (a.n_iter, a.status) == (b.n_iter, b.status), k
            np.testing.assert_array_equal(np.asarray(a.S_hat), np.asarray(b.S_hat))
            np.testing.assert_array_equal(a.history.residual, b.history.residual)
    # on one CPU device the instances go to the streams, by default as many as the cores (at most B)
    calls = []
    run_streams = amp_device._run_streams
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(amp_device, "_run_streams", lambda *a: calls.append(a[-1]) or run_streams(*a))
        gamp_rie_batch(X, y, RHO, keys=keys, S_true=S)
        gamp_rie_batch(X, y, RHO, keys=keys, S_true=S, streams=3)
    assert calls == [min(4, amp_device._cores()), 3]
    with pytest.raises(ValueError, match="streams"):
        gamp_rie_batch(X, y, RHO, keys=keys, streams=0)
    with pytest.raises(TypeError, match="streams"):
        gamp_rie_batch(X, y, RHO, keys=keys, streams=2.0)


def test_batch_in_float32_matches_gamp_rie_in_float32():
    """dtype="float32" (the default on a GPU): the same iterations and statuses as gamp_rie in
    float32, errors within 1e-5 (2.3e-7 measured: the two reduce in different orders)."""
    S, X, y = _batch(10, 2, 20, 0.3)
    keys = list(jax.random.split(jax.random.key(11), 2))
    dev = gamp_rie_batch(X, y, RHO, keys=keys, S_true=S, dtype="float32")
    for b in range(2):
        host = aim.gamp_rie(X[b], y[b], RHO, key=keys[b], S_true=S[b], dtype="float32")
        assert (dev[b].n_iter, dev[b].status) == (host.n_iter, host.status)
        assert abs(dev[b].error - host.error) <= 1e-5 and dev[b].S_hat.dtype == jnp.float32


def test_batch_matches_gamp_rie_adaptive_damping_raised_by_an_oscillation():
    """adaptive_damping from damping 0 (softmax, alpha = 0.1, d = 12): the first instance's residual
    jumps (0.97, 0.53, 0.89, 0.74), S_4 back near S_2 (a period-2 oscillation, the residual not grown
    twice in a row), so the damping is raised to 0.5 at iteration 4 and used from iteration 5 on, by
    the device's rule as by the host's."""
    S, X, y = _batch(3, 3, 12, 0.1)
    keys = list(jax.random.split(jax.random.key(4), 3))
    dev = _compare(S, X, y, GampRieOptions(adaptive_damping=True, damping=0.0, max_iter=8), keys=keys)
    np.testing.assert_array_equal(dev[0].history.damping, [0.0, 0.0, 0.0, 0.0, 0.5, 0.5, 0.5, 0.5])


def test_batch_matches_gamp_rie_adaptive_damping_from_no_damping():
    """Undamped starts with adaptive damping on small instances whose first bump comes at
    different iterations (softmax alpha = 0.1: at iteration 2, from period-2 oscillations, and at
    19; hardmax alpha = 0.5: at 6, 8, 8 as measured with gamp_rie): the device's oscillation rule,
    its first iteration and the reset of the growth count after a bump must be the host's."""
    opts = GampRieOptions(init="mean", damping=0.0, adaptive_damping=True, max_iter=20, patience=3)
    for channel, alpha, seeds in (("softmax", 0.1, (3, 4, 5)), ("hardmax", 0.5, (0, 3, 4))):
        S, X, y = _stack(_one(jax.random.key(s), 12, alpha, channel=channel) for s in seeds)
        dev = _compare(S, X, y, opts, channel=channel)
        assert any(np.any(r.history.damping > 0) for r in dev)
    # patience 2: after the bump to the largest damping, one more growth of the residual stops a run
    # whose growth count was not reset (softmax seed 4 stops so at iteration 12, residual 0.815)
    S, X, y = _stack(_one(jax.random.key(s), 12, 0.1) for s in (3, 4, 5))
    dev = _compare(S, X, y, opts._replace(patience=2))
    assert dev[1].status.startswith("diverged at iteration 12: residual grew")
    # the rule's threshold, 100 tol, as the host's: a tol that puts that residual between 99 and 100 tol
    r = float(dev[1].history.residual[-1])
    _compare(S[1:2], X[1:2], y[1:2], opts._replace(patience=2, tol=r / 99.5))


def test_batch_matches_gamp_rie_when_the_residual_grows():
    """Undamped hardmax at alpha = 0.4 (d = 12) with patience = 2: the third instance's residual grows
    at iterations 8 and 9 (above 100 tol), so it is declared divergent at iteration 9, the patience-th
    growth, on the device as on the host; the two others run to max_iter."""
    S, X, y = _batch(3, 3, 12, 0.4, channel="hardmax")
    keys = list(jax.random.split(jax.random.key(4), 3))
    dev = _compare(S, X, y, GampRieOptions(damping=0.0, patience=2, max_iter=12), keys=keys, channel="hardmax")
    assert dev[2].status == "diverged at iteration 9: residual grew 2 iterations in a row"


def test_batch_matches_gamp_rie_stall_rule_from_min_iter():
    """stall_patience = 2 with min_iter = 5 (softmax, alpha = 0.1, d = 12, tol 1e-12 so that nothing
    converges): the first instance's smallest residual is at iteration 3, so the stall rule fires at
    iteration 5, the first iteration where it applies (it >= min_iter), as on the host."""
    S, X, y = _batch(3, 3, 12, 0.1)
    keys = list(jax.random.split(jax.random.key(4), 3))
    options = GampRieOptions(stall_patience=2, min_iter=5, tol=1e-12, patience=50, max_iter=12)
    dev = _compare(S, X, y, options, keys=keys)
    assert dev[0].n_iter == 5 and dev[0].status.startswith("oscillating"), dev[0].status


def test_explosion_threshold_is_that_of_gamp_rie(monkeypatch):
    """The explosion rule: diverged when the residual is above 100 (1 + rho)^2, strictly. At d = 1 with
    rho = 0.25 (start sqrt(rho) = 0.5) and an RIE forced to return 13 (on the host, where the device
    falls back with its range shrunk to nothing), the first residual is (13 - 0.5)^2 = 156.25 =
    100 (1.25)^2 exactly, in floating point: not an explosion, the run then converges; with the RIE
    returning the next float above 13 the residual is above the limit: diverged at iteration 1. The
    device agrees with gamp_rie on both sides of the limit."""
    rho = 0.25
    monkeypatch.setattr(rmt_device, "DELTA_MAX", 1e-30)
    amp_device._program.cache_clear()
    try:
        S = jnp.stack([aim.sample_teacher(k, 1, 1.0) for k in jax.random.split(jax.random.key(12), 2)])
        data = [aim.sample_data(k, s, n=6, T=2, channel="linear") for k, s in zip(jax.random.split(jax.random.key(13), 2), S)]
        X, y = jnp.stack([a for a, _ in data]), jnp.stack([b for _, b in data])
        opts = dict(init="mean", max_ratio=np.inf, max_iter=5)
        for value, status in ((13.0, "converged"), (np.nextafter(13.0, 14.0), "diverged at iteration 1: residual")):
            monkeypatch.setattr(aim.rmt, "rie_eigenvalues", lambda lam, delta, r, outside="edge", v=value:
                                np.full(np.shape(lam), v))
            dev = gamp_rie_batch(X, y, rho, channel="linear", S_true=S, options=GampRieOptions(**opts))
            for b in range(2):
                host = aim.gamp_rie(X[b], y[b], rho, channel="linear", S_true=S[b], **opts)
                assert host.status.startswith(status), host.status
                _same(host, dev[b])
            if status == "converged":
                assert dev[0].history.residual[0] == 156.25
    finally:
        amp_device._program.cache_clear()


def test_devices_must_be_a_non_empty_sequence_of_jax_devices():
    """devices=[] and devices that are not JAX devices are refused with a TypeError naming devices
    (not a division by zero in the batch split, nor a run that ignores the argument)."""
    S, X, y = _batch(9, 2, 8, 0.3)
    for devices in ([], ["cpu"]):
        with pytest.raises(TypeError, match="devices must be a non-empty sequence of JAX devices"):
            gamp_rie_batch(X, y, RHO, options=GampRieOptions(init="mean", max_iter=2), devices=devices)
