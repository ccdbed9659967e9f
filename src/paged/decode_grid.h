#pragma once
// The Gluon paged decode's persistent grid (src/paged/paged.cpp), in a header of its own so that a CPU test can
// check the choice (tests/cpu/test_paged_decode_grid.cpp). Internal.

#include <algorithm>
#include <cstdint>

namespace fp8attn::paged::detail {

/// Hopper's shared memory per SM for CTAs and what the system keeps per CTA, and its registers per SM
/// (codegen/operations/paged.py sets the Gluon decode's register cap so that the CTAs its shared memory allows fit).
constexpr int64_t kSharedPerSm = 233472, kSharedReservedPerCta = 1024, kRegistersPerSm = 65536;

/// CTAs of an instance that can be resident on one SM: as its shared memory allows, and as its registers allow
/// when ptxas was given a cap per thread (max_registers > 0; threads: the CTA's launched threads). At least one.
/// The cap is what ptxas allocates for the Gluon decode instances (80, their SASS headers); were a kernel to use
/// fewer, this would count too few CTAs (a smaller grid, never one that cannot be resident).
inline int64_t resident_per_sm(int64_t shared_bytes, int64_t threads, int64_t max_registers) {
  int64_t fit = kSharedPerSm / (shared_bytes + kSharedReservedPerCta);
  if (max_registers > 0 && threads > 0) fit = std::min(fit, kRegistersPerSm / (threads * max_registers));
  return std::max<int64_t>(1, fit);
}

/// Programs to launch for `items` work items of a decode instance with `shared_bytes` of shared memory per CTA,
/// `threads` launched threads and ptxas's cap of `max_registers` per thread (0: none): first the programs per SM, 2
/// or up to as many as fit (resident_per_sm: an 8-warp consumer instance, 12 launched warps x 80 registers, fits
/// two although its shared memory would allow three; counting three would leave a third of the programs waiting for
/// a second wave), whichever leaves the fewest idle slots over the rounds (items / (rounds * programs per SM * SMs)
/// the largest; a tie to the most programs). One program per SM only when no more fit: one consumer's chain per
/// stage cannot keep the HBM busy (3.48-3.93 TB/s, docs/perf/NOTES.md). H200, 64 keys x 4 stages (80 registers,
/// three per SM fit), same call: batch 128 at 4k (1024 items) 4.07 TB/s with two per SM (four rounds, 97% of the
/// slots busy), 3.72 with three (three rounds, 86%); the other cases within the run's spread. Then as few programs
/// as run those rounds, ceil(items / rounds), so that every program walks `rounds` or `rounds - 1` items: the idle
/// slots are spread over the whole call instead of all falling in the last round (H200, batch 128 at 4k: 256
/// programs instead of 264, 4.00-4.02 TB/s against 3.95-3.99 in three interleaved pairs).
inline int64_t gluon_decode_grid(int64_t items, int64_t shared_bytes, int64_t threads, int64_t max_registers,
                                 int sms) {
  int64_t const fit = resident_per_sm(shared_bytes, threads, max_registers);
  int64_t best = 0;
  double best_busy = -1.0;
  for (int64_t per_sm = fit; per_sm >= std::min<int64_t>(2, fit); --per_sm) {
    int64_t const slots = per_sm * sms;
    int64_t const rounds = (items + slots - 1) / slots;
    double const busy = static_cast<double>(items) / static_cast<double>(rounds * slots);
    if (busy > best_busy + 1e-9) {
      best = per_sm;
      best_busy = busy;
    }
  }
  int64_t const slots = best * sms;
  int64_t const rounds = std::max<int64_t>(1, (items + slots - 1) / slots);
  return std::max<int64_t>(1, (items + rounds - 1) / rounds);
}

}  // namespace fp8attn::paged::detail
