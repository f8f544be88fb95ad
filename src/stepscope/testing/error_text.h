// The message of the exception a piece of test code throws.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "stepscope/base/error.h"

namespace stepscope::testing {

// The message of the E that f() throws; a test failure (and "") when it throws nothing. Any
// other exception propagates, so a test expecting E fails on the wrong kind.
template <typename E = Error, typename F>
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
