#!/usr/bin/env bash
# Runs a command and checks BOTH its exit code and its output (stdout and stderr together). ctest's
# PASS_REGULAR_EXPRESSION alone cannot do this: when it is set, the exit code is ignored.
#
#   check_command.sh [--only-without-gpu] [--reject REGEX] EXIT_CODE REGEX -- COMMAND [ARG...]
#
# Passes (exit 0) when COMMAND exits with exactly EXIT_CODE, its output matches the extended regular
# expression REGEX, and (with --reject) does not match the second one. A crash reads as 128 + the signal
# (139 for SIGSEGV), so it never passes as a usage error.
#
# --only-without-gpu: the check describes a machine without a GPU. When an NVIDIA GPU is visible
# (nvidia-smi -L succeeds) it does not apply: the script exits 77, which ctest reports as skipped
# (the test's SKIP_RETURN_CODE).
set -uo pipefail

only_without_gpu=0
reject=""
while [ $# -gt 0 ]; do
  case "$1" in
    --only-without-gpu) only_without_gpu=1; shift ;;
    --reject) reject="$2"; shift 2 ;;
    *) break ;;
  esac
done
if [ $# -lt 4 ] || [ "$3" != "--" ]; then
  echo "usage: check_command.sh [--only-without-gpu] [--reject REGEX] EXIT_CODE REGEX -- COMMAND [ARG...]" >&2
  exit 2
fi
expected_exit="$1"
regex="$2"
shift 3

if [ "$only_without_gpu" = 1 ] && command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "skipped: a GPU is visible (nvidia-smi -L succeeds); this check is for machines without one"
  exit 77
fi

output=$("$@" 2>&1)
status=$?
printf '$'; printf ' %q' "$@"; printf '\n%s\n' "$output"
echo "-- exit code $status (expected $expected_exit)"

failed=0
if [ "$status" != "$expected_exit" ]; then
  echo "FAILED: exit code $status, expected $expected_exit"
  failed=1
fi
if ! grep -Eq -e "$regex" <<<"$output"; then
  echo "FAILED: the output does not match /$regex/"
  failed=1
fi
if [ -n "$reject" ] && grep -Eq -e "$reject" <<<"$output"; then
  echo "FAILED: the output matches /$reject/, which it must not"
  failed=1
fi
exit $failed
