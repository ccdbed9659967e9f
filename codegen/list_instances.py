"""Names of the manifest instances a build selects, one per line (read by CMake at configure time).

    python codegen/list_instances.py [--filter "<CUTLASS filter>"] [--all]
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import manifest  # noqa: E402
from operations import name_of  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--filter", default="", help="',' = OR, '*' = ordered substrings")
    ap.add_argument("--all", action="store_true", help="select from the full set, not the default set")
    args = ap.parse_args()
    selected = manifest.instances(args.filter, args.all)
    if not any(c.operation == "fmha_fwd" for c in selected):
        sys.exit(f"FP8ATTN_KERNELS={args.filter!r} selects no attention kernel")
    print("\n".join(name_of(c) for c in selected))


if __name__ == "__main__":
    main()
