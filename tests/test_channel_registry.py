"""Identity tests of every output channel, parametrised over the registry.

A channel registered in aim_tutorial.channels (and the user-defined examples below)
gets these for free:

- the score is the symmetric gradient of log Z_out (central finite differences);
- the Nishimori identity E[g_ab^2] = -E[d g_ab / d omega_ab] on samples of the model;
- sampler, score and state evolution agree: 2 E[2 sum_a g_aa^2 + sum_{a<b} g_ab^2] over
  samples drawn by the channel's own sampler is the state evolution's q_hat / alpha;
- free-entropy stationarity: d E log Z_out / dq = (q_hat / alpha) / 4, eq. (rep-se).

Monte Carlo tolerances are 4 standard errors of the measured spread; deterministic
ones come from the quadrature's stated accuracy.
"""

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import aim_tutorial as aim
from aim_tutorial import channels as chs

USER = {
    "clip": aim.elementwise_channel(lambda h: jnp.clip(h, -0.5, 1.0), name="clip"),
    # a small quadrature (24 panels, 201 points in y): the identities, not the accuracy, are
    # tested here (tests/test_elementwise.py tests the accuracy)
    "tanh+noise": aim.elementwise_channel(jnp.tanh, label_noise=0.05, name="tanh+noise", nodes=(24, 201)),
}
# Monte Carlo channels, one per seed of their draws (small sizes: Monte Carlo tolerances)
N_OMEGA_MC = 256  # the draws of their state-evolution averages
_SOFTMAX = partial(aim.softmax, beta=1.0)  # one function object: one compilation for every seed
MC = {"generic": lambda seed: aim.generic_channel(_SOFTMAX, label_noise=0.2,
                                                  n_samples=1024, n_omega=N_OMEGA_MC, seed=seed)}
USER.update({name: make(0) for name, make in MC.items()})
CHANNELS = list(chs.registered()) + list(USER)
T_OF = {"hardmax": 2, "generic": 2}


def _channel(name):
    return USER.get(name) or chs.get(name)


def _draw(key, ch, n, T, q, V, beta):
    k1, k2, k3 = jax.random.split(key, 3)
    omega = math.sqrt(q) * chs.symmetric_gaussian(k1, (n, T, T))
    h = omega + math.sqrt(V) * chs.symmetric_gaussian(k2, (n, T, T))
    return omega, ch.draw(k3, h, beta)


def test_registry_names_and_errors():
    assert set(chs.registered()) >= {"softmax", "linear", "hardmax", "relu", "sigmoid"}
    for name in chs.registered():
        assert chs.get(name).name == name
        assert chs.get(chs.get(name)) is chs.get(name)
    with pytest.raises(ValueError, match=r"channel must be one of .*'relu'.*got 'nope'"):
        aim.solve_state_evolution(0.1, 0.5, channel="nope")
    with pytest.raises(ValueError, match="channel must be one of"):
        aim.output_score("nope", np.zeros((2, 2)), np.zeros((2, 2)), 1.0)
    with pytest.raises(TypeError, match="channel must be"):
        chs.get(3.0)
    with pytest.raises(ValueError, match="already registered"):
        chs.register(chs.Channel(**{**chs.get("linear").__dict__}))
    # gradient descent refuses the hardmax (not differentiable), with a message naming it
    with pytest.raises(ValueError, match=r"channel.*'hardmax'"):
        aim.train_gd(jax.random.key(0), np.zeros((4, 2, 3)), np.zeros((4, 2, 2)), 0.5, channel="hardmax")


def test_a_channel_declares_its_output_check(key):
    """Channel.check_outputs: a new channel says which y it can output; output_score, log_partition and
    gamp_rie call it (the registered channels' checks are tested in tests/test_channels.py)."""
    import dataclasses

    def nonnegative(name, y, beta, log_outputs):
        if np.any(np.asarray(y) < 0):
            raise ValueError(f"{name} must be >= 0 for this channel")

    pos = dataclasses.replace(chs.get("linear"), name="linear>=0", check_outputs=nonnegative)
    y = np.abs(np.asarray(chs.symmetric_gaussian(key, (5, 2, 2))))
    w = np.zeros((5, 2, 2))
    aim.output_score(pos, y, w, 1.0)
    for bad in (lambda: aim.output_score(pos, -y, w, 1.0), lambda: aim.log_partition(pos, -y, w, 1.0),
                lambda: aim.gamp_rie(np.ones((5, 2, 3)), -y, 0.5, channel=pos, init="mean")):
        with pytest.raises(ValueError, match="y must be >= 0 for this channel"):
            bad()
    with pytest.raises(ValueError, match="log_outputs"):  # no log_score: no log-outputs
        aim.output_score(pos, y, w, 1.0, log_outputs=True)


