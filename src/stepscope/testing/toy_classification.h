// A small three-class problem for tests that train: `rows` rows of `features` features in
// [-1, 1) from a fixed generator (the same on every rank and every run, no seed to share), the
// label 0, 1 or 2 by where Σ (k + 1) x_k falls (below -1, below 1, above).
#pragma once

#include <cstdint>
#include <vector>

namespace stepscope::testing {

inline void toy_classification(int64_t rows, int features, std::vector<float>& x, std::vector<int32_t>& y) {
  uint32_t state = 12345;
  auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return static_cast<float>(state >> 8) / static_cast<float>(1u << 24) * 2.0f - 1.0f;
  };
  for (int64_t i = 0; i < rows; ++i) {
    float sum = 0;
    for (int k = 0; k < features; ++k) {
      x.push_back(next());
      sum += x.back() * static_cast<float>(k + 1);
    }
    y.push_back(sum < -1 ? 0 : sum < 1 ? 1 : 2);
  }
}

}  // namespace stepscope::testing
