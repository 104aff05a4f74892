"""Deep attention: two (or more) attention layers as one attention-indexed model.

Chapter 7 (``book/07_deep_attention.md``) teaches this module; the equation
labels below refer to it. The teacher has one matrix a layer,
``S_l = W_l W_l^T / sqrt(r_l d)``, ``rho_l = r_l / d``, and the output is

    B_0 = I,  A_l = B_{l-1} h^l B_{l-1}^T,  B_l = (c I + softmax_beta(A_l)) B_{l-1},
    y = softmax_beta(A_L),                                          eq. (eq-deep-aim)

with ``h^l`` the attention indices of ``S_l`` on the original tokens
(:func:`aim_tutorial.model.deep_as_aim`). What the module provides:

- **exact second moments** of the joint indices: conditionally on the teachers,
  ``Cov(h^l_ab, h^m_a'b') = Q_lm (delta_aa' delta_bb' + delta_ab' delta_ba')`` with
  ``Q_lm = Tr(S_l S_m)/d`` (:func:`overlap_matrix`, :func:`index_covariance`),
  and the limit ``Q_lm -> delta_lm (1 + rho_l) + (1 - delta_lm) sqrt(rho_l rho_m)``
  for independent teachers (:func:`limit_overlap_matrix`), eq. (eq-deep-Q0);
- the **counting threshold** ``sum_l (2 rho_l - rho_l^2) / (T^2 + T - 2)``
  (:func:`deep_alpha_count`), eq. (eq-deep-count);
- a **two-layer student** trained by full-batch Adam, vmapped over
  initialisations, at cost ``O(n T d r)`` a step (:func:`train_deep_gd`);
- the **output channel of deep attention in the Gaussian-equivalent model**:
  its log-partition ``log Z_out`` by Monte Carlo over the first layer's indices,
  the L x L conjugate overlap ``q_hat`` (:func:`deep_q_hat`) and a per-layer-RIE
  state evolution that keeps only the diagonal of ``q_hat``
  (:func:`deep_state_evolution_diagonal`): a **conjecture**, tested in the chapter
  against averaged gradient descent;
- **two-layer GAMP-RIE** (:func:`deep_gamp_rie`): the algorithm whose state evolution that
  per-layer map is, with the score of the same ``log Z_out`` (``T = 2``).

The subpackage has one module a concept, each the two-layer counterpart of a one-layer module:

- ``deep/model.py``: the teachers, the output and its inversion, the exact moments and the
  counting threshold (as ``model.py``);
- ``deep/gd.py``: the students and their gradient descent (as ``gd.py``, whose training driver,
  in the private ``_students.py``, they share);
- ``deep/channel.py``: the two-layer channel, ``log Z_out`` and ``q_hat`` (as ``channels/``);
- ``deep/state_evolution.py``: the per-layer state evolution (as ``state_evolution.py``);
- ``deep/gamp.py``: two-layer GAMP-RIE, one RIE a layer and the joint channel (as ``amp.py``, whose
  kernel's bookkeeping and stopping rules it runs);
- ``deep/_common.py`` (private): the checks and settings that several of them share.

Every public name is imported here: ``aim_tutorial.deep.<name>`` is its address (the API page
documents it there).

Reference: Boncoraglio, Troiani, Erba, Zdeborova, *Bayes optimal learning of
attention-indexed models*, NeurIPS 2025 (arXiv 2506.01582), which introduces deep
attention as an AIM; the multi-layer theory here is this book's.
"""

from __future__ import annotations

from .channel import DeepQHat, deep_log_zout, deep_q_hat
from .gamp import DeepGampHistory, DeepGampResult, deep_gamp_rie
from .gd import DeepGDResult, deep_loss, deep_student_output, train_deep_gd
from .model import (deep_alpha_count, deep_output, index_covariance, limit_overlap_matrix, observed_maps_to_indices,
                    overlap_matrix, sample_deep_teacher)
from .state_evolution import DeepSEResult, DeepSEStatus, deep_state_evolution_diagonal

__all__ = [
    "DeepGDResult",
    "DeepGampHistory",
    "DeepGampResult",
    "DeepQHat",
    "DeepSEResult",
    "DeepSEStatus",
    "deep_alpha_count",
    "deep_gamp_rie",
    "deep_log_zout",
    "deep_loss",
    "deep_output",
    "deep_q_hat",
    "deep_state_evolution_diagonal",
    "deep_student_output",
    "index_covariance",
    "limit_overlap_matrix",
    "observed_maps_to_indices",
    "overlap_matrix",
    "sample_deep_teacher",
    "train_deep_gd",
]