@pytest.mark.slow
@pytest.mark.parametrize("name", CHANNELS)
def test_score_is_the_gradient_of_log_partition(key, name):
    ch = _channel(name)
    T = T_OF.get(name, 3)
    beta, V, noise = 1.3, 0.4, 0.1
    omega, y = _draw(key, ch, 6, T, 0.8, V + noise / 2, beta)
    eps = 1e-5

    def gaps(ch):
        """Finite differences of log Z_out minus the score, entry by entry, shape (T(T+1)/2, n)."""
        G = np.asarray(aim.output_score(ch, y, omega, V, beta=beta, noise=noise))
        np.testing.assert_allclose(G, np.swapaxes(G, -1, -2), atol=0)
        out = []
        for a in range(T):
            for b in range(a, T):
                E = np.zeros((T, T))
                E[a, b] = E[b, a] = 1.0
                up = aim.log_partition(ch, y, omega + eps * E, V, beta=beta, noise=noise)
                dn = aim.log_partition(ch, y, omega - eps * E, V, beta=beta, noise=noise)
                fd = np.asarray(up - dn) / (2 * eps)  # derivative along E_ab + E_ba: 2 Gamma_ab (a < b)
                want = G[:, a, b] * (1 if a == b else 2)
                out.append((fd - want, 1e-6 * (1 + np.abs(want))))
        return out

    if name not in MC:
        for k, (gap, tol) in enumerate(gaps(ch)):
            assert np.all(np.abs(gap) <= tol), f"{name} entry {k}: {gap}"
    else:
        # the Monte Carlo score (integration by parts over the prior draws) and the gradient of
        # the Monte Carlo log Z_out are two estimates of one gradient: over 8 seeds of the
        # draws their gap averages to zero within 4 standard errors
        per_seed = np.array([[gap for gap, _ in gaps(MC[name](seed))] for seed in range(8)])
        mean, sem = per_seed.mean(axis=0), per_seed.std(axis=0, ddof=1) / math.sqrt(8)
        assert np.all(np.abs(mean) < 4 * sem), (mean, sem)


def _moments(ch, key, T, q, Vp, beta, n=40_000):
    """Per sample: 2 [2 sum g_aa^2 + sum_{a<b} g_ab^2] and its Nishimori partner -2 [2 sum dg_aa + sum dg_ab]."""
    omega, y = _draw(key, ch, n, T, q, Vp, beta)

    def score(w):
        return ch.score(y, w, Vp, beta, "exact")

    # jitted: op by op, the score and its three derivatives took 41 s with label noise (8 s jitted)
    score_jvp = jax.jit(lambda w, e: jax.jvp(score, (w,), (e,)))
    iu, ju = np.triu_indices(T)
    sq = np.zeros(n)
    der = np.zeros(n)
    for a, b in zip(iu, ju):
        E = np.zeros((T, T))
        E[a, b] = E[b, a] = 1.0
        G, dG = score_jvp(omega, jnp.broadcast_to(E, omega.shape))
        if a == b:
            sq += 4 * np.asarray(G[:, a, a]) ** 2
            der += -4 * np.asarray(dG[:, a, a])
        else:  # g_ab = 2 Gamma_ab, and the derivative along E_ab + E_ba is d g_ab / d omega_ab
            sq += 2 * (2 * np.asarray(G[:, a, b])) ** 2
            der += -2 * 2 * np.asarray(dG[:, a, b])
    return sq, der


