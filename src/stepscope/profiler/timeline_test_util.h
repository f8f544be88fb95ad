// Helpers for the profiler's tests: traced steps of small graphs, and reading traces back.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "stepscope/profiler/trace_validator.h"
#include "stepscope/runtime/session.h"

namespace stepscope::testing {

// FULL_TRACE run of `fetches`.
inline RunMetadata traced_run(Session& session, const std::vector<Output>& fetches, const FeedList& feeds = {},
                              const std::vector<Node*>& targets = {}) {
  RunOptions options;
  options.trace_level = TraceLevel::kFullTrace;
  RunMetadata metadata;
  session.run(feeds, fetches, targets, options, &metadata);
  return metadata;
}

// Parses a trace and checks what TensorFlow's _validateTrace checks (it parses, has
// traceEvents, every event has ph), and that validate_chrome_trace finds no problem at all.
inline nlohmann::json validated(const std::string& trace) {
  nlohmann::json j = nlohmann::json::parse(trace);
  EXPECT_TRUE(j.contains("traceEvents"));
  for (const auto& e : j["traceEvents"]) EXPECT_TRUE(e.contains("ph")) << e.dump();
  for (const TraceProblem& p : validate_chrome_trace(trace))
    ADD_FAILURE() << (p.warning ? "warning " : "error ") << p.rule << ": " << p.message;
  return j;
}

inline std::vector<nlohmann::json> events(const nlohmann::json& trace, std::string_view ph) {
  std::vector<nlohmann::json> out;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == ph) out.push_back(e);
  return out;
}

// ts/dur in integer ns (they are written as µs with three decimals).
inline int64_t ns_of(const nlohmann::json& us) { return std::llround(us.get<double>() * 1000); }

}  // namespace stepscope::testing
