// Helpers shared by the tests of every layer (test code only).
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace stepscope::testing {

// The message of the E that f() throws; a test failure (and "") when it throws nothing.
template <typename E, typename F>
std::string error_text(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an exception";
  return "";
}

}  // namespace stepscope::testing
