"""An adversarial sweep over the public API: every bad input a clear error, no valid input NaN.

Each public function is called once with small valid arguments, then once for every
argument replaced by each bad value of that argument's kind (a NaN, an infinity, a value
out of range, a bool or a string for a number, a float for a size, a complex or
wrongly-shaped array, an unknown option, ...). A case is

- **clear** when it raises ``ValueError`` or ``TypeError`` whose message names the argument,
- **unclear** when it raises anything else, or a message that does not name the argument,
- **accepted** when it returns.

``test_sweep_*`` assert that at least 98 % of the cases are clear and none is accepted;
``python tests/test_hostile.py`` prints the counts by function. The valid extremes at the end
(huge and tiny noise, saturated softmax, spectral extremes) must return finite results.
"""

from __future__ import annotations

import collections
import math
import re
import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import aim_tutorial as aim
import aim_tutorial.reproduce  # noqa: F401  (aim.reproduce: the per-instance experiments)
from aim_tutorial import amp_device, deep, gd, replica, rmt_device

from aim_tutorial import state_evolution as se_module
from aim_tutorial.channels.causal import causal_softmax

D, T_, N = 8, 2, 12  # tiny sizes: every valid call takes milliseconds

# ----------------------------------------------------------------------------------------------
# bad values by kind of argument
# ----------------------------------------------------------------------------------------------

# (a 0-d boolean array is a bool too: np.asarray(flag) must not pass as the number 1)
_NOT_NUMBERS = [True, np.array(True), "1", None, 1 + 1j, [1.0]]


def _bad_positive():
    return [0.0, -1.0, math.nan, math.inf, -math.inf, *_NOT_NUMBERS]


def _bad_nonnegative():
    return [-1.0, -1e-300, math.nan, math.inf, -math.inf, *_NOT_NUMBERS]


def _bad_real():
    return [math.nan, math.inf, -math.inf, *_NOT_NUMBERS]


def _bad_int(low):
    return [low - 1, -1, 2.5, float(max(low, 1)), True, "3", None, math.nan]


def _bad_key():
    return [0, None, "key", 1.5, np.zeros(3)]


def _bad_choice():
    return ["no-such-option", 3, True, ""]


def _bad_array(good):
    """Bad versions of a valid float array ``good``: non-finite, complex, wrong rank, empty, junk."""
    g = np.array(good, dtype=float)
    out = []
    if g.size:
        for v in (np.nan, np.inf):
            b = g.copy()
            b.flat[0] = v
            out.append(b)
    out += [g + 1j, np.float64(1.0), np.zeros((0,) * max(g.ndim, 1)), "abc", None,
            g.astype(bool)]
    return out


def _bad_symmetric(good):
    g = np.array(good, dtype=float)
    b = g.copy()
    b[0, -1] += 1.0
    return _bad_array(good) + [b, g[:, :-1]]


def _bad_fraction():
    return [-0.1, 1.5, math.nan, math.inf, True, "0.5", None]


def _bad_layers(good_list):
    return [[], "layers", None, [np.full_like(np.asarray(good_list[0]), np.nan)]]


KINDS = {
    # a scalar or an array of them: a list [1.0] is a valid array
    "nonneg_or_array": lambda v: [x for x in _bad_nonnegative() if x != [1.0]],
    "pos_or_array": lambda v: [x for x in _bad_positive() if x != [1.0]],
    # points of any shape (a scalar and an empty array are valid)
    "points": lambda v: [b for b in _bad_array(v) if b is None or isinstance(b, str)
                         or np.ndim(b) != 0 and np.size(b) != 0],
    "pos": lambda v: _bad_positive(),
    "nonneg": lambda v: _bad_nonnegative(),
    "real": lambda v: _bad_real(),
    "int1": lambda v: _bad_int(1),
    "int2": lambda v: _bad_int(2),
    "int1_or_none": lambda v: [b for b in _bad_int(1) if b is not None],  # None: the default
    "int2_or_none": lambda v: [b for b in _bad_int(2) if b is not None],
    "key": lambda v: _bad_key(),
    "choice": lambda v: _bad_choice(),
    "array": _bad_array,
    "sym": _bad_symmetric,
    "fraction": lambda v: _bad_fraction(),
    "layers": _bad_layers,
    "bool": lambda v: [1, "yes", None, 0.5],
}

# ----------------------------------------------------------------------------------------------
# the public API with small valid arguments and the kind of each argument
# ----------------------------------------------------------------------------------------------


def _instance():
    k = jax.random.key(7)
    S = aim.sample_teacher(k, D, 0.5)
    X, y = aim.sample_data(jax.random.fold_in(k, 1), S, N, T_, channel="softmax")
    _, y_lin = aim.sample_data(jax.random.fold_in(k, 1), S, N, T_, channel="linear")
    _, y_hard = aim.sample_data(jax.random.fold_in(k, 1), S, N, T_, channel="hardmax")
    return k, np.asarray(S), np.asarray(X), np.asarray(y), np.asarray(y_lin), np.asarray(y_hard)


K, S0, X0, Y0, YLIN, YHARD = _instance()
H0 = np.asarray(aim.attention_indices(X0, S0))
W0 = np.asarray(jax.random.normal(jax.random.key(3), (D, 4)))
OMEGA = np.array([[0.3, 0.1], [0.1, -0.2]])
Q2 = np.array([[1.5, 0.5], [0.5, 1.5]])