@pytest.mark.slow
@pytest.mark.parametrize("name", CHANNELS)
def test_nishimori_and_sampler_agree_with_state_evolution(key, name):
    ch = _channel(name)
    T = 2  # T = 3 is covered by the gradient test; here the sampler, score and SE agree
    beta, q, Vp = 1.3, 0.9, 0.6
    sq, der = _moments(ch, key, T, q, Vp, beta, n=16_000 if ch.label_noise == 0 else 8_000)
    ok = np.isfinite(sq) & np.isfinite(der)
    assert ok.mean() == 1.0, f"{name}: non-finite scores on the model's own samples"
    se = 4 * np.std(sq - der) / math.sqrt(sq.size)
    assert abs(sq.mean() - der.mean()) < se, f"{name}: Nishimori {sq.mean()} vs {der.mean()} (4 s.e. {se})"
    H = float(ch.se_H(np.asarray(q), np.asarray(Vp), T, beta, "exact"))
    # 4 standard errors (for a Monte Carlo channel, of both averages: its own over N_OMEGA_MC draws)
    se_h = 4 * np.std(sq) * math.sqrt(1 / sq.size + (1 / N_OMEGA_MC if name in MC else 0.0))
    assert abs(sq.mean() - H) < se_h, f"{name}: sampler + score {sq.mean()} vs state evolution {H} (4 s.e. {se_h})"


@pytest.mark.slow
@pytest.mark.parametrize("name", CHANNELS)
def test_free_entropy_stationarity(name):
    ch = _channel(name)
    T = T_OF.get(name, 2 if name == "tanh+noise" else 3)
    beta, rho, noise = 1.3, 0.5, 0.2
    Q0 = 1 + rho

    def gap(ch, q, e=1e-4):
        """d E log Z_out / dq (central differences along q + V' = Q0 + noise/2) and (q_hat / alpha) / 4."""
        dE = (ch.se_ElogZ(np.asarray(q + e), np.asarray(Q0 - q - e + noise / 2), T, beta)
              - ch.se_ElogZ(np.asarray(q - e), np.asarray(Q0 - q + e + noise / 2), T, beta)) / (2 * e)
        return float(dE), float(ch.se_H(np.asarray(q), np.asarray(Q0 - q + noise / 2), T, beta, "exact")) / 4

    for q in (0.3, 0.9, 1.3):
        if name in MC:  # two Monte Carlo estimates: their gap over 8 seeds, within 4 standard errors
            g = np.array([np.subtract(*gap(MC[name](seed), q)) for seed in range(8)])
            assert abs(g.mean()) < 4 * g.std(ddof=1) / math.sqrt(8), (q, g)
            continue
        dE, H4 = gap(ch, q)
        # hardmax: interpolated tables (3e-4); tanh+noise: its small test quadrature, 24 panels
        # x 201 points, measured off by 2e-8 at q = 1.3 (the central difference: ~1e-9)
        rtol = {"hardmax": 3e-4, "tanh+noise": 1e-7}.get(name, 1e-6)
        assert dE == pytest.approx(H4, rel=rtol), f"{name} at q = {q}"


@pytest.mark.slow
@pytest.mark.parametrize("name", CHANNELS)
def test_every_algorithm_runs(key, name):
    """The sampler, the state evolution, the free entropy, GAMP-RIE and (if differentiable) gradient descent."""
    ch = _channel(name)
    T, d, rho = T_OF.get(name, 2), 20, 0.5
    S = aim.sample_teacher(jax.random.key(1), d, rho)
    X, y = aim.sample_data(jax.random.key(2), S, n=int(0.3 * d * d), T=T, channel=ch, beta=1.0)
    se = aim.solve_state_evolution(0.3, rho, T=T, channel=ch)
    assert se.converged and 0 <= se.mmse < 1
    phi = aim.free_entropy(0.3, se.q, se.q_hat, rho, T=T, channel=ch) if np.isfinite(se.q_hat) else 0.0
    assert np.isfinite(phi)
    res = aim.gamp_rie(X, y, rho, channel=ch, key=jax.random.key(3), S_true=S, max_iter=40)
    assert np.isfinite(res.history.error[-1])
    if ch.differentiable:
        gd = aim.train_gd(jax.random.key(4), X, y, rho, channel=ch, steps=20, S_true=S)
        assert np.all(np.asarray(gd.finite)) and np.isfinite(np.asarray(gd.error_mean)[-1])
