// tfprof's number formatting (tfprof_utils.cc) and the help text it prints before a view.
// Units are decimal (1000-based) and stop at MB / billions: 999B, 1.28KB, 2.56MB, 1234.57MB.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace stepscope::tfprof {

// "999", "1.28k", "930.58k", "1.20m", "3.00b".
std::string format_number(int64_t n);
// "13us", "4.29ms", "1.37sec".
std::string format_time(int64_t micros);
// "0B", "1.28KB", "14.59MB".
std::string format_memory(int64_t bytes);
// Dimensions joined by 'x' ("3x3x3x6"); TensorFlow's shape vectors: a scalar is {1}, an unknown
// shape is {} (printed "" here, "unknown" in input shapes), an unknown dimension -1.
std::string format_dims(std::span<const int64_t> dims);
// The dims appended to `out` (no string of their own: views format every node's line).
void append_dims(std::string& out, std::span<const int64_t> dims);
// The first three written at `at`, which has room for kInUnitsMaxChars chars; they return the
// end. A view's line goes through a buffer of its own: a string append a number took ~half of
// a deep graph view's lines' time.
inline constexpr size_t kInUnitsMaxChars = 32;
char* write_number(char* at, int64_t n);
char* write_time(char* at, int64_t micros);
char* write_memory(char* at, int64_t bytes);

// "\nDoc:\n<command help>\n<one help per selected field, alphabetically>\n\n" (QueryDoc).
// `select` is the bit set of ViewOptions::select.
std::string query_doc(std::string_view cmd, uint32_t select);

// Prefixes of a view's text (TFStats::ShowGraphNode / ShowMultiGraphNode) and the banners of
// stdout output (print_model_analysis.cc).
inline constexpr std::string_view kProfilePrefix = "Profile:\n";
inline constexpr std::string_view kOptionsBanner = "\n=========================Options=============================\n";
inline constexpr std::string_view kReportBanner = "\n==================Model Analysis Report======================\n";
inline constexpr std::string_view kEndBanner = "\n======================End of Report==========================\n";
inline constexpr std::string_view kMissingAcceleratorStream =
    "\n\nFound accelerator operation but misses accelerator stream stats!\n\n"
    "It's likely a gpu tracing issue rather than tf-profiler issue.\n"
    "If you found your operation missing accelerator time, consider to post to discuss@tensorflow.org!\n\n";

}  // namespace stepscope::tfprof
