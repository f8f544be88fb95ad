#include "stepscope/profiler/tfprof/format.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <initializer_list>
#include <vector>

#include "stepscope/profiler/tfprof/view_options.h"

namespace stepscope::tfprof {
namespace {

constexpr std::string_view kTotalMicrosHelp =
    "total execution time: Sum of accelerator execution time and cpu execution time.";
constexpr std::string_view kAccMicrosHelp =
    "accelerator execution time: Time spent executing on the accelerator. This is normally measured by the "
    "actual hardware library.";
constexpr std::string_view kCpuHelp =
    "cpu execution time: The time from the start to the end of the operation. It's the sum of actual cpu run "
    "time plus the time that it spends waiting if part of computation is launched asynchronously.";
constexpr std::string_view kBytesHelp = "requested bytes: The memory requested by the operation, accumulatively.";
constexpr std::string_view kPeakBytesHelp =
    "peak bytes: The peak amount of memory that the operation is holding at some point.";
constexpr std::string_view kResidualBytesHelp =
    "residual bytes: The memory not de-allocated after the operation finishes.";
constexpr std::string_view kOutputBytesHelp =
    "output bytes: The memory that is output from the operation (not necessarilty allocated by the operation)";
constexpr std::string_view kOccurrenceHelp = "occurrence: The number of times it occurs";
constexpr std::string_view kInputShapesHelp = "input shape: The shape of input tensors";
constexpr std::string_view kDeviceHelp = "device: which device is placed on.";
constexpr std::string_view kFloatOpsHelp =
    "flops: Number of float operations. Note: Please read the implementation for the math behind it.";
constexpr std::string_view kParamsHelp = "param: Number of parameters (in the Variable).";
constexpr std::string_view kTensorValueHelp = "tensor_value: Not supported now.";
constexpr std::string_view kOpTypesHelp =
    "op_types: The attributes of the operation, includes the Kernel name device placed on and user-defined "
    "strings.";

constexpr std::string_view kScopeHelp =
    "scope: The nodes in the model graph are organized by their names, which is hierarchical like filesystem.";
constexpr std::string_view kGraphHelp =
    "graph: The nodes in the model graph are organized by their operation input and output.";
constexpr std::string_view kCodeHelp =
    "code: When python trace is available, the nodes are python lines and their are organized by the python "
    "call stack.";
constexpr std::string_view kOpHelp =
    "op: The nodes are operation kernel type, such as MatMul, Conv2D. Graph nodes belonging to the same type are "
    "aggregated together.";
constexpr std::string_view kAdviseHelp = "advise: Automatically profile and discover issues. (Experimental)";

}  // namespace

namespace {
// Each writes at `at` and returns the end; at most kInUnitsMaxChars chars in all (an int64 is 20
// at most with its sign, "%.2f" of one over 1000 is 19, a unit 3).
char* write_integer(char* at, int64_t n) { return std::to_chars(at, at + 20, n).ptr; }
char* write_unit(char* at, std::string_view unit) { return std::copy(unit.begin(), unit.end(), at); }
// "%.2f" of value, then the unit. std::to_chars writes what printf would in the "C" locale, in a
// fraction of the time: a deep graph view formats a total this way on every line.
char* write_fixed(char* at, double value, std::string_view unit) {
  const auto result = std::to_chars(at, at + kInUnitsMaxChars - unit.size(), value, std::chars_format::fixed, 2);
  return write_unit(result.ec == std::errc() ? result.ptr : at, unit);
}

// "%.2f" of value / scale (value >= scale >= 1000, a power of 10), then the unit: in integers
// (a deep graph view prints two such totals a line, and to_chars of a double took a quarter of
// its time), where they round as printf rounds the double quotient: everywhere but where the
// exact quotient is halfway between two results (1.005 is a little under as a double), and
// where a double is too coarse for the quotient's cents (from ~2^45), which the double decides.
char* write_quotient(char* at, int64_t value, int64_t scale, std::string_view unit) {
  const int64_t cent = scale / 100, rest = value % cent;
  if (value >= (int64_t{1} << 45) || 2 * rest == cent)
    return write_fixed(at, static_cast<double>(value) / static_cast<double>(scale), unit);
  const int64_t cents = value / cent + (2 * rest > cent ? 1 : 0);
  at = write_integer(at, cents / 100);
  *at++ = '.';
  *at++ = static_cast<char>('0' + cents % 100 / 10);
  *at++ = static_cast<char>('0' + cents % 10);
  return write_unit(at, unit);
}

// Below 1000: the integer and units[0]; else "%.2f" in the largest unit (a step of 1000 each) it
// reaches.
char* write_in_units(char* at, int64_t value, std::initializer_list<std::string_view> units) {
  if (value < 1000) return write_unit(write_integer(at, value), *units.begin());
  int64_t scale = 1000;
  size_t unit = 1;
  while (unit + 1 < units.size() && value / 1000 >= scale) {
    scale *= 1000;
    ++unit;
  }
  return write_quotient(at, value, scale, units.begin()[unit]);
}
}  // namespace

char* write_number(char* at, int64_t n) { return write_in_units(at, n, {"", "k", "m", "b"}); }
char* write_time(char* at, int64_t micros) { return write_in_units(at, micros, {"us", "ms", "sec"}); }
char* write_memory(char* at, int64_t bytes) { return write_in_units(at, bytes, {"B", "KB", "MB"}); }

void append_dims(std::string& out, std::span<const int64_t> dims) {
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) out += 'x';
    char buf[kInUnitsMaxChars];
    out.append(buf, write_integer(buf, dims[i]));
  }
}