# (label, function, valid kwargs, {argument: kind}); the valid call must succeed.
SPECS = [
    ("teacher_width", aim.teacher_width, dict(d=10, rho=0.5), {"d": "int1", "rho": "pos"}),
    ("sample_teacher", aim.sample_teacher, dict(key=K, d=D, rho=0.5), {"key": "key", "d": "int1", "rho": "pos"}),
    ("sample_tokens", aim.sample_tokens, dict(key=K, n=3, T=2, d=D),
     {"key": "key", "n": "int1", "T": "int1", "d": "int1"}),
    ("attention_indices", aim.attention_indices, dict(X=X0, S=S0), {"X": "array", "S": "sym"}),
    ("symmetric_noise", aim.symmetric_noise, dict(key=K, shape=(3, 2, 2), noise=0.5),
     {"key": "key", "noise": "nonneg"}),
    ("softmax", aim.softmax, dict(h=H0, beta=1.0), {"h": "array", "beta": "nonneg"}),
    ("hardmax", aim.hardmax, dict(h=H0), {"h": "array"}),
    ("causal_softmax", causal_softmax, dict(h=H0, beta=1.0), {"h": "array", "beta": "nonneg"}),
    ("apply_channel", aim.apply_channel, dict(h=H0, channel="softmax", beta=1.0),
     {"h": "array", "channel": "choice", "beta": "nonneg"}),
    ("deep_as_aim", aim.deep_as_aim, dict(hs=[H0, H0], beta=1.0, c=1.0),
     {"hs": "layers", "beta": "nonneg", "c": "real"}),
    ("deep_attention_literal", aim.deep_attention_literal, dict(X=X0, Ss=[S0, S0], beta=1.0, c=1.0),
     {"X": "array", "Ss": "layers", "beta": "nonneg", "c": "real"}),
    ("sample_data", aim.sample_data, dict(key=K, S=S0, n=5, T=2, channel="softmax", beta=1.0, noise=0.0),
     {"key": "key", "S": "sym", "n": "int1", "T": "int1", "channel": "choice", "beta": "pos",
      "noise": "nonneg", "label_noise": "nonneg", "log_outputs": "bool"}),
    ("sample_deep_data", aim.sample_deep_data, dict(key=K, S=[S0, S0], n=5, T=2, beta=1.0, c=1.0),
     {"key": "key", "S": "layers", "n": "int1", "T": "int1", "beta": "pos", "c": "real",
      "label_noise": "nonneg", "log_outputs": "bool"}),
    ("n_samples", aim.n_samples, dict(alpha=0.1, d=D), {"alpha": "pos", "d": "int1"}),
    ("make_instance", aim.make_instance, dict(key=K, d=D, rho=0.5, alpha=0.1, T=2),
     {"key": "key", "d": "int1", "rho": "pos", "alpha": "pos", "T": "int1", "channel": "choice",
      "beta": "pos", "noise": "nonneg", "label_noise": "nonneg", "log_outputs": "bool"}),
    # random matrices (chapter 2)
    ("marchenko_pastur_density", aim.marchenko_pastur_density, dict(x=np.linspace(0, 3, 5), rho=0.5),
     {"x": "points", "rho": "pos"}),
    ("semicircle_density", aim.semicircle_density, dict(x=np.linspace(-2, 2, 5), delta=1.0),
     {"x": "points", "delta": "pos"}),
    ("sample_goe", aim.sample_goe, dict(key=K, d=D), {"key": "key", "d": "int1"}),
    ("stieltjes", aim.stieltjes, dict(z=np.array([1.0 + 1j, 3.0]), delta=0.5, rho=0.5),
     {"delta": "pos", "rho": "pos"}),
    ("spectral_density", aim.spectral_density, dict(x=np.linspace(-1, 4, 5), delta=0.5, rho=0.5),
     {"x": "points", "delta": "pos", "rho": "pos"}),
    ("hilbert_transform", aim.hilbert_transform, dict(x=np.linspace(-1, 4, 5), delta=0.5, rho=0.5),
     {"x": "points", "delta": "pos", "rho": "pos"}),
    ("support_edges", aim.support_edges, dict(delta=0.5, rho=0.5), {"delta": "pos", "rho": "pos"}),
    ("spectral_integral", aim.spectral_integral, dict(delta=0.5, rho=0.5, power=3, rtol=1e-10),
     {"delta": "pos_or_array", "rho": "pos_or_array", "power": "int1", "rtol": "pos"}),
    ("mmse_denoising", aim.mmse_denoising, dict(delta=0.5, rho=0.5), {"delta": "pos_or_array", "rho": "pos_or_array"}),
    ("rie_eigenvalues", aim.rie_eigenvalues, dict(lam=np.linspace(-1, 4, 5), delta=0.5, rho=0.5),
     {"lam": "points", "delta": "pos", "rho": "pos"}),
    ("rie_denoise", aim.rie_denoise, dict(Y=S0, delta=0.5, rho=0.5), {"Y": "sym", "delta": "pos", "rho": "pos"}),
    # their JAX versions, for GAMP-RIE on the device
    ("rmt_device.mmse_denoising", rmt_device.mmse_denoising, dict(delta=0.5, rho=0.5), {"delta": "pos", "rho": "pos"}),
    ("rmt_device.rie_eigenvalues", rmt_device.rie_eigenvalues, dict(lam=np.linspace(-1, 4, 5), delta=0.5, rho=0.5),
     {"lam": "points", "delta": "pos", "rho": "pos", "outside": "choice"}),
    # the replica chapter (3)
    ("denoising_free_entropy", aim.denoising_free_entropy, dict(q_hat=2.0, rho=0.5, n_nodes=64),
     {"q_hat": "nonneg", "rho": "pos", "n_nodes": "int2"}),
    ("denoising_mutual_information", aim.denoising_mutual_information, dict(delta=0.5, rho=0.5, n_nodes=64),
     {"delta": "pos", "rho": "pos", "n_nodes": "int2"}),
    ("log_energy", replica.log_energy, dict(delta=0.5, rho=0.5, n_nodes=64),
     {"delta": "pos", "rho": "pos", "n_nodes": "int2"}),
    ("index_variances", replica.index_variances, dict(T=3), {"T": "int1"}),
    ("sample_equivalent_indices", aim.sample_equivalent_indices, dict(key=K, Q=Q2, n=4, T=2),
     {"key": "key", "Q": "sym", "n": "int1", "T": "int1"}),
    # state evolution (chapter 4)
    ("alpha_perfect_recovery", aim.alpha_perfect_recovery, dict(rho=0.5, T=2), {"rho": "pos", "T": "int2"}),
    ("q_hat_of", aim.q_hat_of, dict(alpha=0.5, q=0.5, rho=0.5, T=2, channel="softmax"),
     {"alpha": "nonneg_or_array", "q": "nonneg_or_array", "rho": "pos", "T": "int2", "channel": "choice", "beta": "pos",
      "noise": "nonneg", "score": "choice"}),
    ("free_entropy", aim.free_entropy, dict(alpha=0.5, q=0.5, q_hat=1.0, rho=0.5, T=2),
     {"alpha": "nonneg_or_array", "q": "nonneg_or_array", "q_hat": "nonneg_or_array", "rho": "pos", "T": "int2", "channel": "choice",
      "noise": "nonneg", "beta": "pos"}),
    ("state_evolution", aim.solve_state_evolution, dict(alpha=0.05, rho=0.5, T=2),
     {"alpha": "nonneg_or_array", "rho": "pos", "T": "int2", "channel": "choice", "beta": "pos", "noise": "nonneg",
      "score": "choice"}),
    ("perfect_recovery_threshold", aim.perfect_recovery_threshold, dict(rho=0.5, T=2),
     {"rho": "pos", "T": "int2", "channel": "choice", "beta": "pos", "noise": "nonneg"}),
    ("label_space_error", aim.label_space_error, dict(q=0.5, rho=0.5, T=2),
     {"q": "nonneg_or_array", "rho": "pos", "T": "int2", "channel": "choice", "beta": "pos", "noise": "nonneg"}),
    # channels
    ("output_score", aim.output_score, dict(channel="linear", y=YLIN[:3], omega=np.broadcast_to(OMEGA, (3, 2, 2)),
                                            V=0.5),
     {"channel": "choice", "y": "array", "omega": "array", "V": "pos", "noise": "nonneg"}),
    ("log_partition", aim.log_partition, dict(channel="linear", y=YLIN[:3],
                                              omega=np.broadcast_to(OMEGA, (3, 2, 2)), V=0.5),
     {"channel": "choice", "y": "array", "omega": "array", "V": "pos", "noise": "nonneg"}),
    # message passing (chapter 5)
    ("prior_input", aim.prior_input, dict(X=X0, Gamma=np.broadcast_to(OMEGA, (N, 2, 2))),
     {"X": "array", "Gamma": "array"}),
    ("gamp_rie_batch", amp_device.gamp_rie_batch,
     dict(X=np.stack([X0, X0]), y=np.stack([YLIN, YLIN]), rho=0.5, channel="linear",
          options=aim.amp.GampRieOptions(init="mean", max_iter=3)),
     {"X": "array", "y": "array", "rho": "pos", "channel": "choice", "beta": "pos", "noise": "nonneg",
      "log_outputs": "bool", "streams": "int1_or_none"}),
    ("gamp_rie", aim.gamp_rie, dict(X=X0, y=YLIN, rho=0.5, channel="linear", key=K, max_iter=3),
     {"X": "array", "y": "array", "rho": "pos", "channel": "choice", "noise": "nonneg", "key": "key",
      "init": "choice", "damping": "fraction", "max_iter": "int1", "tol": "pos", "score": "choice",
      "q_hat_from": "choice", "adaptive_damping": "bool"}),
    ("gamp_rie_start", aim.amp.gamp_rie_start, dict(X=X0, y=YLIN, rho=0.5, channel="linear", key=K),
     {"X": "array", "y": "array", "rho": "pos", "channel": "choice", "noise": "nonneg", "key": "key",
      "score": "choice", "log_outputs": "bool"}),
    ("amp_run", aim.reproduce.amp_run, dict(key=K, d=D, rho=0.5, alpha=0.3, T=2, max_iter=3),
     {"key": "key", "d": "int1", "rho": "pos", "alpha": "pos", "T": "int1", "channel": "choice",
      "max_iter": "int1", "damping": "fraction"}),
    ("amp_runs", aim.reproduce.amp_runs, dict(keys=[K, K], d=D, rho=0.5, alpha=0.3, T=2, batch=True, max_iter=3),
     {"d": "int1", "rho": "pos", "alpha": "pos", "T": "int1", "channel": "choice", "max_iter": "int1",
      "damping": "fraction"}),
    ("gd_data_set", aim.reproduce.gd_data_set, dict(key=K, d=D, rho=0.5, alpha=0.3, T=2, n_init=2, steps=2,
                                                     lr=0.1),
     {"key": "key", "d": "int1", "rho": "pos", "alpha": "pos", "T": "int1", "steps": "int1", "lr": "pos"}),
    ("iteration_memory", aim.amp.iteration_memory, dict(X=X0, y=YLIN, channel="linear"),
     {"X": "array", "y": "array", "channel": "choice", "beta": "pos", "noise": "nonneg"}),
    ("gamp_rie_state_evolution", aim.gamp_rie_state_evolution, dict(alpha=0.5, rho=0.5, T=2, n_iter=5),
     {"alpha": "nonneg", "rho": "pos", "T": "int2", "channel": "choice", "beta": "pos", "noise": "nonneg",
      "n_iter": "int1", "damping": "fraction", "score": "choice"}),
    # gradient descent (chapter 6)
    ("student_matrix", gd.student_matrix, dict(W=W0), {"W": "array"}),
    ("student_indices", gd.student_indices, dict(W=W0, X=X0), {"W": "array", "X": "array"}),
    ("gd_loss", gd.gd_loss, dict(W=W0, X=X0, y=Y0), {"W": "array", "X": "array", "y": "array",
                                                      "channel": "choice", "beta": "pos",
                                                      "weight_decay": "nonneg"}),
    ("averaged_errors", aim.averaged_errors, dict(S_students=np.stack([S0, S0]), S_true=S0),
     {"S_students": "array", "S_true": "sym"}),
    ("train_gd", aim.train_gd, dict(key=K, X=X0, y=Y0, rho=0.5, steps=4, lr=0.01),
     {"key": "key", "X": "array", "y": "array", "rho": "pos", "n_init": "int1", "steps": "int1", "lr": "pos",
      "channel": "choice", "beta": "pos", "optimizer": "choice", "weight_decay": "nonneg", "dtype": "choice"}),
    # deep attention (chapter 7)
    ("deep_alpha_count", deep.deep_alpha_count, dict(rhos=[0.5, 0.5], T=2), {"T": "int2"}),
    ("limit_overlap_matrix", deep.limit_overlap_matrix, dict(rhos=[0.5, 0.5]), {}),
    ("index_covariance", deep.index_covariance, dict(Q=Q2, T=2), {"Q": "sym", "T": "int2"}),
    ("sample_deep_teacher", deep.sample_deep_teacher, dict(key=K, d=D, rhos=[0.5, 0.5]),
     {"key": "key", "d": "int1"}),
    ("deep_output", deep.deep_output, dict(hs=[H0, H0], beta=1.0, c=1.0),
     {"hs": "layers", "beta": "nonneg", "c": "real"}),
    ("overlap_matrix", deep.overlap_matrix, dict(Ss=[S0, S0]), {"Ss": "layers"}),
    ("deep_student_output", deep.deep_student_output, dict(Ws=(W0, W0), X=X0, beta=1.0, c=1.0),
     {"X": "array", "beta": "nonneg", "c": "real"}),
    ("deep_loss", deep.deep_loss, dict(Ws=(W0, W0), X=X0, y=Y0), {"X": "array", "y": "array", "c": "real"}),
    ("observed_maps_to_indices", deep.observed_maps_to_indices,
     dict(P_maps=np.stack([Y0, Y0]), beta=1.0, c=1.0), {"P_maps": "array", "beta": "pos", "c": "real"}),
    ("deep_q_hat", deep.deep_q_hat, dict(key=K, alpha=0.5, q=np.eye(2) * 0.5, V=np.array([0.5, 0.5]),
                                         n_omega=16, n_inner=16),
     {"key": "key", "alpha": "nonneg", "q": "sym", "V": "array", "T": "int2", "beta": "nonneg", "c": "real",
      "n_omega": "int1", "n_inner": "int1", "n_nodes": "int2_or_none"}),
    ("upper_triangle", replica.upper_triangle, dict(h=H0), {"h": "array"}),
    ("psi_denoising", se_module.psi_denoising, dict(q_hat=2.0, rho=0.5),
     {"q_hat": "nonneg_or_array", "rho": "pos"}),
    ("symmetric_gradient", aim.symmetric_gradient, dict(f=lambda w: jnp.sum(w**2), omega=OMEGA),
     {"omega": "array"}),
    ("generic_output_score", aim.generic_output_score,
     dict(key=K, g=lambda h: jax.nn.softmax(h, axis=-1), y=Y0[:3], omega=np.broadcast_to(OMEGA, (3, 2, 2)),
          V=0.5, label_noise=0.1, n_samples=64),
     {"key": "key", "y": "array", "omega": "array", "V": "pos", "label_noise": "pos", "n_samples": "int2"}),
    ("elementwise_channel", aim.elementwise_channel, dict(f=jnp.arcsinh, label_noise=0.0),
     {"label_noise": "nonneg"}),
    ("train_deep_gd", aim.train_deep_gd, dict(key=K, X=X0, y=Y0, rhos=[0.5, 0.5], steps=4, lr=0.01),
     {"key": "key", "X": "array", "y": "array", "n_init": "int1", "steps": "int1", "lr": "pos",
      "beta": "nonneg", "c": "real", "dtype": "choice"}),
]

