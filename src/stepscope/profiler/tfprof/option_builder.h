// ProfileOptionBuilder (tensorflow/python/profiler/option_builder.py): presets and chainable
// setters that build ProfileOptions.
//
//   auto opts = ProfileOptionBuilder(ProfileOptionBuilder::time_and_memory())
//                   .with_node_names({.show = {".*dense.*"}})
//                   .with_max_depth(4)
//                   .build();
//   profiler.profile_name_scope(opts);
//
// Like TensorFlow's, the builder does not validate values: the profile_* call does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "stepscope/profiler/tfprof/options.h"

namespace stepscope {

class ProfileOptionBuilder {
 public:
  // The builder's defaults: max_depth 100, every min_* 0, order_by "name", account/start/show
  // ".*", trim/hide none, account_displayed_op_only false, select {"micros"}, step -1, stdout.
  ProfileOptionBuilder();
  explicit ProfileOptionBuilder(ProfileOptions options) : options_(std::move(options)) {}

  // Parameters of the trainable variables, for the scope view: max_depth 10000, accounted type
  // "_trainable_variables", account_displayed_op_only, select {"params"}, order_by "name".
  static ProfileOptions trainable_variables_parameter();
  // Float operations: max_depth 10000, min_float_ops 1, order_by "float_ops",
  // account_displayed_op_only, select {"float_ops"}.
  static ProfileOptions float_operation();
  // Time and memory: max_depth 10000, the floors given, order_by "micros",
  // account_displayed_op_only, select {"micros", "bytes"}.
  static ProfileOptions time_and_memory(int64_t min_micros = 1, int64_t min_bytes = 1,
                                        int64_t min_accelerator_micros = 0, int64_t min_cpu_micros = 0,
                                        int64_t min_peak_bytes = 0, int64_t min_residual_bytes = 0,
                                        int64_t min_output_bytes = 0);

  ProfileOptions build() const { return options_; }

  ProfileOptionBuilder& with_max_depth(int max_depth);
  // Sets all four memory floors.
  ProfileOptionBuilder& with_min_memory(int64_t min_bytes = 0, int64_t min_peak_bytes = 0,
                                        int64_t min_residual_bytes = 0, int64_t min_output_bytes = 0);
  // The same as with_min_memory (the name some users write).
  ProfileOptionBuilder& with_min_bytes(int64_t min_bytes = 0, int64_t min_peak_bytes = 0,
                                       int64_t min_residual_bytes = 0, int64_t min_output_bytes = 0) {
    return with_min_memory(min_bytes, min_peak_bytes, min_residual_bytes, min_output_bytes);
  }
  // Sets all three time floors.
  ProfileOptionBuilder& with_min_execution_time(int64_t min_micros = 0, int64_t min_accelerator_micros = 0,
                                                int64_t min_cpu_micros = 0);
  ProfileOptionBuilder& with_min_parameters(int64_t min_params);
  ProfileOptionBuilder& with_min_occurrence(int64_t min_occurrence);
  ProfileOptionBuilder& with_min_float_operations(int64_t min_float_ops);
  ProfileOptionBuilder& with_accounted_types(std::vector<std::string> account_type_regexes);

  // Only the lists given are replaced (Python's None = std::nullopt).
  struct NodeNames {
    std::optional<std::vector<std::string>> start = std::nullopt;
    std::optional<std::vector<std::string>> show = std::nullopt;
    std::optional<std::vector<std::string>> hide = std::nullopt;
    std::optional<std::vector<std::string>> trim = std::nullopt;
  };
  ProfileOptionBuilder& with_node_names(const NodeNames& names);
  ProfileOptionBuilder& with_node_names(std::optional<std::vector<std::string>> start_name_regexes,
                                        std::optional<std::vector<std::string>> show_name_regexes = std::nullopt,
                                        std::optional<std::vector<std::string>> hide_name_regexes = std::nullopt,
                                        std::optional<std::vector<std::string>> trim_name_regexes = std::nullopt);

  ProfileOptionBuilder& account_displayed_op_only(bool is_true);
  ProfileOptionBuilder& with_empty_output();                                     // "none"
  ProfileOptionBuilder& with_stdout_output();                                    // "stdout"
  ProfileOptionBuilder& with_file_output(const std::string& outfile);            // "file:outfile=<outfile>"
  ProfileOptionBuilder& with_timeline_output(const std::string& timeline_file);  // "timeline:outfile=<f>"
  ProfileOptionBuilder& with_pprof_output(const std::string& pprof_file);        // "pprof:outfile=<f>"
  ProfileOptionBuilder& order_by(const std::string& attribute);
  ProfileOptionBuilder& select(std::vector<std::string> attributes);
  ProfileOptionBuilder& with_step(int64_t step);

 private:
  ProfileOptions options_;
};

}  // namespace stepscope
