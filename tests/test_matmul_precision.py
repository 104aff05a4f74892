"""The algorithms' matrix products are traced at full precision (config.algorithm_products).

XLA's default precision computes float32 products on recent NVIDIA GPUs with TF32; on one H200
that moved GAMP-RIE's float32 errors by up to 2e-3 (benchmarks/gpu_compare.py). A CPU computes
float32 products in full either way, so these tests read the precision that each compiled
program asks for in its StableHLO text: every ``dot_general`` of the GAMP-RIE iteration (host
loop and device loop) and of the gradient-descent chunk says ``HIGHEST``, unless
``AIM_MATMUL_PRECISION=default``.
"""

import re

import jax
import jax.numpy as jnp
import pytest

import aim_tutorial as aim
from aim_tutorial import _students, amp, amp_device, config, gd

_DOT = re.compile(r"dot_general.*precision = \[(\w+), (\w+)\]")


def _precisions(text):
    """The precisions of the matrix products in a StableHLO module's text (one per product)."""
    dots = [ln for ln in text.splitlines() if "dot_general" in ln]
    found = [_DOT.search(ln) for ln in dots]
    assert all(found), [ln for ln, m in zip(dots, found) if not m]
    return {m.group(1) for m in found} | {m.group(2) for m in found}


def _instance(d, n):
    k1, k2, k3 = jax.random.split(jax.random.key(d), 3)
    S = aim.sample_teacher(k1, d, 0.5)
    X, y = aim.sample_data(k2, S, n, 2)
    return S, X, y, k3


class _Spy:
    """Wraps a jitted function: records the StableHLO text of each call's lowering."""

    def __init__(self, jitted, texts):
        self.jitted, self.texts = jitted, texts

    def __call__(self, *args, **kwargs):
        self.texts.append(self.jitted.lower(*args, **kwargs).as_text())
        return self.jitted(*args, **kwargs)

    def lower(self, *args, **kwargs):  # ahead-of-time compilation (gamp_rie_batch on a CPU)
        lowered = self.jitted.lower(*args, **kwargs)
        self.texts.append(lowered.as_text())
        return lowered


def test_matmul_precision_reads_the_environment(monkeypatch):
    monkeypatch.delenv("AIM_MATMUL_PRECISION", raising=False)
    assert config.matmul_precision() == "highest"
    monkeypatch.setenv("AIM_MATMUL_PRECISION", " Default ")
    assert config.matmul_precision() == "default"
    monkeypatch.setenv("AIM_MATMUL_PRECISION", "")
    assert config.matmul_precision() == "highest"
    for bad in ("tf32", "high", "float32", "bfloat16"):
        monkeypatch.setenv("AIM_MATMUL_PRECISION", bad)
        with pytest.raises(ValueError, match=r"^AIM_MATMUL_PRECISION must be one of \('highest', 'default'\)"):
            config.matmul_precision()


def test_algorithm_products_sets_the_precision_when_traced(monkeypatch):
    monkeypatch.delenv("AIM_MATMUL_PRECISION", raising=False)
    a = jnp.ones((3, 3), jnp.float32)
    f = jax.jit(config.algorithm_products(lambda x, y: x @ y))
    assert _precisions(f.lower(a, a).as_text()) == {"HIGHEST"}
    assert _precisions(jax.jit(lambda x, y: x @ y).lower(a, a).as_text()) == {"DEFAULT"}
    monkeypatch.setenv("AIM_MATMUL_PRECISION", "default")
    g = jax.jit(config.algorithm_products(lambda x, y: x @ y))
    assert _precisions(g.lower(a, a).as_text()) == {"DEFAULT"}
    assert config.algorithm_products.__doc__ and f is not g


def test_gamp_rie_iteration_products_are_full_precision(monkeypatch):
    monkeypatch.delenv("AIM_MATMUL_PRECISION", raising=False)
    S, X, y, key = _instance(12, 60)
    problem, st = amp.gamp_rie_start(X, y, 0.5, key=key, dtype="float32", S_true=S)
    Xp, yp = problem.X, problem.y
    forms = jax.eval_shape(amp._quadratic_forms, Xp, st.S_hat)
    texts = [amp._quadratic_forms.lower(Xp, st.S_hat).as_text(),
             problem.half_step.rest.lower(forms, Xp, yp, st.S_hat, st.c, st.Gamma, st.omega, st.V, 0.0,
                                          problem.alpha).as_text()]
    O = jnp.eye(12, dtype=jnp.float32)
    texts.append(amp._prior_step.lower(O, jnp.ones(12), st.S_hat, S.astype(jnp.float32)).as_text())
    for t in texts:
        assert _precisions(t) == {"HIGHEST"}


def test_gamp_rie_batch_loop_products_are_full_precision(monkeypatch):
    monkeypatch.delenv("AIM_MATMUL_PRECISION", raising=False)
    texts = []
    runner = amp_device._runner
    monkeypatch.setattr(amp_device, "_runner", lambda loop, devices: _Spy(runner(loop, devices), texts))
    insts = [_instance(10, 50) for _ in range(2)]
    X = jnp.stack([i[1] for i in insts])
    y = jnp.stack([i[2] for i in insts])
    res = amp_device.gamp_rie_batch(X, y, 0.5, keys=[i[3] for i in insts], dtype="float32",
                                    options=amp.GampRieOptions(max_iter=3))
    assert len(res) == 2 and texts
    assert all(_precisions(t) == {"HIGHEST"} for t in texts)


@pytest.mark.parametrize("setting, expected", [(None, "HIGHEST"), ("default", "DEFAULT")])
def test_train_gd_products_follow_the_setting(monkeypatch, setting, expected):
    if setting is None:
        monkeypatch.delenv("AIM_MATMUL_PRECISION", raising=False)
    else:
        monkeypatch.setenv("AIM_MATMUL_PRECISION", setting)
    texts = []
    monkeypatch.setattr(_students, "run_chunk", _Spy(_students.run_chunk, texts))  # the driver of train_gd
    d = 8 if setting is None else 9  # a new shape: the precision is fixed when a program is traced
    S, X, y, key = _instance(d, 40)
    gd.train_gd(key, X, y, 0.5, n_init=2, steps=4, record_every=2, dtype="float32", progress=False)
    assert texts and all(_precisions(t) == {expected} for t in texts)


def test_the_setting_changes_nothing_on_a_cpu(monkeypatch):
    """A CPU computes float32 products in full either way: the same iterates, bit for bit."""
    S, X, y, key = _instance(14, 70)
    out = {}
    for setting in ("default", "highest"):
        monkeypatch.setenv("AIM_MATMUL_PRECISION", setting)
        jax.clear_caches()  # the precision is fixed when a program is traced
        res = amp.gamp_rie(X, y, 0.5, key=key, dtype="float32", max_iter=5, S_true=S)
        out[setting] = res.S_hat
    assert jax.default_backend() == "cpu"
    assert bool(jnp.all(out["default"] == out["highest"]))
