// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11), the
// counter-based generator TensorFlow's random ops use, and the distributions built on it.
//
// Counter-based means block i of a stream is a pure function of (key, counter + i): a kernel can
// fill any slice of its output without generating what comes before it, so results do not
// depend on how the work is split over threads.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numbers>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace stepscope::philox {

using Counter = std::array<uint32_t, 4>;
using Key = std::array<uint32_t, 2>;
using Block = std::array<uint32_t, 4>;

inline Block philox4x32_10(Counter ctr, Key key) {
  constexpr uint32_t kMulA = 0xD2511F53, kMulB = 0xCD9E8D57;
  constexpr uint32_t kWeylA = 0x9E3779B9, kWeylB = 0xBB67AE85;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kMulA) * ctr[0];
    const uint64_t p1 = static_cast<uint64_t>(kMulB) * ctr[2];
    ctr = {static_cast<uint32_t>(p1 >> 32) ^ ctr[1] ^ key[0], static_cast<uint32_t>(p1),
           static_cast<uint32_t>(p0 >> 32) ^ ctr[3] ^ key[1], static_cast<uint32_t>(p0)};
    key[0] += kWeylA;
    key[1] += kWeylB;
  }
  return ctr;
}

// One stream: TensorFlow's layout (seed -> key, seed2 -> the high half of the counter).
// block(i) is block number `i` of the stream; the 128-bit addition carries into the seed2 half
// only after 2^64 blocks.
struct Stream {
  Key key;
  Counter base;

  Stream(uint64_t seed, uint64_t seed2)
      : key{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)},
        base{0, 0, static_cast<uint32_t>(seed2), static_cast<uint32_t>(seed2 >> 32)} {}

  Block block(uint64_t i) const {
    const uint64_t lo = (static_cast<uint64_t>(base[1]) << 32 | base[0]) + i;
    const uint64_t carry = lo < i ? 1 : 0;
    const uint64_t hi = (static_cast<uint64_t>(base[3]) << 32 | base[2]) + carry;
    return philox4x32_10({static_cast<uint32_t>(lo), static_cast<uint32_t>(lo >> 32), static_cast<uint32_t>(hi),
                          static_cast<uint32_t>(hi >> 32)},
                         key);
  }
};

