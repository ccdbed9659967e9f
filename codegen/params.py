"""Kernel launch parameters, written once per kernel: name, kind and order.

An operation module lists its kernel's parameters as `Param`s. From that one list come
  * the Triton/Gluon signature of the ahead-of-time compile (`triton_signature`),
  * the PTX parameter list the build checks every cubin against (`ptx_types`),
  * a generated C++ struct with one named field per parameter and a `pack()` that pushes them in order
    (`cpp_struct`): the runtime fills fields by name, so two parameters cannot be swapped.

Kinds and what they become (Triton 3.6 on sm_90):
    ptr        a device pointer; its Triton element type comes from the instance (`pointee`)
    i32, i64   integers
    f32        a float
    tensordesc a host TMA descriptor: Triton expands it into a 128-byte CUtensorMap passed by value, then its
               shape (i32 each) and strides (i64 each); `rank` and `block` describe it
After the user parameters Triton appends two hidden pointers: global scratch (device-side TMA descriptors)
and profile scratch (unused, null).
"""

from dataclasses import dataclass, field

KINDS = ("ptr", "i32", "i64", "f32", "tensordesc")
_PTX = {"ptr": ["u64"], "i32": ["u32"], "i64": ["u64"], "f32": ["f32"]}
_CPP = {"ptr": "void const*", "i32": "int32_t", "i64": "int64_t", "f32": "float"}
HIDDEN_PTX = ["u64", "u64"]  # global scratch, profile scratch


@dataclass(frozen=True)
class Param:
    name: str
    kind: str
    divisible_by_16: bool = False  # compiled with tt.divisibility=16; the runtime must guarantee it
    rank: int = 0                  # tensordesc only

    def __post_init__(self):
        assert self.kind in KINDS, f"{self.name}: unknown parameter kind {self.kind!r}"
        assert (self.kind == "tensordesc") == (self.rank > 0), f"{self.name}: rank is for tensordesc only"


def check_against_kernel(fn, params, constexprs):
    """The kernel's own argument list (without constexprs) must be exactly `params`, in order."""
    names = [n for n in fn.arg_names if n not in constexprs]
    expected = [p.name for p in params]
    assert names == expected, f"{fn.__name__}: parameters {names} differ from the declared list {expected}"
    missing = set(constexprs) - set(fn.arg_names)
    assert not missing, f"{fn.__name__}: no parameters named {sorted(missing)}"


def triton_signature(fn, params, types, constexprs):
    """signature dict and attrs (divisibility hints) for ASTSource/GluonASTSource.

    types: Triton type string per parameter name for ptr and tensordesc parameters (e.g. "*fp8e4nv").
    """
    check_against_kernel(fn, params, constexprs)
    signature = {}
    for p in params:
        if p.kind in ("ptr", "tensordesc"):
            signature[p.name] = types[p.name]
        else:
            signature[p.name] = {"i32": "i32", "i64": "i64", "f32": "fp32"}[p.kind]
    for name in constexprs:
        signature[name] = "constexpr"
    names = list(fn.arg_names)
    attrs = {(names.index(p.name),): [["tt.divisibility", 16]] for p in params if p.divisible_by_16}
    return signature, attrs


def ptx_types(params):
    """The .entry parameter list the PTX must have, hidden scratch pointers included."""
    out = []
    for p in params:
        if p.kind == "tensordesc":
            out += ["tensormap"] + ["u32"] * p.rank + ["u64"] * p.rank
        else:
            out += _PTX[p.kind]
    return out + HIDDEN_PTX


def cpp_struct(struct_name, params, source):
    """C++ struct with a field per parameter and pack() in kernel order (runtime/param_pack.h)."""
    lines = [f"/// Launch parameters of {source}, in kernel order. Generated; fill the fields by name.",
             f"struct {struct_name} {{"]
    for p in params:
        if p.kind == "tensordesc":
            lines.append(f"  runtime::TensorMapParam<{p.rank}> {p.name};  ///< CUtensorMap + shape + strides")
        else:
            lines.append(f"  {_CPP[p.kind]} {p.name} = {{}};")
    lines.append("  void* global_scratch = nullptr;  ///< hidden: device-side TMA descriptors (per program)")
    lines.append("")
    lines.append(f"  static constexpr int kNumParams = {len(params)};")
    lines.append("  void pack(runtime::ParamPack& pack) const {")
    for p in params:
        call = {"ptr": "ptr", "i32": "i32", "i64": "i64", "f32": "f32", "tensordesc": "tensor_map"}[p.kind]
        lines.append(f"    pack.{call}({p.name});")
    lines.append("    pack.ptr(global_scratch);")
    lines.append("    pack.ptr(nullptr);  // profile scratch")
    lines.append("  }")
    lines.append("};")
    return "\n".join(lines)
