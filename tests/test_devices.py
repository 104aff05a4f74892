"""Students spread over several devices (``train_gd``/``train_deep_gd``, ``devices=``), and GAMP-RIE
instances (``amp_device.gamp_rie_batch``): the same numbers as on one device. Run on a CPU with four host devices forced by ``XLA_FLAGS``, in a
fresh process (the flag must be set before JAX starts)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import pytest

from aim_tutorial.config import spread_devices

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = r"""
import json, os
import jax, numpy as np
import aim_tutorial as aim

assert len(jax.devices()) == 4, jax.devices()
k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
S = aim.sample_teacher(k1, 12, 0.5)
X, y = aim.sample_data(k2, S, n=120, T=2)
out = {}
one = aim.train_gd(k3, X, y, 0.5, n_init=8, steps=60, S_true=S, devices=jax.devices()[:1])
four = aim.train_gd(k3, X, y, 0.5, n_init=8, steps=60, S_true=S)
six = aim.train_gd(k3, X, y, 0.5, n_init=6, steps=60, S_true=S)      # 6 students: 3 devices
out["gd_devices"] = [len(one.W.sharding.device_set), len(four.W.sharding.device_set),
                     len(six.W.sharding.device_set)]
out["gd_diff"] = max(float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
                     for a, b in ((one.W, four.W), (one.loss, four.loss), (one.error_students, four.error_students),
                                  (one.S_hat, four.S_hat)))
out["gd_scale"] = float(np.max(np.abs(np.asarray(one.W))))
Ss = aim.deep.sample_deep_teacher(k1, 10, (0.5, 0.5))
Xd, yd = aim.sample_deep_data(k2, Ss, n=100, T=2, beta=1.0, c=1.0)
d1 = aim.deep.train_deep_gd(k3, Xd, yd, [0.5, 0.5], n_init=4, steps=40, S_true=Ss,
                            devices=jax.devices()[:1])
d4 = aim.deep.train_deep_gd(k3, Xd, yd, [0.5, 0.5], n_init=4, steps=40, S_true=Ss)
out["deep_devices"] = [len(d1.W[0].sharding.device_set), len(d4.W[0].sharding.device_set)]
out["deep_diff"] = max(float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
                       for a, b in ((d1.S_hat, d4.S_hat), (d1.loss, d4.loss)))
# GAMP-RIE instances over the devices: 6 instances on 4 devices (padded to 8), and on one
from aim_tutorial.amp import GampRieOptions
from aim_tutorial.amp_device import gamp_rie_batch
insts = [aim.make_instance(k, 14, 0.5, 0.3, 2) for k in jax.random.split(k1, 6)]
Xg, yg, Sg = (np.stack([getattr(i, f) for i in insts]) for f in ("X", "y", "S"))
opts = GampRieOptions(init="mean", max_iter=30)
g1 = gamp_rie_batch(Xg, yg, 0.5, S_true=Sg, options=opts, devices=jax.devices()[:1])
g4 = gamp_rie_batch(Xg, yg, 0.5, S_true=Sg, options=opts, devices=jax.devices())  # (None: one CPU device)
out["gamp_iters"] = [[r.n_iter for r in g1], [r.n_iter for r in g4]]
out["gamp_status"] = [r.status == q.status for r, q in zip(g1, g4)]
out["gamp_diff"] = max(max(float(np.max(np.abs(np.asarray(a.S_hat) - np.asarray(b.S_hat)))),
                           float(np.max(np.abs(a.history.error - b.history.error)))) for a, b in zip(g1, g4))
print("RESULT" + json.dumps(out))
"""


def test_spread_devices_takes_as_many_as_divide_the_count():
    cpu = jax.devices()[0]
    assert spread_devices(8, [cpu] * 4) == [cpu] * 4
    assert spread_devices(6, [cpu] * 4) == [cpu] * 3
    assert spread_devices(7, [cpu] * 4) == [cpu]
    assert spread_devices(5) == jax.devices()[:1] or len(jax.devices()) > 1
    with pytest.raises(ValueError, match="count must be a positive integer"):
        spread_devices(0)
    with pytest.raises(ValueError, match="devices must hold at least one device"):
        spread_devices(2, [])


@pytest.mark.slow
def test_students_on_four_devices_give_the_numbers_of_one():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4",
               JAX_PLATFORMS="cpu")
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.split("RESULT", 1)[1])
    assert out["gd_devices"] == [1, 4, 3]
    assert out["deep_devices"] == [1, 4]
    # each device runs the same per-student program on its share: the same numbers, up to the
    # rounding of a matrix product blocked differently for 2 students a device instead of 8
    assert out["gd_diff"] <= 1e-12 * max(1.0, out["gd_scale"]), out
    assert out["deep_diff"] <= 1e-12, out
    # GAMP-RIE instances split over the devices: the same iterations, statuses and numbers
    assert out["gamp_iters"][0] == out["gamp_iters"][1] and all(out["gamp_status"]), out
    assert out["gamp_diff"] <= 1e-12, out


TWO_PER_DEVICE = r"""
import json
import jax, numpy as np
import aim_tutorial as aim
from aim_tutorial.amp import GampRieOptions
from aim_tutorial.amp_device import gamp_rie_batch

assert len(jax.devices()) == 4, jax.devices()
insts = [aim.make_instance(jax.random.key(s), 40, 0.5, 0.3, 2) for s in range(8)]
X, y, S = (np.stack([getattr(i, f) for i in insts]) for f in ("X", "y", "S"))
opts = GampRieOptions(init="mean", max_iter=25)
four = gamp_rie_batch(X, y, 0.5, S_true=S, options=opts, devices=jax.devices())
one = gamp_rie_batch(X, y, 0.5, S_true=S, options=opts, devices=jax.devices()[:1])
print("RESULT" + json.dumps(dict(
    iters=[[r.n_iter for r in one], [r.n_iter for r in four]],
    diff=max(float(np.max(np.abs(np.asarray(a.S_hat) - np.asarray(b.S_hat)))) for a, b in zip(one, four)))))
"""


@pytest.mark.slow
def test_two_instances_per_forced_host_device_do_not_hang():
    """Eight instances at d = 40 over four host devices forced on the CPU's shared threads: under
    vmap the eigendecompositions were one batched LAPACK call that waited for its parts inside the
    shared thread pool, and the program hung (jax 0.10.2, from d = 36); gamp_rie_batch now runs the
    output half step of a device's instances one after another there. The same numbers as one
    device, within a time limit far above the 15 s it takes."""
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu")
    done = subprocess.run([sys.executable, "-c", TWO_PER_DEVICE], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.split("RESULT", 1)[1])
    assert out["iters"][0] == out["iters"][1], out
    assert out["diff"] <= 1e-12, out