// Blocks first, first+1, ..., first+n-1 of `stream` (the same values as stream.block(i)), eight
// at a time with AVX2 where available.
inline void generate_blocks(const Stream& stream, uint64_t first, int64_t n, Block* out) {
  int64_t done = 0;
#if defined(__AVX2__)
  const uint64_t base_lo = static_cast<uint64_t>(stream.base[1]) << 32 | stream.base[0];
  const __m256i mul_a = _mm256_set1_epi32(static_cast<int>(0xD2511F53u));
  const __m256i mul_b = _mm256_set1_epi32(static_cast<int>(0xCD9E8D57u));
  // 64-bit products of the 32-bit lanes of a and m: (low halves, high halves), lane order kept.
  auto mul_wide = [](__m256i a, __m256i m, __m256i& lo, __m256i& hi) {
    const __m256i even = _mm256_mul_epu32(a, m);
    const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
    lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
    hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
  };
  for (; n - done >= 8; done += 8) {
    const uint64_t lo0 = base_lo + first + static_cast<uint64_t>(done);
    if (static_cast<uint32_t>(lo0) > 0xFFFFFFF8u) {  // a carry inside the batch: rare, do it plainly
      for (int l = 0; l < 8; ++l) out[done + l] = stream.block(first + static_cast<uint64_t>(done + l));
      continue;
    }
    const uint64_t hi = (static_cast<uint64_t>(stream.base[3]) << 32 | stream.base[2]) + (lo0 < base_lo ? 1 : 0);
    __m256i c0 = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(lo0))),
                                  _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    __m256i c1 = _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(lo0 >> 32)));
    __m256i c2 = _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(hi)));
    __m256i c3 = _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(hi >> 32)));
    uint32_t k0 = stream.key[0], k1 = stream.key[1];
    for (int round = 0; round < 10; ++round) {
      __m256i lo_a, hi_a, lo_b, hi_b;
      mul_wide(c0, mul_a, lo_a, hi_a);
      mul_wide(c2, mul_b, lo_b, hi_b);
      const __m256i n0 = _mm256_xor_si256(_mm256_xor_si256(hi_b, c1), _mm256_set1_epi32(static_cast<int>(k0)));
      const __m256i n2 = _mm256_xor_si256(_mm256_xor_si256(hi_a, c3), _mm256_set1_epi32(static_cast<int>(k1)));
      c0 = n0, c1 = lo_b, c2 = n2, c3 = lo_a;
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    // Lanes (one word of eight blocks each) to eight consecutive blocks.
    const __m256i t0 = _mm256_unpacklo_epi32(c0, c1), t1 = _mm256_unpackhi_epi32(c0, c1);
    const __m256i t2 = _mm256_unpacklo_epi32(c2, c3), t3 = _mm256_unpackhi_epi32(c2, c3);
    const __m256i b04 = _mm256_unpacklo_epi64(t0, t2), b15 = _mm256_unpackhi_epi64(t0, t2);
    const __m256i b26 = _mm256_unpacklo_epi64(t1, t3), b37 = _mm256_unpackhi_epi64(t1, t3);
    auto* dst = reinterpret_cast<__m256i*>(out + done);
    _mm256_storeu_si256(dst + 0, _mm256_permute2x128_si256(b04, b15, 0x20));
    _mm256_storeu_si256(dst + 1, _mm256_permute2x128_si256(b26, b37, 0x20));
    _mm256_storeu_si256(dst + 2, _mm256_permute2x128_si256(b04, b15, 0x31));
    _mm256_storeu_si256(dst + 3, _mm256_permute2x128_si256(b26, b37, 0x31));
  }
#endif
  for (; done < n; ++done) out[done] = stream.block(first + static_cast<uint64_t>(done));
}

// [0, 1) from 23 random mantissa bits (TensorFlow's Uint32ToFloat).
inline float uniform_float(uint32_t x) {
  const uint32_t bits = (127u << 23) | (x & 0x7fffffu);
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f - 1.0f;
}

// [0, 1) from 52 random mantissa bits (TensorFlow's Uint64ToDouble).
inline double uniform_double(uint32_t x0, uint32_t x1) {
  const uint64_t bits = (1023ull << 52) | ((static_cast<uint64_t>(x0) << 32 | x1) & ((1ull << 52) - 1));
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d - 1.0;
}

// Box-Muller: two independent standard normals from two uniforms (u1 kept away from 0 so the
// log stays finite, as TensorFlow does).
template <typename T>
inline void box_muller(T u1, T u2, T& z0, T& z1) {
  constexpr T kEpsilon = static_cast<T>(1e-7);
  if (u1 < kEpsilon) u1 = kEpsilon;
  const T radius = std::sqrt(static_cast<T>(-2) * std::log(u1));
  const T theta = static_cast<T>(2 * std::numbers::pi) * u2;
  z0 = radius * std::sin(theta);
  z1 = radius * std::cos(theta);
}

// Values of type T one Philox block yields for each distribution.
template <typename T>
inline constexpr int kUniformPerBlock = sizeof(T) == 4 ? 4 : 2;
template <typename T>
inline constexpr int kNormalPerBlock = sizeof(T) == 4 ? 4 : 2;

template <typename T>
inline void normal_block(const Block& b, T* out) {
  if constexpr (sizeof(T) == 4) {
    box_muller<float>(uniform_float(b[0]), uniform_float(b[1]), out[0], out[1]);
    box_muller<float>(uniform_float(b[2]), uniform_float(b[3]), out[2], out[3]);
  } else {
    box_muller<double>(uniform_double(b[0], b[1]), uniform_double(b[2], b[3]), out[0], out[1]);
  }
}

}  // namespace stepscope::philox
