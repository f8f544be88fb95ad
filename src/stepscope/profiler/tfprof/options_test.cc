// ProfileOptions (defaults, ToString, validation with tfprof's error texts), ProfileOptionBuilder
// (defaults, presets, setters) and tfprof's number formatting.
#include "stepscope/profiler/tfprof/options.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "stepscope/base/error.h"
#include "stepscope/graph/graph.h"
#include "stepscope/profiler/tfprof/format.h"
#include "stepscope/profiler/tfprof/internal/show.h"
#include "stepscope/profiler/tfprof/option_builder.h"
#include "stepscope/profiler/tfprof/profiler.h"
#include "stepscope/profiler/tfprof/tfprof_test_util.h"
#include "stepscope/profiler/tfprof/view_options.h"
#include "stepscope/testing/error_text.h"

namespace stepscope {
namespace {

using V = std::vector<std::string>;

TEST(Format, Numbers) {
  using namespace tfprof;
  EXPECT_EQ(format_number(0), "0");
  EXPECT_EQ(format_number(999), "999");
  EXPECT_EQ(format_number(1000), "1.00k");
  EXPECT_EQ(format_number(1280), "1.28k");
  EXPECT_EQ(format_number(930580), "930.58k");
  EXPECT_EQ(format_number(999999), "1000.00k");
  EXPECT_EQ(format_number(1000000), "1.00m");
  EXPECT_EQ(format_number(1234567890), "1.23b");
  EXPECT_EQ(format_time(0), "0us");
  EXPECT_EQ(format_time(999), "999us");
  EXPECT_EQ(format_time(4293), "4.29ms");
  EXPECT_EQ(format_time(1370000), "1.37sec");
  EXPECT_EQ(format_memory(999), "999B");
  EXPECT_EQ(format_memory(1280), "1.28KB");
  EXPECT_EQ(format_memory(14592), "14.59KB");
  EXPECT_EQ(format_memory(2560000), "2.56MB");
  EXPECT_EQ(format_memory(5000000000), "5000.00MB");  // no GB
  EXPECT_EQ(format_dims(std::vector<int64_t>{3, 3, 3, 6}), "3x3x3x6");
  EXPECT_EQ(format_dims(std::vector<int64_t>{-1, 784}), "-1x784");
}

// The units' two decimals are printf's "%.2f" (TensorFlow's) for any int64, the ties included:
// 1.005, 1.015 and 1.025 are a little under as doubles.
TEST(Format, UnitsRoundAsPrintfDoes) {
  using namespace tfprof;
  auto printf_number = [](int64_t n) {
    if (n < 1000) return std::to_string(n);
    const char* units[] = {"", "k", "m", "b"};
    double scale = 1000;
    int unit = 1;
    while (unit + 1 < 4 && n >= scale * 1000) scale *= 1000, ++unit;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.2f%s", static_cast<double>(n) / scale, units[unit]);
    return std::string(buf);
  };
  EXPECT_EQ(format_number(1005), "1.00k");
  EXPECT_EQ(format_number(1015), "1.01k");
  EXPECT_EQ(format_number(1025), "1.02k");
  std::vector<int64_t> values = {999995, 999999, 1000000, 1004999, 1005000, 123456789, 999999999999};
  values.push_back(std::numeric_limits<int64_t>::max());
  std::mt19937_64 random(16);
  for (int i = 0; i < 20000; ++i) values.push_back(static_cast<int64_t>(random() >> (random() % 63)));
  for (int64_t v = 1000; v < 30000; ++v) values.push_back(v);
  for (int64_t v : values) ASSERT_EQ(format_number(v), printf_number(v)) << v;
  // Times and memory: three units, the last with no bound (a quotient past 2^45 too).
  auto printf_in = [](int64_t n, std::vector<const char*> units) {
    if (n < 1000) return std::to_string(n) + units[0];
    double scale = 1000;
    size_t unit = 1;
    while (unit + 1 < units.size() && n >= scale * 1000) scale *= 1000, ++unit;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.2f%s", static_cast<double>(n) / scale, units[unit]);
    return std::string(buf);
  };
  for (int64_t v = int64_t{1} << 45; v < (int64_t{1} << 45) + 2000; ++v) values.push_back(v);
  for (int64_t v = 999000; v < 1001000; ++v) values.push_back(v);
  for (int64_t v : values) {
    ASSERT_EQ(format_time(v), printf_in(v, {"us", "ms", "sec"})) << v;
    ASSERT_EQ(format_memory(v), printf_in(v, {"B", "KB", "MB"})) << v;
  }
}

// A view's line writes its numbers through a buffer of its own: every field selected, each
// number as wide as it gets (the smallest int64 as an integer, the largest in the top unit),
// and the line is what the formatting functions make of each.
TEST(Format, AViewLineHoldsTheWidestNumbersInEveryField) {
  using namespace tfprof;
  for (const int64_t v : {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()}) {
    GraphNodeProto p;
    p.name = "a/b";
    for (int64_t GraphNodeStats::*f : {&GraphNodeStats::run_count,
                                       &GraphNodeStats::exec_micros,
                                       &GraphNodeStats::accelerator_exec_micros,
                                       &GraphNodeStats::cpu_exec_micros,
                                       &GraphNodeStats::requested_bytes,
                                       &GraphNodeStats::peak_bytes,
                                       &GraphNodeStats::residual_bytes,
                                       &GraphNodeStats::output_bytes,
                                       &GraphNodeStats::parameters,
                                       &GraphNodeStats::float_ops,
                                       &GraphNodeStats::total_definition_count,
                                       &GraphNodeStats::total_run_count,
                                       &GraphNodeStats::total_exec_micros,
                                       &GraphNodeStats::total_accelerator_exec_micros,
                                       &GraphNodeStats::total_cpu_exec_micros,
                                       &GraphNodeStats::total_requested_bytes,
                                       &GraphNodeStats::total_peak_bytes,
                                       &GraphNodeStats::total_residual_bytes,
                                       &GraphNodeStats::total_output_bytes,
                                       &GraphNodeStats::total_parameters,
                                       &GraphNodeStats::total_float_ops})
      p.*f = v;
    p.input_shapes = {{0, {3, 4}}, {1, {}}};
    ViewOptions o;
    o.select = ~uint32_t{0};
    std::string line;
    append_graph_node(line, p, /*account=*/true, /*node=*/nullptr, "_TFGraphParent", o);
    const std::string n = format_number(v), t = format_time(v), m = format_memory(v);
    EXPECT_EQ(line, "a/b (" + n + "/" + n + " params, " + n + "/" + n + " flops, " + m + "/" + m + ", " + m + "/" + m +
                        ", " + m + "/" + m + ", " + m + "/" + m + ", " + t + "/" + t + ", " + t + "/" + t + ", " + t +
                        "/" + t + ", _TFGraphParent, " + n + "/" + n + "|1/" + n + ", 0:3x4|1:unknown)");
    line.clear();
    append_graph_node(line, p, /*account=*/false, nullptr, "_TFGraphParent", o);
    EXPECT_EQ(line.substr(0, 10 + n.size()), "a/b (--/" + n + " p") << line;
  }
}

TEST(Format, QueryDocListsTheSelectedFieldsAlphabetically) {
  tfprof::RegexCache cache;
  ProfileOptions o;
  o.select = {"params", "bytes", "occurrence"};
  const auto v = tfprof::resolve_options(o, cache);
  EXPECT_EQ(tfprof::query_doc("op", v.select),
            "\nDoc:\nop: The nodes are operation kernel type, such as MatMul, Conv2D. Graph nodes belonging to the "
            "same type are aggregated together.\n"
            "requested bytes: The memory requested by the operation, accumulatively.\n"
            "occurrence: The number of times it occurs\n"
            "param: Number of parameters (in the Variable).\n\n");
}

TEST(ProfileOptions, DefaultsAreTensorFlowsBuildOptions) {
  ProfileOptions o;
  EXPECT_EQ(o.max_depth, 10);
  EXPECT_EQ(o.min_bytes, 0);
  EXPECT_EQ(o.step, -1);
  EXPECT_EQ(o.order_by, "name");
  EXPECT_TRUE(o.account_type_regexes.empty());
  EXPECT_TRUE(o.show_name_regexes.empty());
  EXPECT_FALSE(o.account_displayed_op_only);
  EXPECT_TRUE(o.select.empty());
  EXPECT_EQ(o.output, "stdout");
}

TEST(ProfileOptions, ToString) {
  ProfileOptions o = ProfileOptionBuilder::time_and_memory();
  o.select = {"micros", "bytes", "micros"};
  o.output = "file:outfile=/tmp/x";
  EXPECT_EQ(o.to_string(),
            "-max_depth                  10000\n"
            "-min_bytes                  1\n"
            "-min_peak_bytes             0\n"
            "-min_residual_bytes         0\n"
            "-min_output_bytes           0\n"
            "-min_micros                 1\n"
            "-min_accelerator_micros     0\n"
            "-min_cpu_micros             0\n"
            "-min_params                 0\n"
            "-min_float_ops              0\n"
            "-min_occurrence             0\n"
            "-step                       -1\n"
            "-order_by                   micros\n"
            "-account_type_regexes       .*\n"
            "-start_name_regexes         .*\n"
            "-trim_name_regexes          \n"
            "-show_name_regexes          .*\n"
            "-hide_name_regexes          \n"
            "-account_displayed_op_only  true\n"
            "-select                     bytes,micros\n"
            "-output                     file:outfile=/tmp/x\n");
  // dump_to_file (deprecated) replaces the output.
  o.dump_to_file = "/tmp/d";
  EXPECT_NE(o.to_string().find("-output                     file:outfile=/tmp/d\n"), std::string::npos);
}

TEST(ProfileOptions, ParseOutput) {
  EXPECT_EQ(parse_profile_output("").type, "stdout");
  EXPECT_EQ(parse_profile_output("none").type, "none");
  auto t = parse_profile_output("timeline:outfile=/tmp/a=b");
  EXPECT_EQ(t.type, "timeline");
  EXPECT_EQ(t.options.at("outfile"), "/tmp/a=b");
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([] { parse_profile_output("html"); }),
            "E.g. Unknown output type: html, Valid types: file,none,pprof,stdout,timeline");
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([] { parse_profile_output("html:outfile=x"); }),
            "E.g. Unknown output type: html, Valid types: file,none,pprof,stdout,timeline");
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([] { parse_profile_output("file"); }),
            "Missing required output_options for file\nE.g. -output file:outfile=...");
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([] { parse_profile_output("timeline:"); }),
            "Missing required output_options for timeline\nE.g. -output timeline:outfile=...");
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([] { parse_profile_output("file:out=x"); }),
            "Unrecognized options out for output_type: file");
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([] { parse_profile_output("stdout:outfile=x"); }),
            "Unrecognized options outfile for output_type: stdout");
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([] { parse_profile_output("file:outfile"); }),
            "Visualize format: -output timeline:key=value,key=value,...");
}