# the lists of widths are checked element by element
for _label, _fn, _kw, _kinds in SPECS:
    if "rhos" in _kw:
        _kinds["rhos"] = "rhos"
KINDS["rhos"] = lambda v: [[], [0.5, -1.0], [0.5, math.nan], [True, 0.5], ["0.5", 0.5], None, "0.5"]


def _cases():
    for label, fn, kw, kinds in SPECS:
        for arg, kind in kinds.items():
            for i, bad in enumerate(KINDS[kind](kw.get(arg))):
                yield label, fn, kw, arg, bad, i


CASES = list(_cases())


def classify(fn, kw, arg, bad):
    """'clear', 'unclear: ...' or 'accepted' for ``fn(**kw)`` with ``kw[arg] = bad``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fn(**{**kw, arg: bad})
        except (ValueError, TypeError) as e:
            msg = str(e)
            if re.search(rf"(?<![\w.]){re.escape(arg)}(?!\w)", msg):
                return "clear"
            return f"unclear: {type(e).__name__}: {msg[:120]}"
        except Exception as e:  # noqa: BLE001 - classified, not hidden
            return f"unclear: {type(e).__name__}: {str(e)[:120]}"
    return "accepted"


@pytest.mark.parametrize("label, fn, kw", [(s[0], s[1], s[2]) for s in SPECS], ids=[s[0] for s in SPECS])
def test_valid_call_succeeds(label, fn, kw):
    out = fn(**kw)
    leaves = [x for x in jax.tree_util.tree_leaves(out) if isinstance(x, (float, np.ndarray, jax.Array))
              and not jax.dtypes.issubdtype(x.dtype if hasattr(x, "dtype") else float, jax.dtypes.prng_key)]
    for x in leaves:
        if np.issubdtype(np.asarray(x).dtype, np.floating):
            assert label in _MAY_NAN or np.all(np.isfinite(np.asarray(x))), label


# results that legitimately hold NaN entries (e.g. history of steps not run)
_MAY_NAN = {"gamp_rie", "gamp_rie_batch", "amp_runs", "train_gd", "train_deep_gd", "gamp_rie_state_evolution", "gamp_rie_start"}


def _module(fn) -> str:
    return getattr(fn, "__module__", "?").removeprefix("aim_tutorial.")


def sweep(module=None):
    """Every case (or those of the functions of ``module``): the counts per label and the
    failures ``(label, argument, bad value, verdict, module)``."""
    results = collections.defaultdict(collections.Counter)
    failures = []
    for label, fn, kw, arg, bad, _i in CASES:
        if module is not None and _module(fn) != module:
            continue
        r = classify(fn, kw, arg, bad)
        results[label]["clear" if r == "clear" else r.split(":")[0]] += 1
        if r != "clear":
            failures.append((label, arg, " ".join(repr(bad).split())[:60], r, _module(fn)))
    return results, failures


_SWEEP = None


def _sweep_once():
    global _SWEEP
    if _SWEEP is None:
        _SWEEP = sweep()
    return _SWEEP


_MODULES = sorted({_module(s[1]) for s in SPECS})


@pytest.mark.parametrize("module", _MODULES)
def test_module_refuses_bad_input(module):
    """The sweep restricted to the functions of one module: no bad input accepted. The mutation
    tests of a module (scripts/mutation.py) run this one (a loosened argument check is a mutant
    that only such a test kills) instead of the whole sweep; after the whole sweep has run in
    this process, its results are filtered instead of classified again."""
    _, failures = _SWEEP if _SWEEP is not None else sweep(module)
    accepted = [f[:3] for f in failures if f[3] == "accepted" and f[4] == module]
    assert not accepted, "\n".join(map(str, accepted))


def test_sweep_has_at_least_1000_cases():
    assert len(CASES) >= 1000, len(CASES)


def test_sweep_no_bad_input_is_accepted():
    _, failures = _sweep_once()
    accepted = [f for f in failures if f[3] == "accepted"]
    assert not accepted, "\n".join(map(str, accepted))


def test_sweep_at_least_98_percent_clear():
    results, failures = _sweep_once()
    clear = sum(c["clear"] for c in results.values())
    assert clear >= 0.98 * len(CASES), f"{clear}/{len(CASES)} clear; first failures:\n" + "\n".join(
        map(str, failures[:40]))


# ----------------------------------------------------------------------------------------------
# valid extremes: finite and right (each was NaN, an exception or wildly wrong before)
# ----------------------------------------------------------------------------------------------


def _rie_error_at_huge_noise():
    k1, k2 = jax.random.split(jax.random.key(0))
    S = np.asarray(aim.sample_teacher(k1, 40, 0.5))
    Y = S + 1e3 * np.asarray(aim.sample_goe(k2, 40))  # delta = 1e6
    return float(np.sum((aim.rie_denoise(Y, 1e6, 0.5) - S) ** 2) / 40)  # MMSE ~ 1 (was 1381)


def _gamp_at_beta(beta):
    k1, k2 = jax.random.split(jax.random.key(1))
    S = aim.sample_teacher(k1, 20, 0.5)
    X, logy = aim.sample_data(k2, S, 60, 2, beta=beta, log_outputs=True)
    return aim.gamp_rie(X, logy, 0.5, beta=beta, init="mean", S_true=S, max_iter=10,
                        log_outputs=True).error


def _se(alpha, **kw):
    r = aim.solve_state_evolution(alpha, kw.pop("rho", 0.5), **kw)
    assert r.converged, r.status
    return r.mmse


EXTREMES = [
    ("rie_denoise at delta = 1e6, d = 40", _rie_error_at_huge_noise, (0.5, 2.0)),
    ("gamp_rie on softmax log-outputs at beta = 300", lambda: _gamp_at_beta(300.0), (0.0, 1.5)),
    ("solve_state_evolution, noise 1e-12, alpha = 1", lambda: _se(1.0, noise=1e-12), (0.0, 1e-10)),
    ("solve_state_evolution, noise 1e-13, alpha = 0.2", lambda: _se(0.2, noise=1e-13), (0.0, 1.5)),
    ("solve_state_evolution, noise 1e-9, alpha = 1e3", lambda: _se(1e3, noise=1e-9), (0.0, 1e-8)),
    ("solve_state_evolution, hardmax, rho = 1e-4, alpha = 55",
     lambda: _se(55.0, rho=1e-4, T=2, channel="hardmax"), (0.0, 1e-10)),
    ("mmse_denoising(1e300)", lambda: aim.mmse_denoising(1e300, 0.5), (1 - 1e-12, 1.0)),
    ("support_edges(1e300)", lambda: aim.support_edges(1e300, 0.5)[-1][1], (0.0, math.inf)),
    ("support_edges(1e-300)", lambda: aim.support_edges(1e-300, 0.5)[-1][1], (0.0, 10.0)),
    ("stieltjes(1e250)", lambda: abs(aim.stieltjes(1e250, 0.5, 0.5)) * 1e250, (1 - 1e-12, 1 + 1e-12)),
    ("hilbert_transform(1e250)", lambda: aim.hilbert_transform(1e250, 0.5, 0.5) * 1e250, (1 - 1e-12, 1 + 1e-12)),
    ("rie_eigenvalues(1e250)", lambda: aim.rie_eigenvalues(1e250, 0.5, 0.5), (0.0, 10.0)),
    ("denoising_mutual_information where the intervals merge",
     lambda: aim.denoising_mutual_information(0.01, 0.5569237092 * (1 + 1e-3)), (0.0, math.inf)),
    ("label_space_error at q = Q0, hardmax", lambda: aim.label_space_error(1.5, 0.5, 2, channel="hardmax"), (0.0, 0.0)),
    ("gamp_rie_state_evolution, hardmax, defaults",
     lambda: aim.gamp_rie_state_evolution(0.5, 0.5, channel="hardmax").mmse[-1], (0.0, 1.5)),
]


@pytest.mark.parametrize("label, compute, bounds", EXTREMES, ids=[e[0] for e in EXTREMES])
def test_valid_extremes_are_finite_and_in_range(label, compute, bounds):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no silent overflow or invalid value
        v = float(compute())
    assert math.isfinite(v) and bounds[0] <= v <= bounds[1], (label, v)



# ----------------------------------------------------------------------------------------------
# the last hostile inputs (issue 50): no silent wrong answer
# ----------------------------------------------------------------------------------------------

_KEY_USERS = [
    ("sample_teacher", lambda k: aim.sample_teacher(k, D, 0.5)),
    ("sample_tokens", lambda k: aim.sample_tokens(k, 3, 2, D)),
    ("symmetric_noise", lambda k: aim.symmetric_noise(k, (3, 2, 2), 0.5)),
    ("sample_goe", lambda k: aim.sample_goe(k, D)),
    ("sample_data", lambda k: aim.sample_data(k, S0, 5, 2)),
    ("sample_deep_data", lambda k: aim.sample_deep_data(k, [S0, S0], 5, 2)),
    ("make_instance", lambda k: aim.make_instance(k, D, 0.5, 0.1, 2)),
    ("sample_deep_teacher", lambda k: deep.sample_deep_teacher(k, D, [0.5, 0.5])),
    ("sample_equivalent_indices", lambda k: aim.sample_equivalent_indices(k, Q2, 4, 2)),
    ("label_space_error", lambda k: aim.label_space_error(0.5, 0.5, 3, key=k)),
    ("generic_output_score", lambda k: aim.generic_output_score(
        k, jnp.tanh, YLIN[:3], np.broadcast_to(OMEGA, (3, 2, 2)), 0.5, label_noise=0.1, n_samples=64)),
    ("train_gd", lambda k: aim.train_gd(k, X0, Y0, 0.5, steps=2, lr=0.01)),
    ("gamp_rie", lambda k: aim.gamp_rie(X0, YLIN, 0.5, channel="linear", key=k, max_iter=2)),
]


@pytest.mark.parametrize("label, call", _KEY_USERS, ids=[u[0] for u in _KEY_USERS])
def test_a_batch_of_keys_where_one_is_expected_is_refused_by_name(label, call):
    """jax.random's own error ("normal accepts a single key") named neither the argument nor the
    function; a batch of new-style or raw keys is now refused as the argument ``key``."""
    for batch in (jax.random.split(K, 3), jax.random.split(jax.random.PRNGKey(0), 3)):
        with pytest.raises(ValueError, match=r"key must be one JAX random key, got a batch of keys of shape \(3,\)"):
            call(batch)


@pytest.mark.parametrize("bad", [3, None, "key", 1.5, np.zeros(2), np.zeros(2, np.uint32), jnp.zeros(3, jnp.uint32),
                                 jnp.zeros(2, jnp.float32)], ids=repr)
def test_sample_equivalent_indices_refuses_a_malformed_key_by_name(bad):
    with pytest.raises(TypeError, match=r"^key must be a JAX random key"):
        aim.sample_equivalent_indices(bad, Q2, 4, 2)


class _Unhashable:
    __hash__ = None

    def __call__(self, h):
        return h


_BAD_G = {
    "NaN": lambda h: h * jnp.nan,
    "partly NaN": lambda h: jnp.where(h > 1.0, jnp.nan, h),
    "inf": lambda h: h * jnp.inf,
    "scalar": jnp.sum,
    "wrong shape": lambda h: h[0],
    "(3, 3)": lambda h: jnp.zeros((3, 3)),
    "a list": lambda h: [h],
    "complex": lambda h: h + 1j,
    "unhashable": _Unhashable(),
    "NumPy inside": lambda h: np.asarray(h),
    "raises": lambda h: 1 / 0,
}


@pytest.mark.parametrize("which", list(_BAD_G))
def test_a_bad_output_function_is_refused_by_name(which):
    g = _BAD_G[which]
    with pytest.raises((ValueError, TypeError), match=r"^g must"):
        aim.generic_state_evolution(K, 0.2, 0.5, g, label_noise=0.5, n_omega=64, n_zeta=64, n_m=4)
    with pytest.raises((ValueError, TypeError), match=r"^g must"):
        aim.generic_output_score(K, g, YLIN[:3], np.broadcast_to(OMEGA, (3, 2, 2)), 0.5, label_noise=0.1,
                                 n_samples=64)


_BAD_F = {
    "NaN": lambda w: jnp.sum(w) * jnp.nan,
    "not a scalar": lambda w: w,
    "unhashable, not a scalar": _Unhashable(),
    "a list": lambda w: [jnp.sum(w)],
    "integer": lambda w: jnp.sum(w).astype(jnp.int32),
    "complex": lambda w: jnp.sum(w) + 1j,
    "NumPy inside": lambda w: np.sum(np.asarray(w)),
    "raises": lambda w: 1 / 0,
    "kink": lambda w: jnp.sum(jnp.sqrt(jnp.abs(w - OMEGA))),  # infinite derivative at omega
}


@pytest.mark.parametrize("which", list(_BAD_F))
def test_symmetric_gradient_refuses_a_bad_function_by_name(which):
    with pytest.raises((ValueError, TypeError), match=r"^f must"):
        aim.symmetric_gradient(_BAD_F[which], OMEGA)


def test_integer_outputs_of_g_are_a_valid_channel():
    """A g with integer values (a quantiser) is a channel like any other: y = g(h) + noise is real."""
    r = aim.generic_state_evolution(K, 0.2, 0.5, lambda h: jnp.round(h).astype(jnp.int32), label_noise=0.5,
                                    n_omega=64, n_zeta=64, n_m=4)
    assert np.all(np.isfinite(r.mmse))


def test_array_likes_are_converted_as_documented():
    """Lists (and integer arrays) are converted to arrays, with the result of the same array: the
    conversion each docstring states, not a silent difference."""
    f = lambda w: jnp.sum(w**3)  # noqa: E731
    om_int = np.array([[1, 0], [0, 2]])
    np.testing.assert_array_equal(aim.symmetric_gradient(f, om_int), aim.symmetric_gradient(f, om_int.astype(float)))
    np.testing.assert_array_equal(aim.symmetric_gradient(f, OMEGA.tolist()), aim.symmetric_gradient(f, OMEGA))
    assert aim.symmetric_gradient(f, om_int).dtype == jnp.float64
    G = np.broadcast_to(OMEGA, (N, 2, 2))
    np.testing.assert_array_equal(aim.prior_input(X0.tolist(), G.tolist()), aim.prior_input(X0, G))
    np.testing.assert_array_equal(aim.deep_attention_literal(X0.tolist(), [S0, S0]),
                                  aim.deep_attention_literal(X0, [S0, S0]))
    S_st = np.stack([S0, S0 + 0.1])
    np.testing.assert_array_equal(aim.averaged_errors(S_st, S0.tolist()), aim.averaged_errors(S_st, S0))
    np.testing.assert_array_equal(deep.deep_output([H0, 2 * H0], 1.0, 1.0), deep.deep_output(np.stack([H0, 2 * H0]),
                                                                                              1.0, 1.0))


def test_spectral_integral_refuses_an_rtol_below_the_rounding_floor():
    """Each panel is accepted within 1e-14 of its value (the rounding of its sums): rtol = 1e-13 to 1e-300
    gave the same value to the last bit, so an rtol below 1e-14 claimed an accuracy nothing reaches."""
    for bad in (1e-300, 1e-15, 9.9e-15):
        with pytest.raises(ValueError, match=r"rtol must be in \[1e-14, 1\)"):
            aim.spectral_integral(0.5, 0.5, rtol=bad)
    assert aim.spectral_integral(0.5, 0.5, rtol=1e-14) == pytest.approx(aim.spectral_integral(0.5, 0.5), rel=1e-13)


def test_q_hat_of_at_the_prior_overlap_is_its_limit():
    """At q = Q0 with no noise q_hat = inf (exact measurements: the limit q -> Q0, documented), a
    finite q_hat just below grows like 1/(Q0 - q); a tiny (subnormal) noise gives a large finite q_hat,
    not the 0 the hardmax table gave once q / V' overflowed; q > Q0 is refused by name."""
    for ch in ("softmax", "linear", "hardmax"):
        assert aim.q_hat_of(0.5, 1.5, 0.5, channel=ch) == math.inf
        below = [aim.q_hat_of(0.5, 1.5 - e, 0.5, channel=ch) for e in (1e-3, 1e-6, 1e-9)]
        assert np.all(np.isfinite(below)) and np.all(np.diff(below) > 0), (ch, below)
        with pytest.raises(ValueError, match=r"^q must be in \[0, Q0\]"):
            aim.q_hat_of(0.5, 1.5 + 1e-9, 0.5, channel=ch)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        hm = [aim.q_hat_of(0.5, 1.5, 0.5, channel="hardmax", noise=v) for v in (1e-300, 1e-307, 1e-308, 1e-310)]
        err = aim.label_space_error(1.5, 0.5, 2, channel="hardmax", noise=1e-310)
    # H ~ (q V')^{-1/2} on the table's tail: q_hat grows as the noise shrinks, without a jump at 2e-308
    assert np.all(np.isfinite(hm)) and np.all(np.diff(hm) > 0), hm
    assert hm[3] / hm[0] == pytest.approx(math.sqrt(1e10), rel=1e-2)
    assert err == 0.0