std::string format_number(int64_t n) {
  char buf[kInUnitsMaxChars];
  return {buf, write_number(buf, n)};
}
std::string format_time(int64_t micros) {
  char buf[kInUnitsMaxChars];
  return {buf, write_time(buf, micros)};
}
std::string format_memory(int64_t bytes) {
  char buf[kInUnitsMaxChars];
  return {buf, write_memory(buf, bytes)};
}
std::string format_dims(std::span<const int64_t> dims) {
  std::string out;
  append_dims(out, dims);
  return out;
}

std::string query_doc(std::string_view cmd, uint32_t select) {
  std::string_view cmd_help;
  std::string unknown;
  // TensorFlow prints the scope help for the graph view too (a slip); the graph's own is used here.
  if (cmd == "scope")
    cmd_help = kScopeHelp;
  else if (cmd == "graph")
    cmd_help = kGraphHelp;
  else if (cmd == "code")
    cmd_help = kCodeHelp;
  else if (cmd == "op")
    cmd_help = kOpHelp;
  else if (cmd == "advise")
    cmd_help = kAdviseHelp;
  else
    cmd_help = unknown = "Unknown command: " + std::string(cmd);

  // TensorFlow keeps select in a std::set: the helps come in alphabetical order of the names.
  struct Help {
    std::string_view name;
    Field field;
  };
  static constexpr Help kAlphabetical[] = {
      {"accelerator_micros", Field::kAcceleratorMicros},
      {"bytes", Field::kBytes},
      {"cpu_micros", Field::kCpuMicros},
      {"device", Field::kDevice},
      {"float_ops", Field::kFloatOps},
      {"input_shapes", Field::kInputShapes},
      {"micros", Field::kMicros},
      {"occurrence", Field::kOccurrence},
      {"op_types", Field::kOpTypes},
      {"output_bytes", Field::kOutputBytes},
      {"params", Field::kParams},
      {"peak_bytes", Field::kPeakBytes},
      {"residual_bytes", Field::kResidualBytes},
      {"tensor_value", Field::kTensorValue},
  };
  std::vector<std::string> helps;
  for (const Help& h : kAlphabetical) {
    if (!((select >> static_cast<int>(h.field)) & 1u)) continue;
    switch (h.field) {
      case Field::kBytes:
        helps.emplace_back(kBytesHelp);
        break;
      case Field::kMicros:
        helps.push_back(std::string(kTotalMicrosHelp) + "\n" + std::string(kCpuHelp) + "\n" +
                        std::string(kAccMicrosHelp));
        break;
      case Field::kParams:
        helps.emplace_back(kParamsHelp);
        break;
      case Field::kFloatOps:
        helps.emplace_back(kFloatOpsHelp);
        break;
      case Field::kTensorValue:
        helps.emplace_back(kTensorValueHelp);
        break;
      case Field::kDevice:
        helps.emplace_back(kDeviceHelp);
        break;
      case Field::kOpTypes:
        helps.emplace_back(kOpTypesHelp);
        break;
      case Field::kOccurrence:
        helps.emplace_back(kOccurrenceHelp);
        break;
      case Field::kInputShapes:
        helps.emplace_back(kInputShapesHelp);
        break;
      case Field::kAcceleratorMicros:
        helps.emplace_back(kAccMicrosHelp);
        break;
      case Field::kCpuMicros:
        helps.emplace_back(kCpuHelp);
        break;
      case Field::kPeakBytes:
        helps.emplace_back(kPeakBytesHelp);
        break;
      case Field::kResidualBytes:
        helps.emplace_back(kResidualBytesHelp);
        break;
      case Field::kOutputBytes:
        helps.emplace_back(kOutputBytesHelp);
        break;
    }
  }
  std::string doc = "\nDoc:\n";
  doc += cmd_help;
  doc += '\n';
  for (size_t i = 0; i < helps.size(); ++i) {
    if (i) doc += '\n';
    doc += helps[i];
  }
  doc += "\n\n";
  return doc;
}

}  // namespace stepscope::tfprof