// Issue 12: '(.*)*Z' made std::regex backtrack for minutes (or overflow its stack) on a long
// name; RE2 answers in linear time. TensorFlow's semantics stay: each regex must match the
// whole name (RE2::FullMatch).
TEST(NameMatcher, HostilePatternsAreLinearAndFullMatch) {
  tfprof::RegexCache cache;
  tfprof::NameMatcher hostile({"(.*)*Z", "(a|aa)+c", "(a+)+b"}, "-show_name_regexes", cache);
  const std::string long_name(100000, 'a');
  EXPECT_FALSE(hostile.matches(long_name));
  EXPECT_TRUE(hostile.matches(long_name + "Z"));
  EXPECT_TRUE(hostile.matches(long_name + "b"));
  EXPECT_FALSE(hostile.matches(long_name + "Zc"));
  tfprof::NameMatcher names({"layer1/.*", "loss"}, "-show_name_regexes", cache);
  EXPECT_TRUE(names.matches("layer1/MatMul"));
  EXPECT_TRUE(names.matches("loss"));
  EXPECT_FALSE(names.matches("total_loss"));  // a full match, not a search
  EXPECT_FALSE(names.matches("x/layer1/MatMul"));
  EXPECT_TRUE(tfprof::NameMatcher({".*"}, "-show_name_regexes", cache).is_all());
  EXPECT_EQ(
      testing::error_text<InvalidArgumentError>([&] { tfprof::NameMatcher({"(a"}, "-start_name_regexes", cache); }),
      "Invalid option '-start_name_regexes' value: '(a'");
}

