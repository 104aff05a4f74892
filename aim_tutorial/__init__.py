"""aim_tutorial: Bayes-optimal learning of attention-indexed models, in JAX.

The companion package of the book; each module is one concept, taught in the
chapter its docstring names. Importing the package enables float64 in JAX.
"""

from . import config  # noqa: F401  (first: enables float64)
from . import plotting  # noqa: F401
from .model import (  # noqa: F401
    apply_channel,
    attention_indices,
    deep_as_aim,
    deep_attention_literal,
    hardmax,
    sample_data,
    sample_teacher,
    sample_tokens,
    softmax,
    symmetric_noise,
    teacher_width,
)

__version__ = "0.1.0"
