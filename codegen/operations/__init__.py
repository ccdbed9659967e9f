"""Operation modules, keyed by operation kind (as cutlass_library keys its emitters).

Each module defines: NAME, CPP_KIND (its library::OperationKind enumerator), its Config dataclass (with `operation` and `family` fields), name_of(config),
parse(name) -> config or None, KERNELS (family -> (kernel module, function, params, C++ params struct)),
compile_spec(config), optionally compile_options(config) (extra triton.compile options, e.g. maxnreg), check_sass(config,
mma_counts, sass, ttgir), requires(config) (helper instances it needs),
CPP_HEADER and cpp_config(config) (the C++ record of its configuration). Adding an operation is a new module
here plus manifest rows; nothing else in codegen/ branches on the kind or names it.
"""

import sys
from pathlib import Path

# The kernels' shared constants (kernels/common/numerics.py) size some configurations (quantize's rotation stage).
_KERNELS = str(Path(__file__).resolve().parents[2] / "kernels")
if _KERNELS not in sys.path:
    sys.path.insert(0, _KERNELS)

from operations import fmha_fwd, paged, quantize, transpose_v  # noqa: E402

OPERATIONS = {m.NAME: m for m in (fmha_fwd, transpose_v, quantize, paged)}


def module_of(config):
    return OPERATIONS[config.operation]


def name_of(config) -> str:
    return module_of(config).name_of(config)


def parse_name(name: str):
    """Config from a name; ValueError naming the name if no operation recognizes it."""
    for module in OPERATIONS.values():
        config = module.parse(name)
        if config is not None:
            return config
    raise ValueError(f"kernel name {name!r} is not an fp8attn kernel name")