TEST(ProfileOptions, Validation) {
  ProfileOptions o = ProfileOptionBuilder().build();
  EXPECT_NO_THROW(validate_profile_options(o));
  o.order_by = "time";
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { validate_profile_options(o); }),
            "Invalid option '-order_by' value: 'time'");
  o = ProfileOptionBuilder().select({"micros", "flops"}).build();
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { validate_profile_options(o); }),
            "Invalid option '-select' value: 'micros,flops'");
  o = ProfileOptionBuilder().with_node_names({.hide = V{"ok", "(["}}).build();
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { validate_profile_options(o); }),
            "Invalid option '-hide_name_regexes' value: '(['");
  o = ProfileOptionBuilder().with_accounted_types({"*"}).build();
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { validate_profile_options(o); }),
            "Invalid option '-account_type_regexes' value: '*'");
  o = ProfileOptionBuilder().with_file_output("").build();  // "file:outfile=": the value is missing
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { validate_profile_options(o); }),
            "Visualize format: -output timeline:key=value,key=value,...");
  // Every value of order_by and select is accepted.
  for (auto order : kProfileOrderBy)
    EXPECT_NO_THROW(validate_profile_options(ProfileOptionBuilder().order_by(std::string(order)).build()));
  o = ProfileOptionBuilder().select(V(kProfileSelect.begin(), kProfileSelect.end())).build();
  EXPECT_NO_THROW(validate_profile_options(o));
}

