// ProfileOptions: what a tfprof view shows and how (tensorflow/core/profiler/tfprof_options.h and
// g3doc/options.md). A view (1) builds its structure, (2) accounts the nodes whose op types (op
// type, device, "_trainable_variables") fully match one of account_type_regexes, (3) applies the
// display filters (start/trim/show/hide_name_regexes, the min_* floors, max_depth) and (4)
// writes the output. Hidden nodes still count in their ancestors' totals unless
// account_displayed_op_only.
//
// A default-constructed ProfileOptions has the values TensorFlow's Python layer fills in for
// missing keys (_build_options): max_depth 10, no regexes (so nothing is accounted or shown but
// the root), select empty, output "stdout". ProfileOptionBuilder starts from the builder's
// defaults instead (max_depth 100, '.*' everywhere, select micros) — use it.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace stepscope {

// The values of order_by, in TensorFlow's order (kOrderBy).
inline constexpr std::array<std::string_view, 11> kProfileOrderBy = {
    "name",       "bytes",  "peak_bytes", "residual_bytes", "output_bytes", "micros", "accelerator_micros",
    "cpu_micros", "params", "float_ops",  "occurrence"};

// The values of select, in TensorFlow's order (kShown; append-only).
inline constexpr std::array<std::string_view, 14> kProfileSelect = {
    "bytes",      "micros",     "params",         "float_ops",    "tensor_value",
    "device",     "op_types",   "occurrence",     "input_shapes", "accelerator_micros",
    "cpu_micros", "peak_bytes", "residual_bytes", "output_bytes"};

// The output types (kOutput): timeline:outfile=F, stdout, file:outfile=F, pprof:outfile=F, none.
inline constexpr std::array<std::string_view, 5> kProfileOutputTypes = {"timeline", "stdout", "file", "pprof", "none"};

struct ProfileOptions {
  int max_depth = 10;
  int64_t min_bytes = 0;  // total requested bytes
  int64_t min_peak_bytes = 0;
  int64_t min_residual_bytes = 0;
  int64_t min_output_bytes = 0;
  int64_t min_micros = 0;  // total execution time (accelerator + cpu)
  int64_t min_accelerator_micros = 0;
  int64_t min_cpu_micros = 0;
  int64_t min_params = 0;
  int64_t min_float_ops = 0;
  int64_t min_occurrence = 0;
  int64_t step = -1;  // -1: the average of every added step
  std::string order_by = "name";
  std::vector<std::string> account_type_regexes;
  std::vector<std::string> start_name_regexes;
  std::vector<std::string> trim_name_regexes;
  std::vector<std::string> show_name_regexes;
  std::vector<std::string> hide_name_regexes;
  bool account_displayed_op_only = false;
  std::vector<std::string> select;  // a set: order and repeats do not matter
  std::string output = "stdout";
  std::string dump_to_file;  // deprecated: when set, output becomes file:outfile=<dump_to_file>

  // TensorFlow's Options::ToString(): one line per option, the flag name left-justified in 28
  // columns ("-max_depth                  10"), select sorted, the output as "type:key=value".
  // Throws as parse_profile_output when the output is invalid.
  std::string to_string() const;
};

// A parsed `output` option.
struct ProfileOutput {
  std::string type;                            // one of kProfileOutputTypes
  std::map<std::string, std::string> options;  // e.g. {"outfile", "/tmp/x"}
};

// Parses `output` as TensorFlow's ParseOutput does ("" means stdout). InvalidArgumentError with
// TensorFlow's texts (without their final newline):
//   "E.g. Unknown output type: <t>, Valid types: file,none,pprof,stdout,timeline"
//   "Visualize format: -output timeline:key=value,key=value,..."
//   "Unrecognized options <key> for output_type: <t>"
//   "Missing required output_options for <t>\nE.g. -output <t>:outfile=..."
ProfileOutput parse_profile_output(std::string_view output);

// Checks every value a view depends on; InvalidArgumentError in the words of the tfprof command
// line ("Invalid option '-order_by' value: 'time'", "Invalid option '-select' value: 'a,b'",
// "Invalid option '-show_name_regexes' value: '(['" for a regex that does not compile), or the
// output's errors above. The command line calls it; the profile_* methods are lenient as
// TensorFlow's Python API is (unknown select fields ignored, an unknown order_by orders by name,
// each with a warning in the profiler's log) and throw only for bad regexes and outputs.
void validate_profile_options(const ProfileOptions& options);

}  // namespace stepscope
