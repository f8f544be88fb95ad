#include "stepscope/profiler/tfprof/option_builder.h"

namespace stepscope {
namespace {

// What every preset shares with the builder's defaults.
ProfileOptions preset_base() {
  ProfileOptions o;
  o.max_depth = 10000;
  o.order_by = "name";
  o.account_type_regexes = {".*"};
  o.start_name_regexes = {".*"};
  o.trim_name_regexes = {};
  o.show_name_regexes = {".*"};
  o.hide_name_regexes = {};
  o.account_displayed_op_only = true;
  o.step = -1;
  o.output = "stdout";
  return o;
}

}  // namespace

ProfileOptionBuilder::ProfileOptionBuilder() {
  options_ = preset_base();
  options_.max_depth = 100;
  options_.account_displayed_op_only = false;
  options_.select = {"micros"};
}

ProfileOptions ProfileOptionBuilder::trainable_variables_parameter() {
  ProfileOptions o = preset_base();
  o.account_type_regexes = {"_trainable_variables"};
  o.select = {"params"};
  return o;
}

ProfileOptions ProfileOptionBuilder::float_operation() {
  ProfileOptions o = preset_base();
  o.min_float_ops = 1;
  o.order_by = "float_ops";
  o.select = {"float_ops"};
  return o;
}

ProfileOptions ProfileOptionBuilder::time_and_memory(int64_t min_micros, int64_t min_bytes,
                                                     int64_t min_accelerator_micros, int64_t min_cpu_micros,
                                                     int64_t min_peak_bytes, int64_t min_residual_bytes,
                                                     int64_t min_output_bytes) {
  ProfileOptions o = preset_base();
  o.min_bytes = min_bytes;
  o.min_peak_bytes = min_peak_bytes;
  o.min_residual_bytes = min_residual_bytes;
  o.min_output_bytes = min_output_bytes;
  o.min_micros = min_micros;
  o.min_accelerator_micros = min_accelerator_micros;
  o.min_cpu_micros = min_cpu_micros;
  o.order_by = "micros";
  o.select = {"micros", "bytes"};
  return o;
}

ProfileOptionBuilder& ProfileOptionBuilder::with_max_depth(int max_depth) {
  options_.max_depth = max_depth;
  return *this;
}

ProfileOptionBuilder& ProfileOptionBuilder::with_min_memory(int64_t min_bytes, int64_t min_peak_bytes,
                                                            int64_t min_residual_bytes, int64_t min_output_bytes) {
  options_.min_bytes = min_bytes;
  options_.min_peak_bytes = min_peak_bytes;
  options_.min_residual_bytes = min_residual_bytes;
  options_.min_output_bytes = min_output_bytes;
  return *this;
}

ProfileOptionBuilder& ProfileOptionBuilder::with_min_execution_time(int64_t min_micros, int64_t min_accelerator_micros,
                                                                    int64_t min_cpu_micros) {
  options_.min_micros = min_micros;
  options_.min_accelerator_micros = min_accelerator_micros;
  options_.min_cpu_micros = min_cpu_micros;
  return *this;
}

ProfileOptionBuilder& ProfileOptionBuilder::with_min_parameters(int64_t min_params) {
  options_.min_params = min_params;
  return *this;
}

ProfileOptionBuilder& ProfileOptionBuilder::with_min_occurrence(int64_t min_occurrence) {
  options_.min_occurrence = min_occurrence;
  return *this;
}

ProfileOptionBuilder& ProfileOptionBuilder::with_min_float_operations(int64_t min_float_ops) {
  options_.min_float_ops = min_float_ops;
  return *this;
}

ProfileOptionBuilder& ProfileOptionBuilder::with_accounted_types(std::vector<std::string> account_type_regexes) {
  options_.account_type_regexes = std::move(account_type_regexes);
  return *this;
}

ProfileOptionBuilder& ProfileOptionBuilder::with_node_names(const NodeNames& names) {
  if (names.start) options_.start_name_regexes = *names.start;
  if (names.show) options_.show_name_regexes = *names.show;
  if (names.hide) options_.hide_name_regexes = *names.hide;
  if (names.trim) options_.trim_name_regexes = *names.trim;
  return *this;
}

ProfileOptionBuilder& ProfileOptionBuilder::with_node_names(std::optional<std::vector<std::string>> start_name_regexes,
                                                            std::optional<std::vector<std::string>> show_name_regexes,
                                                            std::optional<std::vector<std::string>> hide_name_regexes,
                                                            std::optional<std::vector<std::string>> trim_name_regexes) {
  return with_node_names(NodeNames{std::move(start_name_regexes), std::move(show_name_regexes),
                                   std::move(hide_name_regexes), std::move(trim_name_regexes)});
}

ProfileOptionBuilder& ProfileOptionBuilder::account_displayed_op_only(bool is_true) {
  options_.account_displayed_op_only = is_true;
  return *this;
}

ProfileOptionBuilder& ProfileOptionBuilder::with_empty_output() {
  options_.output = "none";
  return *this;
}

ProfileOptionBuilder& ProfileOptionBuilder::with_stdout_output() {
  options_.output = "stdout";
  return *this;
}

ProfileOptionBuilder& ProfileOptionBuilder::with_file_output(const std::string& outfile) {
  options_.output = "file:outfile=" + outfile;
  return *this;
}

ProfileOptionBuilder& ProfileOptionBuilder::with_timeline_output(const std::string& timeline_file) {
  options_.output = "timeline:outfile=" + timeline_file;
  return *this;
}

ProfileOptionBuilder& ProfileOptionBuilder::with_pprof_output(const std::string& pprof_file) {
  options_.output = "pprof:outfile=" + pprof_file;
  return *this;
}

ProfileOptionBuilder& ProfileOptionBuilder::order_by(const std::string& attribute) {
  options_.order_by = attribute;
  return *this;
}

ProfileOptionBuilder& ProfileOptionBuilder::select(std::vector<std::string> attributes) {
  options_.select = std::move(attributes);
  return *this;
}

ProfileOptionBuilder& ProfileOptionBuilder::with_step(int64_t step) {
  options_.step = step;
  return *this;
}

}  // namespace stepscope
