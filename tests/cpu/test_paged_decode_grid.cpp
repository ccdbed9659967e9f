// The Gluon paged decode's persistent grid (src/paged/decode_grid.h): the per-SM count that leaves the fewest slots
// idle over the rounds of work items, a tie to the most programs, never more programs than items, one per SM only
// when no more fit; then as few programs as run those rounds, each walking `rounds` or `rounds - 1` items.

#include <cstdint>
#include <string>

#include "check.h"
#include "paged/decode_grid.h"

using fp8attn::paged::detail::gluon_decode_grid;

namespace {

constexpr int kSms = 132;            // H100 SXM / H200
constexpr int64_t kThreeFit = 68932;  // the library's 64 keys x 4 stages instance: three CTAs per SM
constexpr int64_t kFourFit = 52540;   // 64 keys x 3 stages: four by shared memory (and by registers with a cap of 64)
constexpr int64_t kOneFits = 120000;  // more than half of the SM's shared memory
constexpr int64_t kThreads = 256, kRegisters = 80;  // the library's Gluon decode: 8 launched warps, 80 registers
// The 8-warp consumer instances: 12 launched warps x 80 registers, two CTAs by registers (three by shared memory).
constexpr int64_t kWideShared = 72260, kWideThreads = 384;

void expect(int64_t items, int64_t shared, int64_t want, char const* why, int64_t threads = kThreads,
            int64_t registers = kRegisters) {
  int64_t const got = gluon_decode_grid(items, shared, threads, registers, kSms);
  CHECK(got == want, std::string(why) + ": " + std::to_string(items) + " items, " + std::to_string(shared) +
                         " B shared -> " + std::to_string(got) + " programs, expected " + std::to_string(want));
}

}  // namespace

int main() {
  // Batch 128 at 4k, GQA 32/8: four rounds of 264 slots (97% busy) rather than three of 396 (86%), run by 256
  // programs of four items each.
  expect(1024, kThreeFit, 256, "(128, 4k)");
  expect(512, kThreeFit, 256, "(32, 32k), 2 splits");
  expect(2000, kThreeFit, 250, "eight rounds of 264 (95%) over six of 396 (84%)");
  // 780 items fill two rounds of 396 and three of 264 alike (98.5%): the tie goes to more programs per SM.
  expect(780, kThreeFit, 390, "tie");
  // Fewer items than either count of slots: one program per item.
  expect(256, kThreeFit, 256, "(8, 128k), 4 splits");
  expect(100, kThreeFit, 100, "a small batch");
  expect(1, kThreeFit, 1, "one item");
  // Four fit: 1024 items in two rounds of 528 (97%) ties with four of 264; the tie goes to four per SM.
  expect(1024, kFourFit, 512, "four per SM", kThreads, 64);
  expect(1024, kFourFit, 256, "four by shared memory, three by registers (80)");
  // 1200 items: three rounds of 528 or four of 396 (76% busy either way), five of 264 (91%).
  expect(1200, kFourFit, 240, "two per SM although four fit", kThreads, 64);
  // Only one CTA fits: one program per SM, never more than can be resident.
  expect(5000, kOneFits, kSms, "one fits");
  expect(133, kOneFits, 67, "one fits, two rounds");
  // Registers: 396 items would be one round of three per SM by shared memory alone, but only two CTAs of 384
  // threads x 80 registers fit: two rounds of 264 slots, 198 programs (396 would leave 132 waiting for a slot).
  expect(396, kWideShared, 198, "two fit by registers", kWideThreads);
  expect(396, kWideShared, 396, "no register cap: three by shared memory", kWideThreads, 0);
  expect(1024, kWideShared, 256, "(128, 4k), two fit by registers", kWideThreads);
  for (int64_t items = 1; items <= 5000; items += 37) {
    for (int64_t shared : {kThreeFit, kFourFit, kOneFits, kWideShared}) {
      int64_t const threads = shared == kWideShared ? kWideThreads : kThreads;
      int64_t const got = gluon_decode_grid(items, shared, threads, kRegisters, kSms);
      CHECK(got >= 1 && got <= items && got <= 4 * kSms, std::to_string(items) + " items: " + std::to_string(got));
      // Balanced: one program fewer would need another round (so each walks `rounds` or `rounds - 1` items).
      int64_t const rounds = (items + got - 1) / got;
      CHECK((got - 1) * rounds < items, std::to_string(items) + " items in " + std::to_string(rounds) +
                                            " rounds need fewer than " + std::to_string(got) + " programs");
    }
  }
  return fp8attn_test::finish("test_paged_decode_grid");
}
