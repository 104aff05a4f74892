"""Tests of two-layer GAMP-RIE (:mod:`aim_tutorial.deep.gamp`, issue 46 item 3)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import aim_tutorial as aim
from aim_tutorial import deep
from aim_tutorial.amp import GampRieOptions
from aim_tutorial.amp_kernel import Status
from aim_tutorial.deep import gamp as dg

RHOS = [0.5, 0.5]


@pytest.fixture(scope="module")
def instance():
    # d = 40, x = alpha (T^2 + T - 2) = 1: below the end of learning of the per-layer state evolution
    Ss, X, y, n, _ = aim.make_instance(jax.random.key(46), 40, RHOS, 0.25, 2, channel="deep")
    return Ss, X, y, n


def test_one_layer_is_gamp_rie_iterate_for_iterate():
    """The loop with one layer and the one-layer softmax channel is :func:`aim_tutorial.gamp_rie`: the same
    errors, predicted errors, q_hat and residuals at every iteration, the same stop."""
    S, X, y, n, _ = aim.make_instance(jax.random.key(3), 30, 0.5, 0.3, 2)
    opts = GampRieOptions(init="mean", max_iter=12).validated()
    ref = aim.gamp_rie(X, y, 0.5, S_true=S, init="mean", max_iter=12)
    Xd = jnp.asarray(X, jnp.float64)
    half = dg._one_layer_half("softmax", 1.0)
    yd = jnp.asarray(y, jnp.float64)
    r = dg._run(Xd, [0.5], lambda *a: half(*a, y=yd), [jnp.sqrt(0.5) * jnp.eye(30)], [jnp.asarray(S)], True, opts,
                n / 30**2)
    assert r.n_iter == ref.n_iter == 12 and r.code is ref.code is Status.MAX_ITER
    np.testing.assert_allclose(r.history.error[:, 0], ref.history.error, rtol=1e-9)
    np.testing.assert_allclose(r.history.mmse_pred[:, 0], ref.history.mmse_pred, rtol=1e-9)
    np.testing.assert_allclose(r.history.q_hat[:, 0, 0], ref.history.q_hat, rtol=1e-9)
    np.testing.assert_allclose(r.history.residual, ref.history.residual, rtol=1e-7)
    np.testing.assert_allclose(np.asarray(r.S_hat[0]), np.asarray(ref.S_hat), atol=1e-10)


def test_first_q_hat_is_the_state_evolution_s_at_the_start(instance):
    """From the mean start the overlaps of the means are the state evolution's at V = (1, 1),
    ``q = Q0 - I``: the first iteration's empirical q_hat (n samples of the score of the same
    log Z_out) agrees with :func:`deep_q_hat` there within the sampling error of n samples."""
    Ss, X, y, n = instance
    r = deep.deep_gamp_rie(X, y, RHOS, S_true=Ss, n_nodes=32, options=GampRieOptions(init="mean", max_iter=1))
    Q0 = deep.limit_overlap_matrix(RHOS)
    se = deep.deep_q_hat(jax.random.key(0), 0.25, Q0 - np.eye(2), (1.0, 1.0), n_omega=4000, n_nodes=32)
    qh = r.history.q_hat[0]
    assert np.allclose(qh, qh.T)
    # the spread of the per-sample products, from the state evolution's own draws, over n samples
    tol = 4 * np.sqrt(2) * se.stderr * np.sqrt(4000 / n) + 4 * se.stderr
    assert np.all(np.abs(qh - se.q_hat) < tol), (qh, se.q_hat, tol)


def test_two_layers_learn_both_layers(instance):
    """Below the end of learning both layers' errors fall from their start (1 + rho - rho = 1), layer 2
    (the last, seen more directly) faster, and the run reports why it stopped."""
    Ss, X, y, n = instance
    r = deep.deep_gamp_rie(X, y, RHOS, S_true=Ss, n_nodes=32, options=GampRieOptions(init="mean", max_iter=10))
    e = r.history.error
    assert e.shape == (10, 2) and r.n_iter == 10 and r.code is Status.MAX_ITER and r.status == "max_iter"
    assert np.all(e[-1] < 0.75 * e[0]) and e[-1, 1] < e[-1, 0]
    assert np.all(np.isfinite(r.history.nishimori_ratio)) and np.all(r.history.q_hat[:, [0, 1], [0, 1]] > 0)
    np.testing.assert_allclose(r.error, e[-1])


def test_a_collapse_is_confirmed_on_every_sample(instance, monkeypatch):
    """A Nishimori ratio at or above max_ratio on the first check_samples samples is computed again on
    all n: where all samples say the ratio is fine the run goes on as if nothing happened (same
    iterates), where they agree it stops as a collapse at that iteration."""
    Ss, X, y, n = instance
    opts = GampRieOptions(init="mean", max_iter=6)
    ref = deep.deep_gamp_rie(X, y, RHOS, S_true=Ss, n_nodes=16, check_samples=64, options=opts)
    real = dg._deep_output_half
    calls = []

    def noisy(*args, m, **kw):          # the subsample's ratio is huge at iteration 3; all samples' is
        out = real(*args, m=m, **kw)    # the real one (say=="fine") or huge too (say=="collapse")
        calls.append(m)
        it = calls.count(64)
        if (m == 64 and it == 3) or (m == n and say == "collapse"):
            return out[:4] + (jnp.full(2, 50.0),)
        return out

    monkeypatch.setattr(dg, "_deep_output_half", noisy)
    say = "fine"
    r = deep.deep_gamp_rie(X, y, RHOS, S_true=Ss, n_nodes=16, check_samples=64, options=opts)
    assert calls.count(n) == 1 and r.n_iter == ref.n_iter == 6 and r.code is ref.code
    np.testing.assert_array_equal(r.history.error, ref.history.error)
    # the iteration the subsample flagged records the ratio of every sample
    assert r.history.nishimori_ratio[2].max() < opts.max_ratio
    calls.clear()
    say = "collapse"
    r = deep.deep_gamp_rie(X, y, RHOS, S_true=Ss, n_nodes=16, check_samples=64, options=opts)
    assert r.code is Status.COLLAPSE and r.n_iter == 3 and r.diverged
    np.testing.assert_array_equal(r.history.error, ref.history.error[:3])  # the same iterates until then


def test_bad_input_is_refused(instance):
    Ss, X, y, n = instance
    with pytest.raises(ValueError, match="rhos must hold two"):
        deep.deep_gamp_rie(X, y, [0.5])
    with pytest.raises(ValueError, match="T = 2"):
        X3 = np.zeros((4, 3, 8))
        deep.deep_gamp_rie(X3, np.full((4, 3, 3), 1 / 3), RHOS)
    with pytest.raises(ValueError, match="c must be >= 1"):
        deep.deep_gamp_rie(X, y, RHOS, c=0.5)
    with pytest.raises(ValueError, match="n_nodes"):
        deep.deep_gamp_rie(X, y, RHOS, n_nodes=4)
    with pytest.raises(ValueError, match="log_outputs=True"):
        saturated = np.array(y)
        saturated[0, 0] = [1.0, 0.0]
        deep.deep_gamp_rie(X, saturated, RHOS)
    with pytest.raises(ValueError, match="shape"):
        deep.deep_gamp_rie(X, np.asarray(y)[:-1], RHOS)
    with pytest.raises(TypeError, match="GampRieOptions"):
        deep.deep_gamp_rie(X, y, RHOS, options={"max_iter": 3})
    with pytest.raises(ValueError, match="key"):
        deep.deep_gamp_rie(X, y, RHOS, options=GampRieOptions(init="prior"))
    with pytest.raises(ValueError, match="S_true"):
        deep.deep_gamp_rie(X, y, RHOS, S_true=[Ss[0]])


def test_log_outputs_give_the_same_run(instance):
    """Log-outputs (which keep what float64 probabilities lose once saturated) give the iterates of the
    probabilities where nothing is saturated."""
    Ss, X, y, n = instance
    opts = GampRieOptions(init="mean", max_iter=2)
    a = deep.deep_gamp_rie(X, y, RHOS, S_true=Ss, n_nodes=16, options=opts)
    b = deep.deep_gamp_rie(X, np.log(np.asarray(y)), RHOS, S_true=Ss, n_nodes=16, options=opts, log_outputs=True)
    np.testing.assert_allclose(a.history.error, b.history.error, rtol=1e-10)
    np.testing.assert_allclose(a.history.q_hat, b.history.q_hat, rtol=1e-10)
    with pytest.raises(ValueError, match="log-probabilities"):
        deep.deep_gamp_rie(X, y, RHOS, log_outputs=True)


def _script(name):
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[1] / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_deep_amp_script_writes_resumes_and_skips_done_runs(tmp_path):
    """The data script of chapter 7's finite-d test: a second part keeps the rows there, adds the new
    ones and its command; a rerun of a run gives its row again (the instance is named by d, x, seed)."""
    mod = _script("deep_amp_data")
    out = tmp_path / "deep.csv"
    args = ["--d", "16", "--x", "1.0", "--seeds", "1", "--n-nodes", "12", "--max-iter", "2", "--out", str(out)]
    mod.main(args)
    mod.main(args[:3] + ["1.2"] + args[3:])  # x = 1.0 kept, x = 1.2 added
    got = aim.datafiles.read(out)
    tab = got.table
    assert got.header["rows"] == 2 and len(got.header["commands"]) == 2 and list(tab["x"]) == [1.0, 1.2]
    assert set(tab["status"]) <= {s.name.lower() for s in Status} and np.all(tab["n_iter"] <= 2)
    row = mod.run(16, 1.0, 0, n_nodes=12, max_iter=2)
    assert row[mod.COLS.index("err1")] == pytest.approx(tab["err1"][0], rel=1e-5)
    # the state evolution's map at the run's last V, beside the algorithm's own q_hat
    assert np.all(tab["map_qh11"] > 0) and np.all(tab["map_se11"] > 0)


def test_deep_amp_script_redoes_the_runs_of_a_status(tmp_path):
    """--redo STATUS removes this part's runs that stopped so (the other rows byte for byte) and runs
    them again; the header says which and why."""
    mod = _script("deep_amp_data")
    out = tmp_path / "deep.csv"
    args = ["--d", "16", "--x", "1.0", "1.2", "--seeds", "1", "--n-nodes", "12", "--max-iter", "2", "--out", str(out)]
    mod.main(args)
    before = aim.datafiles.read(out).table
    lines = out.read_text().splitlines()
    status = str(before["status"][0])          # the first run's status, whatever it is: redo those
    mod.main(args[:4] + args[5:] + ["--redo", status])       # the part of x = 1.0 alone
    got = aim.datafiles.read(out)
    assert got.header["rows"] == 2 and list(got.table["x"]) == [1.2, 1.0]   # removed, then appended
    assert lines[-1] in out.read_text().splitlines()                         # x = 1.2 kept as it was
    assert got.table["err1"][1] == before["err1"][0]                          # the same run again
    assert any(n.startswith("removed to run again") and "d 16 x 1 seed 0" in n for n in got.header["notes"])