def test_rie_far_outside_the_support():
    """The default cleans an eigenvalue far outside the support to its edge's value (the posterior
    mean's spectrum lies within the prior's; documented); the continuation tends to lambda, with no
    cancellation: lambda - 2 delta / (lambda - sqrt(rho)) to rounding."""
    delta, rho = 0.5, 0.5
    (a, b), = aim.support_edges(delta, rho)
    lam = np.array([-1e8, 1e3, 1e8, 1e15, 1e300])
    xi_a, xi_b = aim.rie_eigenvalues(np.array([a, b]), delta, rho)
    np.testing.assert_array_equal(aim.rie_eigenvalues(lam, delta, rho), [xi_a, xi_b, xi_b, xi_b, xi_b])
    cont = aim.rie_eigenvalues(lam, delta, rho, outside="continuation")
    u = 1 / (lam - math.sqrt(rho))
    far = lam - 2 * delta * (u + (1 + delta) * u**3)  # h = 1/w + (1 + delta)/w^3 + O(w^-4): 1e-15 at 1e3
    np.testing.assert_allclose(cont, far, rtol=1e-14)
    assert aim.rie_eigenvalues(1e300, delta, rho, outside="continuation") == 1e300


def _gamp_cases():
    kS, kX, kI = jax.random.split(jax.random.key(0), 3)
    S = aim.sample_teacher(kS, 60, 0.5)
    X, y = aim.sample_data(kX, S, aim.n_samples(0.1, 60), 2)
    return kI, S, X, y


