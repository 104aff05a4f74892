"""Deep attention, the output channel of two layers in the Gaussian-equivalent model.

``log Z_out`` by Monte Carlo over the first layer's indices (:func:`deep_log_zout`) or, for
``T = 2``, by a deterministic midpoint rule, and the ``2 x 2`` conjugate overlap ``q_hat`` with its
standard error (:func:`deep_q_hat`, eq. (eq-deep-qhat) of chapter 7).
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from .. import _checks
from ._common import BATCH as _BATCH
from ._common import channel_settings as _channel_settings
from ._common import node_count as _node_count
from ._common import quad_batch_size as _quad_batch_size
from ._common import two_errors as _two_errors

__all__ = ["DeepQHat", "deep_log_zout", "deep_q_hat"]


# --------------------------------------------------------------------------- the output channel (L = 2)
#
# In the Gaussian-equivalent model the two layers' indices, given the estimates
# omega = (omega^1, omega^2), are h^l = omega^l + sqrt(V_l) zeta^l with V diagonal
# (as before eq. (eq-deep-qhat)). Noiseless softmax output: y fixes A_2 = B(h^1) h^2 B(h^1)^T up to a
# constant, i.e. the D - 1 log-ratios ell_ab = A_ab - A_TT (a <= b, (a, b) != (T, T)),
# D = T(T+1)/2. Given h^1, ell is linear in h^2, so
#
#     Z_out(ell | omega, V) = E_{h^1 ~ N(omega^1, V_1 C)} N(ell; Pi L_B omega^2, V_2 Pi L_B C L_B^T Pi^T),
#
# (eq. (eq-deep-Zout)), with L_B the D x D matrix of h -> B h B^T on upper triangles and Pi
# the projection onto ell. The expectation over h^1 is done by Monte Carlo.


def _sym_basis(T):
    """``(K, T, T)`` symmetric basis: ``E_k`` has ones at ``(a, b)`` and ``(b, a)``, ``a <= b``."""
    i, j = np.triu_indices(T)
    E = np.zeros((len(i), T, T))
    E[np.arange(len(i)), i, j] = 1.0
    E[np.arange(len(i)), j, i] = 1.0
    return E


def _quotient(T):
    """``(K - 1, K)`` matrix ``Pi``: upper-triangle vector of ``A`` -> ``A_ab - A_TT``."""
    K = T * (T + 1) // 2
    Pi = np.zeros((K - 1, K))
    Pi[np.arange(K - 1), np.arange(K - 1)] = 1.0
    Pi[:, K - 1] = -1.0  # the last upper-triangle entry is (T, T)
    return Pi


def _small_cholesky_solve(A, b):
    """``(L^{-1} b, log diag L)`` for the Cholesky factor ``L`` of a small SPD ``A``.

    Written out entry by entry (the size is static and at most ``T(T+1)/2 - 1``):
    batched LAPACK calls inside this program deadlocked XLA's CPU thread pool
    on 2 cores with jax 0.10.2 (every thread waiting, for some random draws).
    """
    n = A.shape[-1]
    L = [[None] * n for _ in range(n)]
    for k in range(n):
        s = A[k, k] - sum(L[k][m] * L[k][m] for m in range(k))
        L[k][k] = jnp.sqrt(s)
        for i in range(k + 1, n):
            L[i][k] = (A[i, k] - sum(L[i][m] * L[k][m] for m in range(k))) / L[k][k]
    r = []
    for i in range(n):
        r.append((b[i] - sum(L[i][m] * r[m] for m in range(i))) / L[i][i])
    return jnp.stack(r), jnp.log(jnp.stack([L[k][k] for k in range(n)]))


def _log_zout_one(D, om1, om2, zeta1, V1, V2, beta, c, T):
    """``log Z_out`` of one sample by Monte Carlo over ``zeta1`` ``(M, K)``; om1, om2 ``(K,)`` upper triangles."""
    E = jnp.asarray(_sym_basis(T))
    Pi = jnp.asarray(_quotient(T))
    i, j = np.triu_indices(T)
    Cd = jnp.asarray(np.where(i == j, 2.0, 1.0))

    def one(z):
        u1 = om1 + jnp.sqrt(V1 * Cd) * z
        h1 = jnp.einsum("k,kab->ab", u1, E)
        B = c * jnp.eye(T) + jax.nn.softmax(beta * h1, axis=-1)
        LB = jnp.einsum("ac,kcd,bd->kab", B, E, B)[:, i, j].T  # (K out, K in)
        M = Pi @ LB
        mean = M @ om2
        cov = V2 * (M * Cd) @ M.T
        r, log_diag = _small_cholesky_solve(cov, D - mean)
        return -0.5 * jnp.sum(r * r) - jnp.sum(log_diag) - 0.5 * (T * (T + 1) // 2 - 1) * jnp.log(2 * jnp.pi)

    logs = jax.vmap(one)(zeta1)
    return jax.scipy.special.logsumexp(logs) - jnp.log(zeta1.shape[0])


def _log_lik_nodes(D, om2, u, V2, beta, c):
    """``log N(D; M(u) omega^2, V_2 M(u) C M(u)^T)`` for ``T = 2``, ``u`` ``(N, 3)`` upper triangles of ``h^1``.

    The same value as the Gaussian of :func:`_log_zout_one`, written without the covariance
    ``V_2 M C M^T``, whose smallest eigenvalue scales like ``det(B)^4``: once ``det B`` falls
    below about ``1e-4`` (softmax saturated towards a singular ``B``, which the tail nodes of a
    quadrature rule reach) its Cholesky factor has no correct digit, and it returns NaN or
    garbage. Instead: the ``h^2`` with output ``D`` are ``H_0(D) + t 1 1^T``, ``H_0 = B^{-1} A^* B^{-T}``
    with ``A^* = [[D_1, D_2], [D_2, 0]]``, so with ``h^2 ~ N(omega^2, V_2 C)`` (``C = diag(2, 1, 2)``)

        N(D; M omega^2, V_2 M C M^T) = |det B|^(-3) (1 + c)^2 int dt N(H_0 + t e; omega^2, V_2 C),

    the Jacobian of ``(D, t) -> h^2`` being ``det(L_{B^{-1}}) (1 + c)^2 = det(B)^(-(T+1)) (1 + c)^2``,
    and the ``t`` integral is Gaussian: ``(2 pi V_2)^(-1/2) (det C)^(-1/2) a^(-1/2) exp(-r_perp^T C^{-1} r_perp /
    (2 V_2))`` with ``r = H_0 - omega^2``, ``a = e^T C^{-1} e = 2``, ``r_perp = r - (e^T C^{-1} r / a) e``.
    ``det B = (1 + c)(c - 1 + P_11 + P_22)`` is a sum of positive terms for ``c >= 1``.
    """
    Cinv = jnp.array([0.5, 1.0, 0.5])
    P11 = jax.nn.sigmoid(beta * (u[..., 0] - u[..., 1]))  # softmax of the rows (u0, u1) and (u1, u2)
    P22 = jax.nn.sigmoid(beta * (u[..., 2] - u[..., 1]))
    det = (1.0 + c) * (c - 1.0 + P11 + P22)
    # adj(B) = [[c + P22, -P12], [-P21, c + P11]], P12 = 1 - P11, P21 = 1 - P22; N = adj A* adj^T
    a11, a12, a21, a22 = c + P22, P11 - 1.0, P22 - 1.0, c + P11
    D1, D2 = D[0], D[1]
    x11, x12 = a11 * D1 + a12 * D2, a11 * D2
    x21, x22 = a21 * D1 + a22 * D2, a21 * D2
    H0 = jnp.stack([x11 * a11 + x12 * a12, x11 * a21 + x12 * a22, x21 * a21 + x22 * a22], axis=-1) / det[..., None]**2
    r = H0 - om2
    r = r - 0.5 * jnp.sum(Cinv * r, axis=-1, keepdims=True)
    quad = jnp.sum(Cinv * r * r, axis=-1) / V2
    const = 2.0 * jnp.log(1.0 + c) - jnp.log(2 * jnp.pi * V2) - 0.5 * jnp.log(8.0)  # (det C a)^(1/2) = 8^(1/2)
    return -3.0 * jnp.log(jnp.abs(det)) + const - 0.5 * quad


def _quotient_factor_t2():
    """``R`` ``(3, 2)``: ``u = omega^1 + sqrt(V_1) R xi``, ``xi ~ N(0, I_2)``, has the law of ``h^1`` up to ``t 1 1^T``."""
    Pi = _quotient(2)
    Cd = np.array([2.0, 1.0, 2.0])
    return np.vstack([np.linalg.cholesky((Pi * Cd) @ Pi.T), np.zeros((1, 2))])


_BOX = 7.0  # the grid covers xi in [-_BOX, _BOX]^2 (prior mass outside: about 1e-11)


def _log_zout_grid(D, om1, om2, V1, V2, beta, c, n_nodes):
    """``log Z_out`` of one sample, ``T = 2``, by the midpoint rule on a uniform grid over the first layer.

    ``Z_out = int N(xi; 0, I_2) exp(lik(omega^1 + sqrt(V_1) R xi)) dxi`` over the two directions of ``h^1``
    that the softmax sees (:func:`_quotient_factor_t2`), the likelihood in the stable form of
    :func:`_log_lik_nodes`: the midpoint rule with ``n_nodes x n_nodes`` cells on ``[-7, 7]^2``. The
    integrand vanishes (below ``1e-11`` of the prior) at the edges, so the rule converges like the
    trapezoidal rule of a smooth function, geometrically once the cell width ``14 / n_nodes`` resolves
    the integrand's narrowest feature. That width shrinks like ``sqrt(V_2 / V_1)`` (and the integrand
    can have several narrow modes: Monte Carlo from the prior misses them, a Gaussian rule centred on
    one mode misses the others), so the rule is for moderate ``V``; chapter 7 measures its error.
    """
    R = jnp.asarray(_quotient_factor_t2())
    h = 2 * _BOX / n_nodes
    g = -_BOX + h * (np.arange(n_nodes) + 0.5)
    I, J = np.meshgrid(g, g, indexing="ij")
    xi = jnp.asarray(np.stack([I.ravel(), J.ravel()], axis=1))
    logw = jnp.asarray(2 * np.log(h) - np.log(2 * np.pi) - 0.5 * (I.ravel() ** 2 + J.ravel() ** 2))
    u = om1 + jnp.sqrt(V1) * xi @ R.T
    return jax.scipy.special.logsumexp(logw + _log_lik_nodes(D, om2, u, V2, beta, c))


def _q_hat_mc(key, q11, q22, q12, V1, V2, beta, c, *, T, n_omega, n_inner):
    """Mean and standard error of the per-sample ``q_hat / alpha`` over ``n_omega`` samples.

    The samples are drawn in batches of at most ``_BATCH``, batch ``b`` from
    ``fold_in(key, b)``, each batch one compiled call (of one shape) that
    returns the cross-fitted scores; their products are summed in NumPy, so
    that memory stays bounded for any ``n_omega``.
    """
    i, j = np.triu_indices(T)
    Cd = np.where(i == j, 2.0, 1.0)
    total = np.zeros((2, 2))
    total_sq = np.zeros((2, 2))
    for b, start in enumerate(range(0, n_omega, _BATCH)):
        m = min(_BATCH, n_omega - start)
        GA, GB = _q_hat_batch(jax.random.fold_in(key, b), q11, q22, q12, V1, V2, beta, c,
                              T=T, n_omega=m, n_inner=n_inner)
        H = np.einsum("nlk,k,nmk->nlm", np.asarray(GA), Cd, np.asarray(GB))
        H = H + np.swapaxes(H, -1, -2)  # per-sample 2 sym(g_A,l^T C g_B,m)
        total += H.sum(axis=0)
        total_sq += (H * H).sum(axis=0)
    mean = total / n_omega
    var = np.maximum(total_sq / n_omega - mean**2, 0.0)
    return mean, np.sqrt(var / n_omega)


@partial(jax.jit, static_argnames=("T", "n_omega", "n_inner"))
def _q_hat_batch(key, q11, q22, q12, V1, V2, beta, c, *, T, n_omega, n_inner):
    """The two cross-fitted scores ``(g_A, g_B)``, each ``(n_omega, 2, K)``, of one batch."""
    K = T * (T + 1) // 2
    _, _, k3, k4 = jax.random.split(key, 4)
    # omega: covariance q kron C; Cholesky of the 2 x 2 q (q_11 = 0 forces q_12 = 0: then l21 = 0, exactly)
    D, om1, om2 = _outer_draws(key, q11, q22, q12, V1, V2, beta, c, T, n_omega)
    # two independent inner Monte Carlo sets: E[g_A g_B^T] has no noise-variance bias (cross-fitting)
    inner_a = jax.random.normal(k3, (n_omega, n_inner, K))
    inner_b = jax.random.normal(k4, (n_omega, n_inner, K))

    def score(Dm, o1, o2, z):
        def f(a, b):
            return _log_zout_one(Dm, a, b, z, V1, V2, beta, c, T)

        return jnp.stack(jax.grad(f, argnums=(0, 1))(o1, o2))  # (2, K)

    def both(args):
        Dm, o1, o2, za, zb = args
        return score(Dm, o1, o2, za), score(Dm, o1, o2, zb)

    return jax.vmap(both)((D, om1, om2, inner_a, inner_b))  # (n, 2, K) each


def _q_hat_quad(key, q11, q22, q12, V1, V2, beta, c, *, T, n_omega, n_nodes):
    """Mean and standard error of the per-sample ``q_hat / alpha``, ``Z_out`` by deterministic quadrature (``T = 2``).

    The outer samples (omega and the true indices) are those of :func:`_q_hat_mc` with the same
    key (batch ``b`` of ``_BATCH`` from ``fold_in(key, b)``, the same splits); the inner integral of
    eq. (eq-deep-Zout) is the midpoint rule of :func:`_log_zout_grid`, so each sample's score is
    a deterministic function of its draw: no cross-fitting is needed and the only error left is
    the outer Monte Carlo's, measured by the standard error, plus the rule's (measured against
    ``n_nodes`` in chapter 7).
    """
    i, j = np.triu_indices(T)
    Cd = np.where(i == j, 2.0, 1.0)
    total = np.zeros((2, 2))
    total_sq = np.zeros((2, 2))
    sub = _quad_batch_size(T, n_nodes)
    for b, start in enumerate(range(0, n_omega, _BATCH)):
        m = min(_BATCH, n_omega - start)
        G = np.asarray(_q_hat_quad_batch(jax.random.fold_in(key, b), q11, q22, q12, V1, V2, beta, c,
                                         T=T, n_omega=m, n_nodes=n_nodes, sub=min(sub, m)))
        H = 2 * np.einsum("nlk,k,nmk->nlm", G, Cd, G)  # per-sample 2 g_l^T C g_m
        total += H.sum(axis=0)
        total_sq += (H * H).sum(axis=0)
    mean = total / n_omega
    var = np.maximum(total_sq / n_omega - mean**2, 0.0)
    return mean, np.sqrt(var / n_omega)


def _outer_draws(key, q11, q22, q12, V1, V2, beta, c, T, n_omega):
    """The outer samples of one batch: the data ``D`` ``(n, K - 1)`` and the means ``omega^1, omega^2`` ``(n, K)``.

    The same draws as :func:`_q_hat_batch` (keys ``split(key, 4)[:2]``).
    """
    K = T * (T + 1) // 2
    i, j = np.triu_indices(T)
    Cd = jnp.asarray(np.where(i == j, 2.0, 1.0))
    Pi = jnp.asarray(_quotient(T))
    E = jnp.asarray(_sym_basis(T))
    k1, k2, _, _ = jax.random.split(key, 4)
    l11 = jnp.sqrt(jnp.maximum(q11, 0.0))
    l21 = jnp.where(l11 > 0, q12 / jnp.where(l11 > 0, l11, 1.0), 0.0)
    l22 = jnp.sqrt(jnp.maximum(q22 - l21 * l21, 0.0))
    g = jax.random.normal(k1, (n_omega, 2, K)) * jnp.sqrt(Cd)
    om1 = l11 * g[:, 0]
    om2 = l21 * g[:, 0] + l22 * g[:, 1]
    zt = jax.random.normal(k2, (n_omega, 2, K)) * jnp.sqrt(Cd)
    u1 = om1 + jnp.sqrt(V1) * zt[:, 0]
    u2 = om2 + jnp.sqrt(V2) * zt[:, 1]
    h1 = jnp.einsum("nk,kab->nab", u1, E)
    h2 = jnp.einsum("nk,kab->nab", u2, E)
    B = c * jnp.eye(T) + jax.nn.softmax(beta * h1, axis=-1)
    A = B @ h2 @ jnp.swapaxes(B, -1, -2)
    return A[:, i, j] @ Pi.T, om1, om2


@partial(jax.jit, static_argnames=("T", "n_omega", "n_nodes", "sub"))
def _q_hat_quad_batch(key, q11, q22, q12, V1, V2, beta, c, *, T, n_omega, n_nodes, sub):
    """The scores ``g`` ``(n_omega, 2, K)`` of one batch, ``Z_out`` by the rule of :func:`_log_zout_grid`."""
    D, om1, om2 = _outer_draws(key, q11, q22, q12, V1, V2, beta, c, T, n_omega)

    def score(Dm, o1, o2):
        def f(a, b):
            return _log_zout_grid(Dm, a, b, V1, V2, beta, c, n_nodes)

        return jnp.stack(jax.grad(f, argnums=(0, 1))(o1, o2))  # (2, K)

    # sub samples at a time (memory: sub x nodes evaluations)
    return jax.lax.map(lambda a: score(*a), (D, om1, om2), batch_size=sub)


class DeepQHat(NamedTuple):
    """Result of :func:`deep_q_hat`.

    Attributes:
        q_hat: ``(2, 2)``, the conjugate overlap matrix ``q_hat_lm`` (proportional to ``alpha``).
        stderr: ``(2, 2)``, Monte Carlo standard errors over the ``omega`` samples.
    """

    q_hat: np.ndarray
    stderr: np.ndarray


def deep_q_hat(key, alpha, q, V, T: int = 2, beta: float = 1.0, c: float = 1.0,
               n_omega: int = 4000, n_inner: int = 512, n_nodes: Optional[int] = None) -> DeepQHat:
    """Conjugate overlaps of two-layer deep attention in the Gaussian-equivalent model, eq. (eq-deep-qhat).

    ``q_hat_lm = 2 alpha E[ g_l^T C g_m ]`` with ``g_l = d log Z_out / d omega^l`` (on
    the ``D = T(T+1)/2`` entries ``a <= b``), ``C = diag(2 if a = b else 1)``,
    ``omega ~ N(0, q kron C)``, ``h^l = omega^l + sqrt(V_l) zeta^l`` and ``Z_out``
    of eq. (eq-deep-Zout) estimated with ``n_inner`` Monte Carlo draws of the first
    layer's indices; the outer expectation uses ``n_omega`` draws. The score of a
    Monte Carlo estimate of ``log Z_out`` is noisy, and ``E[g g^T]`` of a noisy ``g``
    is biased upwards by the noise variance (by a factor of ten at ``n_inner = 16``):
    each sample's score is therefore computed twice, from two independent inner
    sets ``A`` and ``B``, and ``E[g_A^T C g_B]`` is used (cross-fitting), which
    leaves only the ``O(1/n_inner)`` bias of each self-normalised estimate.

    Args:
        key: ``jax.random`` key (common random numbers: the same key gives the same answer).
        alpha: sample complexity ``>= 0``.
        q: ``(2, 2)`` overlap matrix of the estimates, positive semi-definite (``q_12 =
            sqrt(rho_1 rho_2)`` when the layers decouple, eq. (eq-deep-se)). Nothing divides
            by ``q``: it is only the covariance of ``omega``, so a singular ``q`` (down to
            ``q = 0``, ``omega = 0``: nothing known yet) is its exact limit.
        V: ``(V_1, V_2)``, the per-layer errors, each ``> 0``.
        T: tokens a sequence, ``>= 2``.
        beta: inverse temperature ``> 0``.
        c: skip strength ``>= 0``.
        n_omega, n_inner: Monte Carlo sizes (``n_inner`` is not used when ``n_nodes`` is given).
        n_nodes: ``None`` (default): ``Z_out`` by ``n_inner`` Monte Carlo draws, cross-fitted as above.
            An integer ``>= 2`` (``T = 2`` only): ``Z_out`` by the deterministic midpoint rule on an
            ``n_nodes x n_nodes`` grid over the two directions of ``h^1`` that the softmax sees (a
            constant added to every entry of ``h^1`` leaves it unchanged), with the likelihood in a
            form that stays accurate where ``B`` is nearly singular. Each score is then a
            deterministic function of its outer draw: no cross-fitting and no inner bias; the outer
            average over ``n_omega`` draws (the same draws as the Monte Carlo path with the same key)
            is the only stochastic part, and ``stderr`` is its standard error. The rule needs cells
            narrower than the integrand's features, whose width shrinks like ``sqrt(V_2 / V_1)``:
            chapter 7 measures its error (``n_nodes = 128`` and ``256`` agree within a tenth of the
            outer standard error at ``V = (1, 1)``, ``(0.036, 0.0036)``, ``(0.019, 0.0014)`` and
            ``(0.0044, 0.0003)``; ``n_nodes = 64`` is off by more than it at ``(0.036, 0.0036)``).

    Returns:
        :class:`DeepQHat`.

    Raises:
        ValueError: an argument out of range (each error names it; ``n_nodes`` must be an integer
            ``>= 2`` and is refused for ``T != 2``), or a Monte Carlo
            estimate that is not finite (it says which settings to change).

    Example:
        >>> import jax, numpy as np, aim_tutorial as aim
        >>> r = aim.deep.deep_q_hat(jax.random.key(0), 0.5, np.array([[0.6, 0.5], [0.5, 0.6]]),
        ...                         (0.9, 0.9), n_omega=64, n_inner=32)
        >>> r.q_hat.shape
        (2, 2)

    Chapter 7. The limit ``V_1 -> 0`` (first layer known) gives
    ``q_hat_22 = alpha (T^2 + T - 2) / V_2`` exactly, the one-layer softmax value.
    """
    key = _checks.prng_key("key", key)
    alpha = _checks.nonnegative("alpha", alpha)
    T, beta, c, n_omega, n_inner = _channel_settings(T, beta, c, n_omega, n_inner)
    n_nodes = _node_count(T, n_nodes)
    if np.shape(q) != (2, 2):
        raise ValueError(f"q must be a (2, 2) positive semi-definite matrix, got shape {np.shape(q)}")
    _checks.square_symmetric("q", q)
    q = np.asarray(q, dtype=float)
    if q.shape != (2, 2) or np.linalg.eigvalsh(q).min() < -1e-12:
        raise ValueError(f"q must be a (2, 2) positive semi-definite matrix, got {q.tolist()}")
    V1, V2 = _two_errors(V)
    if n_nodes is None:
        m, s = _q_hat_mc(key, q[0, 0], q[1, 1], q[0, 1], V1, V2, beta, c, T=T, n_omega=n_omega, n_inner=n_inner)
    else:
        m, s = _q_hat_quad(key, q[0, 0], q[1, 1], q[0, 1], V1, V2, beta, c, T=T, n_omega=n_omega, n_nodes=n_nodes)
    if not (np.all(np.isfinite(m)) and np.all(np.isfinite(s))):
        raise ValueError(f"deep_q_hat: the Monte Carlo estimate is not finite at q = {q.tolist()}, V = {(V1, V2)}, "
                         f"beta = {beta}, c = {c}: B = c I + softmax is (nearly) singular; use c > 0 or a smaller beta")
    return DeepQHat(alpha * np.asarray(m), alpha * np.asarray(s))


def deep_log_zout(D, omega1, omega2, zeta, V, T: int = 2, beta: float = 1.0, c: float = 1.0):
    """Monte Carlo ``log Z_out`` of two-layer deep attention for one sample, eq. (eq-deep-Zout).

    Args:
        D: ``(K - 1,)``, the output as ``A_ab - A_TT`` over ``a <= b``, ``(a, b) != (T, T)``.
        omega1, omega2: ``(K,)`` upper triangles (order of ``np.triu_indices(T)``) of the means.
        zeta: ``(M, K)`` standard normals: the first layer's indices are
            ``omega1 + sqrt(V_1 C) zeta``.
        V: ``(V_1, V_2)``, each ``> 0``.
        T, beta, c: tokens, inverse temperature, skip strength.

    Returns:
        scalar ``log (1/M) sum_j N(D; Pi L_{B_j} omega2, V_2 Pi L_{B_j} C L_{B_j}^T Pi^T)``.

    Raises:
        ValueError: shapes that do not match ``T``, an empty ``zeta`` (``M = 0``), entries that
            are not finite, ``V_l <= 0``, ``beta <= 0``, ``c < 0``, or a result that is not
            finite (a singular ``B``: ``c = 0`` with a singular attention map).
    """
    T = _checks.integer_at_least("T", T, 2)
    beta = _checks.positive("beta", beta)
    c = _checks.nonnegative("c", c)
    K = T * (T + 1) // 2
    for name, val, n in (("D", D, K - 1), ("omega1", omega1, K), ("omega2", omega2, K)):
        if np.shape(val) != (n,):
            raise ValueError(f"{name} must have shape ({n},) for T = {T}, got {np.shape(val)}")
        _checks.real_array(name, val, ndim=1)
    if np.ndim(zeta) != 2 or np.shape(zeta)[1] != K or np.shape(zeta)[0] < 1:
        raise ValueError(f"zeta must have shape (M, {K}) with M >= 1, got {np.shape(zeta)}")
    _checks.real_array("zeta", zeta, ndim=2)
    V1, V2 = _two_errors(V)
    out = _log_zout_one(jnp.asarray(D), jnp.asarray(omega1), jnp.asarray(omega2), jnp.asarray(zeta),
                        V1, V2, beta, c, T)
    if not bool(jnp.isfinite(out)):
        raise ValueError(f"deep_log_zout is not finite ({float(out)}): the covariance of D is singular for some "
                         f"zeta (B = c I + softmax singular at c = {c}); use c > 0")
    return out
