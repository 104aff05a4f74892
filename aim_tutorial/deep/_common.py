"""The pieces that the modules of ``aim_tutorial.deep`` share (private module).

Several modules of the subpackage import them, so they have no leading underscore (no module
imports another module's ``_private`` names); none is public (``aim_tutorial.deep`` does not
export them): the check of the width ratios, the forward pass without checks and the check of
its output (``deep/model.py``, ``deep/gd.py``), and the settings of the two-layer channel that
:func:`~aim_tutorial.deep.deep_q_hat` and the state evolution both check, with the batch sizes
they depend on (``deep/channel.py``, ``deep/state_evolution.py``).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from .. import _checks
from .._checks import traced as _traced

__all__ = ["BATCH", "NODE_BATCH", "channel_settings", "finite_output", "node_count", "quad_batch_size",
           "two_errors", "unchecked_output", "width_ratios"]


# --------------------------------------------------------------------------- the model


def width_ratios(rhos):
    """``rhos``, a non-empty sequence of width ratios ``rho_l > 0`` (one a layer), as a list of floats."""
    if rhos is None or isinstance(rhos, (str, bytes, dict, set)):
        raise _checks.ArgumentTypeError(f"rhos must be a non-empty sequence of width ratios, got {rhos!r}")
    try:
        ndim = np.ndim(rhos)
    except ValueError:  # a ragged nested list
        ndim = -1
    if ndim != 1 or len(rhos) < 1:
        raise ValueError(f"rhos must be a non-empty sequence of width ratios, got {rhos!r}")
    return [_checks.positive(f"rhos[{i}]", r) for i, r in enumerate(rhos)]


def finite_output(what, out, *inputs):
    """``out``, or a ``ValueError`` if it is not finite while every input is concrete (finite)."""
    if any(_traced(v) for v in inputs) or _traced(out) or bool(jnp.all(jnp.isfinite(out))):
        return out
    raise ValueError(f"{what}: the output is not finite although the inputs are: B_l = (c I + P_l) B_(l-1) "
                     "grows like (1 + |c|)^l and beta A_l overflowed float64; use a smaller |c|, beta or "
                     "smaller indices")


def unchecked_output(hs, beta, c):
    """:func:`aim_tutorial.deep.deep_output` without its checks: the forward pass of
    :func:`aim_tutorial.model.deep_as_aim` on the stacked indices (traced inside training)."""
    from ..model import _deep_forward

    return _deep_forward([hs[ell] for ell in range(hs.shape[0])], beta, c)


# --------------------------------------------------------------------------- the channel's settings


BATCH = 256  # omega samples a compiled call; larger batches go through a Python loop
NODE_BATCH = 2**18  # quadrature: omega samples times nodes in one compiled call


def quad_batch_size(T, n_nodes):
    """Omega samples a compiled call for the quadrature (at most ``BATCH``, about ``NODE_BATCH`` node evaluations)."""
    N = n_nodes**2
    return max(1, min(BATCH, NODE_BATCH // N))


def channel_settings(T, beta, c, n_omega, n_inner):
    """The settings :func:`aim_tutorial.deep.deep_q_hat` and the state evolution share, checked (with a memory
    estimate)."""
    T = _checks.integer_at_least("T", T, 2)
    beta = _checks.positive("beta", beta)
    c = _checks.nonnegative("c", c)
    n_omega = _checks.integer_at_least("n_omega", n_omega, 2)
    n_inner = _checks.integer_at_least("n_inner", n_inner, 1)
    K = T * (T + 1) // 2
    # one batch: two inner sets (n, n_inner, K) and, per draw, the K x K maps and their gradients
    _checks.check_memory(f"deep_q_hat(T={T}, n_inner={n_inner})", 8 * min(n_omega, BATCH) * n_inner * K * K)
    return T, beta, c, n_omega, n_inner


def node_count(T, n_nodes):
    """``None`` or an integer ``>= 2``, the grid cells a direction of the quadrature (``T = 2`` only; memory estimate)."""
    if n_nodes is None:
        return None
    n_nodes = _checks.integer_at_least("n_nodes", n_nodes, 2)
    if T != 2:
        raise ValueError(f"n_nodes (the deterministic quadrature of Z_out) is implemented for T = 2, got T = {T}; "
                         "use n_nodes=None (Monte Carlo) for T > 2")
    # one batch: per (omega draw, node) a few dozen float64 numbers and their gradients
    _checks.check_memory(f"deep_q_hat(T={T}, n_nodes={n_nodes})", 8 * 64 * quad_batch_size(T, n_nodes) * n_nodes**2)
    return n_nodes


def two_errors(V):
    """``(V_1, V_2)``, each ``> 0`` and finite."""
    if isinstance(V, (str, bytes)) or np.shape(V) != (2,):
        raise ValueError(f"V must hold two per-layer errors (V_1, V_2), got {V!r}")
    return _checks.positive("V[0]", V[0]), _checks.positive("V[1]", V[1])
