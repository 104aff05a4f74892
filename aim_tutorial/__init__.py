"""aim_tutorial: Bayes-optimal learning of attention-indexed models, in JAX.

The companion package of the book; each module is one concept, taught in the
chapter its docstring names. Importing the package enables float64 in JAX.
"""

from . import config  # noqa: F401  (first: enables float64)
from . import counting  # noqa: F401  (aim.counting.dof_fraction, aim.counting.alpha_scale)
from .model import (  # noqa: F401
    Instance,
    make_instance,
    n_samples,
    apply_channel,
    attention_indices,
    deep_as_aim,
    deep_attention_literal,
    hardmax,
    sample_data,
    sample_deep_data,
    sample_teacher,
    sample_tokens,
    softmax,
    symmetric_noise,
    teacher_width,
)
from .rmt import (  # noqa: F401
    SpectralLaw,
    hilbert_transform,
    marchenko_pastur_density,
    mmse_denoising,
    rie_denoise,
    rie_eigenvalues,
    sample_goe,
    semicircle_density,
    spectral_density,
    spectral_integral,
    stieltjes,
    support_edges,
)

from . import replica  # noqa: F401  (chapter 3: aim.replica.*)
from .replica import (  # noqa: F401
    denoising_free_entropy,
    denoising_mutual_information,
    sample_equivalent_indices,
)

from . import state_evolution  # noqa: F401  (chapter 4: aim.state_evolution.*)
from .state_evolution import (  # noqa: F401
    SEResult,
    alpha_perfect_recovery,
    free_entropy,
    generic_state_evolution,
    label_space_error,
    perfect_recovery_threshold,
    q_hat_of,
    solve_state_evolution,
)
from . import channels  # noqa: F401  (the registry: aim.channels.registered(), aim.channels.get(name))
from .channels import (  # noqa: F401
    Channel,
    elementwise_channel,
    generic_channel,
    generic_output_score,
    log_partition,
    output_score,
    symmetric_gradient,
)

from . import datafiles  # noqa: F401  (the data files: aim.datafiles.read(name))
from . import gd  # noqa: F401  (chapter 6: aim.gd.*)
from .gd import GDResult, averaged_errors, train_gd  # noqa: F401

from .amp import (  # noqa: F401
    GampRieHistory,
    GampRieResult,
    GampRieSEResult,
    gamp_rie,
    gamp_rie_state_evolution,
    prior_input,
)

from . import deep  # noqa: F401  (chapter 7: aim.deep.*)
from . import explore  # noqa: F401  (chapter 9: aim.explore.*; Altair is imported only to draw)
from .deep import DeepGDResult, train_deep_gd  # noqa: F401

def _version() -> str:
    # the version lives in one place, pyproject.toml ([project] version): read from the installed
    # distribution's metadata (tests/test_colab.py checks that the two agree)
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("aim-tutorial")
    except PackageNotFoundError:  # imported from a source tree that was never installed
        return "0+unknown"


__version__ = _version()

# everything imported above (functions, classes and the submodules), and the lazy plotting module
__all__ = sorted([name for name in globals() if not name.startswith("_")] + ["plotting"])


def __getattr__(name):
    # aim.plotting is imported on first use: matplotlib (0.7 s) only when a figure is drawn
    if name == "plotting":
        import importlib

        return importlib.import_module(".plotting", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