TEST(ProfileOptions, TheViewsAreLenientAsTensorFlowsPythonApi) {
  auto model = tfprof::testing::tf_test_model();
  Profiler profiler(model->graph);
  std::ostringstream out, log;
  profiler.set_stdout(&out);
  profiler.set_log(&log);
  profiler.add_step(0, model->run_metadata);
  auto base = ProfileOptionBuilder().select({"micros", "params"}).with_empty_output().build();
  const std::string by_name = profiler.profile_name_scope(base).text();

  // An unknown order_by orders by name; unknown select fields are dropped (TF's testSimpleCodeView
  // relies on both). Each says so in the log.
  auto o = base;
  o.order_by = "bogus";
  o.select = {"micros", "flops", "params", "time"};
  EXPECT_EQ(profiler.profile_name_scope(o).text(), by_name);
  EXPECT_NE(log.str().find("Warning: unknown order_by 'bogus' ignored; ordering by name."), std::string::npos)
      << log.str();
  EXPECT_NE(log.str().find("Warning: unknown select fields flops, time ignored."), std::string::npos) << log.str();
  log.str("");
  EXPECT_NO_THROW(profiler.profile_graph(o));
  EXPECT_NO_THROW(profiler.profile_operations(o));
  EXPECT_NO_THROW(profiler.profile_code(o));
  EXPECT_NE(log.str().find("unknown order_by"), std::string::npos);

  // What TensorFlow's API rejects too stays an error, before anything is printed.
  out.str("");
  auto bad_regex = ProfileOptionBuilder().with_node_names({.show = V{"(["}}).build();
  EXPECT_THROW(profiler.profile_name_scope(bad_regex), InvalidArgumentError);
  auto bad_output = ProfileOptionBuilder().build();
  bad_output.output = "html";
  EXPECT_THROW(profiler.profile_operations(bad_output), InvalidArgumentError);
  EXPECT_EQ(out.str(), "");
}

TEST(ProfileOptionBuilder, Defaults) {
  ProfileOptions o = ProfileOptionBuilder().build();
  EXPECT_EQ(o.max_depth, 100);
  EXPECT_EQ(o.min_bytes, 0);
  EXPECT_EQ(o.min_micros, 0);
  EXPECT_EQ(o.min_params, 0);
  EXPECT_EQ(o.min_float_ops, 0);
  EXPECT_EQ(o.min_occurrence, 0);
  EXPECT_EQ(o.order_by, "name");
  EXPECT_EQ(o.account_type_regexes, V{".*"});
  EXPECT_EQ(o.start_name_regexes, V{".*"});
  EXPECT_EQ(o.trim_name_regexes, V{});
  EXPECT_EQ(o.show_name_regexes, V{".*"});
  EXPECT_EQ(o.hide_name_regexes, V{});
  EXPECT_FALSE(o.account_displayed_op_only);
  EXPECT_EQ(o.select, V{"micros"});
  EXPECT_EQ(o.step, -1);
  EXPECT_EQ(o.output, "stdout");
}

TEST(ProfileOptionBuilder, Presets) {
  ProfileOptions p = ProfileOptionBuilder::trainable_variables_parameter();
  EXPECT_EQ(p.max_depth, 10000);
  EXPECT_EQ(p.min_float_ops, 0);
  EXPECT_EQ(p.order_by, "name");
  EXPECT_EQ(p.account_type_regexes, V{"_trainable_variables"});
  EXPECT_TRUE(p.account_displayed_op_only);
  EXPECT_EQ(p.select, V{"params"});
  EXPECT_EQ(p.start_name_regexes, V{".*"});
  EXPECT_EQ(p.show_name_regexes, V{".*"});
  EXPECT_EQ(p.output, "stdout");

  ProfileOptions f = ProfileOptionBuilder::float_operation();
  EXPECT_EQ(f.max_depth, 10000);
  EXPECT_EQ(f.min_float_ops, 1);
  EXPECT_EQ(f.order_by, "float_ops");
  EXPECT_EQ(f.account_type_regexes, V{".*"});
  EXPECT_TRUE(f.account_displayed_op_only);
  EXPECT_EQ(f.select, V{"float_ops"});

  ProfileOptions t = ProfileOptionBuilder::time_and_memory();
  EXPECT_EQ(t.max_depth, 10000);
  EXPECT_EQ(t.min_micros, 1);
  EXPECT_EQ(t.min_bytes, 1);
  EXPECT_EQ(t.min_accelerator_micros, 0);
  EXPECT_EQ(t.min_cpu_micros, 0);
  EXPECT_EQ(t.min_peak_bytes, 0);
  EXPECT_EQ(t.min_residual_bytes, 0);
  EXPECT_EQ(t.min_output_bytes, 0);
  EXPECT_EQ(t.order_by, "micros");
  EXPECT_TRUE(t.account_displayed_op_only);
  EXPECT_EQ(t.select, (V{"micros", "bytes"}));
  t = ProfileOptionBuilder::time_and_memory(5, 6, 7, 8, 9, 10, 11);
  EXPECT_EQ(t.min_micros, 5);
  EXPECT_EQ(t.min_bytes, 6);
  EXPECT_EQ(t.min_accelerator_micros, 7);
  EXPECT_EQ(t.min_cpu_micros, 8);
  EXPECT_EQ(t.min_peak_bytes, 9);
  EXPECT_EQ(t.min_residual_bytes, 10);
  EXPECT_EQ(t.min_output_bytes, 11);
}