@pytest.mark.slow
def test_gamp_rie_flags_a_run_whose_predicted_error_it_cannot_vouch_for():
    """d = 60, alpha = 0.1, softmax: the normal run passes its self-checks (Nishimori ratio 1.03);
    integer tokens converge with a predicted error of 0.23 and an actual one of 0.76 (the tokens' mean
    square entry is 1.09, 13 standard errors from 1); a prior rho = 1e-4 on rho = 0.5 data converges with
    a predicted error of 9e-5 and an actual one of 1.35 (ratio 2.6). The last two are flagged."""
    kI, S, X, y = _gamp_cases()
    ok = aim.gamp_rie(X, y, 0.5, key=kI, S_true=S)
    assert ok.converged and ok.consistent and ok.consistency.startswith("consistent"), ok.consistency
    for bad in (aim.gamp_rie(np.round(np.asarray(X)), y, 0.5, key=kI, S_true=S),
                aim.gamp_rie(X, y, 1e-4, key=kI, S_true=S)):
        assert bad.converged and bad.error > 3 * bad.mmse_pred  # the account that was silently wrong
        assert not bad.consistent and "not to be trusted" in bad.consistency, bad.consistency


if __name__ == "__main__":
    res, fails = sweep()
    total = collections.Counter()
    for label, c in sorted(res.items()):
        total.update(c)
        print(f"{label:32s} " + "  ".join(f"{k} {v}" for k, v in sorted(c.items())))
    n = sum(total.values())
    print(f"\n{n} bad inputs: " + ", ".join(f"{k} {v} ({100 * v / n:.1f} %)" for k, v in sorted(total.items())))
    for f in fails:
        print(*f, sep=" | ", file=sys.stderr)