TEST(ProfileOptionBuilder, Setters) {
  ProfileOptions o = ProfileOptionBuilder(ProfileOptionBuilder::time_and_memory())
                         .with_max_depth(4)
                         .with_min_memory(1, 2, 3, 4)
                         .with_min_execution_time(5, 6, 7)
                         .with_min_parameters(8)
                         .with_min_occurrence(9)
                         .with_min_float_operations(10)
                         .with_accounted_types({"MatMul"})
                         .with_node_names(V{"s"}, V{"sh"}, V{"h"}, V{"t"})
                         .account_displayed_op_only(false)
                         .order_by("bytes")
                         .select({"bytes"})
                         .with_step(3)
                         .with_file_output("/tmp/f")
                         .build();
  EXPECT_EQ(o.max_depth, 4);
  EXPECT_EQ(o.min_bytes, 1);
  EXPECT_EQ(o.min_peak_bytes, 2);
  EXPECT_EQ(o.min_residual_bytes, 3);
  EXPECT_EQ(o.min_output_bytes, 4);
  EXPECT_EQ(o.min_micros, 5);
  EXPECT_EQ(o.min_accelerator_micros, 6);
  EXPECT_EQ(o.min_cpu_micros, 7);
  EXPECT_EQ(o.min_params, 8);
  EXPECT_EQ(o.min_occurrence, 9);
  EXPECT_EQ(o.min_float_ops, 10);
  EXPECT_EQ(o.account_type_regexes, V{"MatMul"});
  EXPECT_EQ(o.start_name_regexes, V{"s"});
  EXPECT_EQ(o.show_name_regexes, V{"sh"});
  EXPECT_EQ(o.hide_name_regexes, V{"h"});
  EXPECT_EQ(o.trim_name_regexes, V{"t"});
  EXPECT_FALSE(o.account_displayed_op_only);
  EXPECT_EQ(o.order_by, "bytes");
  EXPECT_EQ(o.select, V{"bytes"});
  EXPECT_EQ(o.step, 3);
  EXPECT_EQ(o.output, "file:outfile=/tmp/f");

  // with_node_names replaces only the lists given.
  o = ProfileOptionBuilder().with_node_names({.hide = V{"x"}}).build();
  EXPECT_EQ(o.start_name_regexes, V{".*"});
  EXPECT_EQ(o.hide_name_regexes, V{"x"});
  EXPECT_EQ(ProfileOptionBuilder().with_empty_output().build().output, "none");
  EXPECT_EQ(ProfileOptionBuilder().with_empty_output().with_stdout_output().build().output, "stdout");
  EXPECT_EQ(ProfileOptionBuilder().with_timeline_output("/tmp/t.json").build().output, "timeline:outfile=/tmp/t.json");
  EXPECT_EQ(ProfileOptionBuilder().with_pprof_output("/tmp/p.pb.gz").build().output, "pprof:outfile=/tmp/p.pb.gz");
  // with_min_bytes is with_min_memory.
  o = ProfileOptionBuilder().with_min_bytes(100).build();
  EXPECT_EQ(o.min_bytes, 100);
  EXPECT_EQ(o.min_peak_bytes, 0);
  // build() returns a copy: the builder keeps its own.
  ProfileOptionBuilder b;
  ProfileOptions first = b.build();
  b.with_max_depth(1);
  EXPECT_EQ(first.max_depth, 100);
  EXPECT_EQ(b.build().max_depth, 1);
}

}  // namespace
}  // namespace stepscope
