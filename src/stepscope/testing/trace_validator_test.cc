// validate_chrome_trace: one bad trace per rule of chrome-trace.md §4.4, each checked to give
// that rule's problem (and a clean trace to give none).
#include "stepscope/testing/trace_validator.h"

#include <gtest/gtest.h>

#include <string>

namespace stepscope {
namespace {

// A small clean trace; `extra` events are appended to its traceEvents.
std::string trace(const std::string& extra = "", const std::string& top = "") {
  std::string t = R"({"traceEvents":[)"
                  R"({"name":"process_name","ph":"M","pid":1,"args":{"name":"dev"}},)"
                  R"({"name":"thread_name","ph":"M","pid":1,"tid":0,"args":{"name":"lane 0"}},)"
                  R"({"ph":"X","cat":"Op","name":"A","pid":1,"tid":0,"ts":1.000,"dur":10.000,"args":{}},)"
                  R"({"ph":"X","cat":"Op","name":"B","pid":1,"tid":0,"ts":2.000,"dur":3.000,"args":{}},)"
                  R"({"ph":"X","cat":"Op","name":"C","pid":1,"tid":1,"ts":12.000,"dur":1.000,"args":{}},)"
                  R"({"ph":"s","cat":"DataFlow","name":"a","pid":1,"tid":0,"ts":10.999,"id":0},)"
                  R"({"ph":"f","cat":"DataFlow","name":"a","pid":1,"tid":1,"ts":12.000,"id":0,"bp":"e"},)"
                  R"({"ph":"C","cat":"Memory","name":"cpu","pid":0,"tid":0,"ts":1.000,"args":{"cpu":64}})";
  if (!extra.empty()) t += "," + extra;
  t += "]";
  t += top;
  return t + "}";
}

// The problems of rule `rule` (errors or warnings as asked).
std::vector<TraceProblem> problems(const std::string& json, const std::string& rule, bool warning = false) {
  std::vector<TraceProblem> out;
  for (const TraceProblem& p : validate_chrome_trace(json))
    if (p.rule == rule && p.warning == warning) out.push_back(p);
  return out;
}

std::string all(const std::string& json) {
  std::string s;
  for (const TraceProblem& p : validate_chrome_trace(json))
    s += (p.warning ? "W " : "E ") + p.rule + ": " + p.message + "\n";
  return s;
}

TEST(TraceValidator, CleanTraceHasNoProblems) { EXPECT_EQ(all(trace()), ""); }

TEST(TraceValidator, NotJson) {
  EXPECT_EQ(problems("{\"traceEvents\":[", "json").size(), 1u);
  EXPECT_EQ(problems("nope", "json").size(), 1u);
}

TEST(TraceValidator, RawControlCharacterInAString) {
  const auto p = problems(trace(std::string(R"({"ph":"X","cat":"Op","name":"bad)") + "\x01" +
                                R"(","pid":1,"tid":2,"ts":1.000,"dur":1.000})"),
                          "json");
  ASSERT_FALSE(p.empty());
  EXPECT_NE(p[0].message.find("raw control character 0x01"), std::string::npos) << p[0].message;
  // Escaped, it is fine.
  EXPECT_EQ(all(trace(R"({"ph":"X","cat":"Op","name":"ok\u0001","pid":1,"tid":2,"ts":1.000,"dur":1.000})")), "");
}

TEST(TraceValidator, Container) {
  EXPECT_EQ(problems(R"({"events":[]})", "container").size(), 1u);
  EXPECT_EQ(problems(R"({"traceEvents":{}})", "container").size(), 1u);
  EXPECT_EQ(problems("42", "container").size(), 1u);
  // The array form without its closing bracket: a warning, and the events are still checked.
  const std::string open = R"([{"ph":"X","cat":"Op","name":"A","pid":1,"tid":0,"ts":1.000,"dur":-1.000},)";
  EXPECT_EQ(problems(open, "container", true).size(), 1u);
  EXPECT_EQ(problems(open, "complete-dur").size(), 1u);
  EXPECT_EQ(all(R"([{"ph":"X","cat":"Op","name":"A","pid":1,"tid":0,"ts":1.000,"dur":1.000}])"), "");
}

TEST(TraceValidator, DisplayTimeUnit) {
  EXPECT_EQ(problems(trace("", R"(,"displayTimeUnit":"us")"), "display-time-unit").size(), 1u);
  EXPECT_EQ(all(trace("", R"(,"displayTimeUnit":"ns")")), "");
  EXPECT_EQ(all(trace("", R"(,"displayTimeUnit":"ms")")), "");
  // Sub-µs slices, or a slice starting within 1 µs of its neighbour's end: catapult nests them on
  // whole microseconds unless the unit is "ns".
  const std::string short_op = R"({"ph":"X","cat":"Op","name":"S","pid":1,"tid":3,"ts":20.000,"dur":0.400})";
  const std::string close_ops = R"({"ph":"X","cat":"Op","name":"P","pid":1,"tid":4,"ts":20.000,"dur":2.000},)"
                                R"({"ph":"X","cat":"Op","name":"Q","pid":1,"tid":4,"ts":22.300,"dur":2.000})";
  EXPECT_EQ(problems(trace(short_op), "display-time-unit").size(), 1u);
  EXPECT_EQ(problems(trace(close_ops), "display-time-unit").size(), 1u);
  EXPECT_EQ(problems(trace(short_op, R"(,"displayTimeUnit":"ms")"), "display-time-unit").size(), 1u);
  EXPECT_TRUE(problems(trace(short_op + "," + close_ops, R"(,"displayTimeUnit":"ns")"), "display-time-unit").empty());
  EXPECT_EQ(all(trace("", R"(,"baseTimeNanoseconds":1700000000000000000)")), "");
}

TEST(TraceValidator, EventFields) {
  EXPECT_EQ(problems(trace(R"({"cat":"Op","name":"A","pid":1,"tid":0,"ts":1.000})"), "event").size(), 1u);
  EXPECT_EQ(problems(trace(R"({"ph":"Q","name":"A","pid":1,"tid":0,"ts":1.000})"), "event").size(), 1u);
  EXPECT_EQ(problems(trace(R"({"ph":"XX","name":"A","pid":1,"tid":0,"ts":1.000})"), "event").size(), 1u);
  EXPECT_EQ(problems(trace(R"({"ph":"i","name":"A","pid":1,"tid":0})"), "event").size(), 1u);
  EXPECT_EQ(problems(trace(R"({"ph":"i","name":"A","pid":1,"tid":0,"ts":"1"})"), "event").size(), 1u);
  EXPECT_EQ(problems(trace(R"({"ph":"i","name":"A","tid":0,"ts":1.000})"), "event").size(), 1u);
  EXPECT_EQ(problems(trace(R"({"ph":"i","name":"A","pid":1,"ts":1.000})"), "event").size(), 1u);
  EXPECT_EQ(problems(trace("42"), "event").size(), 1u);
  // tid may be left out on process-level metadata and global/process instants.
  EXPECT_EQ(all(trace(R"({"ph":"i","name":"A","pid":1,"s":"p","ts":1.000})")), "");
  EXPECT_EQ(all(trace(R"({"name":"process_sort_index","ph":"M","pid":1,"args":{"sort_index":1}})")), "");
  // Warnings: string pid, negative ts, negative tid.
  EXPECT_EQ(problems(trace(R"({"ph":"i","name":"A","pid":"p","tid":0,"ts":1.000})"), "event", true).size(), 1u);
  EXPECT_EQ(problems(trace(R"({"ph":"i","name":"A","pid":1,"tid":0,"ts":-1.000})"), "event", true).size(), 1u);
  EXPECT_EQ(problems(trace(R"({"ph":"i","name":"A","pid":1,"tid":-3,"ts":1.000})"), "event", true).size(), 1u);
}

TEST(TraceValidator, TimestampsFiniteAndWellWritten) {
  EXPECT_EQ(problems(trace(R"({"ph":"i","name":"A","pid":1,"tid":0,"ts":1e400})"), "ts-finite").size(), 1u);
  EXPECT_EQ(problems(trace(R"({"ph":"i","name":"A","pid":1,"tid":0,"ts":12})"), "ts-format", true).size(), 1u);
  EXPECT_EQ(problems(trace(R"({"ph":"i","name":"A","pid":1,"tid":0,"ts":1.5})"), "ts-format", true).size(), 1u);
  EXPECT_EQ(
      problems(trace(R"({"ph":"X","name":"A","pid":1,"tid":3,"ts":1.000,"dur":2.0000})"), "ts-format", true).size(),
      1u);
  EXPECT_EQ(problems(trace(R"({"ph":"i","name":"A","pid":1,"tid":0,"ts":1700000000000000.123})"), "ts-precision", true)
                .size(),
            1u);
}

TEST(TraceValidator, CompleteEventsNeedADuration) {
  EXPECT_EQ(problems(trace(R"({"ph":"X","name":"A","pid":1,"tid":5,"ts":1.000})"), "complete-dur").size(), 1u);
  EXPECT_EQ(problems(trace(R"({"ph":"X","name":"A","pid":1,"tid":5,"ts":1.000,"dur":-1.000})"), "complete-dur").size(),
            1u);
  EXPECT_EQ(problems(trace(R"({"ph":"X","name":"A","pid":1,"tid":5,"ts":1.000,"dur":"1"})"), "complete-dur").size(),
            1u);
}

TEST(TraceValidator, BeginEnd) {
  const std::string b = R"({"ph":"B","name":"A","pid":1,"tid":5,"ts":1.000})";
  EXPECT_EQ(problems(trace(R"({"ph":"E","pid":1,"tid":5,"ts":2.000})"), "end-unmatched").size(), 1u);
  EXPECT_EQ(problems(trace(b), "begin-unclosed", true).size(), 1u);
  EXPECT_EQ(problems(trace(b + R"(,{"ph":"E","name":"Z","pid":1,"tid":5,"ts":2.000})"), "end-name", true).size(), 1u);
  EXPECT_EQ(problems(trace(b + R"(,{"ph":"E","pid":1,"tid":5,"ts":0.500})"), "begin-end-order").size(), 1u);
  EXPECT_EQ(all(trace(b + R"(,{"ph":"E","name":"A","pid":1,"tid":5,"ts":2.000})")), "");
}

TEST(TraceValidator, SlicesMustNestOnEachThread) {
  // [1, 11) from the base trace; [5, 15) on the same thread overlaps it partially.
  const auto p = problems(trace(R"({"ph":"X","name":"D","pid":1,"tid":0,"ts":5.000,"dur":10.000})"), "nesting");
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].message.find("partially overlaps"), std::string::npos);
  // Off by one nanosecond: still an overlap (ns precision, not µs).
  EXPECT_EQ(problems(trace(R"({"ph":"X","name":"D","pid":1,"tid":0,"ts":10.999,"dur":0.002})"), "nesting").size(), 1u);
  // Touching ends, a child inside, another thread: fine (in ns: in whole µs, catapult's default,
  // the touching and the sub-µs slices would not be).
  EXPECT_EQ(all(trace(R"({"ph":"X","name":"D","pid":1,"tid":0,"ts":11.000,"dur":1.000},)"
                      R"({"ph":"X","name":"E","pid":1,"tid":0,"ts":2.500,"dur":0.500},)"
                      R"({"ph":"X","name":"F","pid":1,"tid":9,"ts":5.000,"dur":10.000})",
                      R"(,"displayTimeUnit":"ns")")),
            "");
  // A B/E slice overlapping an X.
  EXPECT_EQ(problems(trace(R"({"ph":"B","name":"G","pid":1,"tid":0,"ts":8.000},)"
                           R"({"ph":"E","name":"G","pid":1,"tid":0,"ts":20.000})"),
                     "nesting")
                .size(),
            1u);
  // Same start and duration: the order decides the parent.
  EXPECT_EQ(problems(trace(R"({"ph":"X","name":"D","pid":1,"tid":0,"ts":2.000,"dur":3.000})"), "nesting", true).size(),
            1u);
}

TEST(TraceValidator, InstantScope) {
  EXPECT_EQ(problems(trace(R"({"ph":"i","name":"A","pid":1,"tid":0,"ts":1.000,"s":"x"})"), "instant-scope").size(), 1u);
}

TEST(TraceValidator, Counters) {
  EXPECT_EQ(problems(trace(R"({"ph":"C","name":"m","pid":0,"tid":0,"ts":1.000,"args":5})"), "counter-args").size(), 1u);
  EXPECT_EQ(
      problems(trace(R"({"ph":"C","name":"m","pid":0,"tid":0,"ts":1.000,"args":{"a":"x"}})"), "counter-args").size(),
      1u);
  EXPECT_EQ(all(trace(R"({"ph":"C","name":"m","pid":0,"tid":0,"ts":1.000,"args":{"a":"12.5"}})")), "");
  std::string many = R"({"ph":"C","name":"m","pid":0,"tid":0,"ts":1.000,"args":{)";
  for (int i = 0; i < 17; ++i) many += (i ? "," : "") + std::string("\"s") + std::to_string(i) + "\":1";
  EXPECT_EQ(problems(trace(many + "}}"), "counter-args", true).size(), 1u);
}

TEST(TraceValidator, AsyncEvents) {
  EXPECT_EQ(problems(trace(R"({"ph":"b","cat":"a","name":"A","pid":1,"tid":0,"ts":1.000})"), "async-id").size(), 1u);
  EXPECT_EQ(problems(trace(R"({"ph":"b","cat":"a","name":"A","pid":1,"tid":0,"ts":1.000,"id":1,"id2":{"local":1}})"),
                     "async-id")
                .size(),
            1u);
  EXPECT_EQ(problems(trace(R"({"ph":"e","cat":"a","name":"A","pid":1,"tid":0,"ts":1.000,"id":1})"), "async-id").size(),
            1u);
  EXPECT_EQ(
      problems(trace(R"({"ph":"b","cat":"a","name":"A","pid":1,"tid":0,"ts":1.000,"id":1})"), "async-id", true).size(),
      1u);
  EXPECT_EQ(all(trace(R"({"ph":"b","cat":"a","name":"A","pid":1,"tid":0,"ts":1.000,"id":1},)"
                      R"({"ph":"e","cat":"a","name":"A","pid":1,"tid":0,"ts":2.000,"id":1})")),
            "");
}

TEST(TraceValidator, FlowFieldsAndBindingPoint) {
  EXPECT_EQ(problems(trace(R"({"ph":"s","cat":"d","pid":1,"tid":0,"ts":2.000,"id":7})"), "flow-fields").size(), 1u);
  EXPECT_EQ(problems(trace(R"({"ph":"s","cat":"d","name":"n","pid":1,"tid":0,"ts":2.000})"), "flow-fields").size(), 1u);
  EXPECT_EQ(problems(trace(R"({"ph":"s","name":"n","pid":1,"tid":0,"ts":2.000,"id":7})"), "flow-fields").size(), 1u);
  EXPECT_EQ(problems(trace(R"({"ph":"s","cat":"d","name":"n","pid":1,"tid":0,"ts":2.000,"id":7},)"
                           R"({"ph":"f","cat":"d","name":"n","pid":1,"tid":1,"ts":12.000,"id":7,"bp":"x"})"),
                     "flow-bp")
                .size(),
            1u);
}

TEST(TraceValidator, FlowsMustBind) {
  // s where no slice is open on its thread.
  EXPECT_EQ(problems(trace(R"({"ph":"s","cat":"d","name":"n","pid":1,"tid":0,"ts":50.000,"id":7},)"
                           R"({"ph":"f","cat":"d","name":"n","pid":1,"tid":1,"ts":12.000,"id":7,"bp":"e"})"),
                     "flow-binding")
                .size(),
            1u);
  // f with bp "e" outside any slice; f without bp and no slice after it.
  EXPECT_EQ(problems(trace(R"({"ph":"s","cat":"d","name":"n","pid":1,"tid":0,"ts":2.000,"id":7},)"
                           R"({"ph":"f","cat":"d","name":"n","pid":1,"tid":1,"ts":14.000,"id":7,"bp":"e"})"),
                     "flow-binding")
                .size(),
            1u);
  EXPECT_EQ(problems(trace(R"({"ph":"s","cat":"d","name":"n","pid":1,"tid":0,"ts":2.000,"id":7},)"
                           R"({"ph":"f","cat":"d","name":"n","pid":1,"tid":1,"ts":14.000,"id":7})"),
                     "flow-binding")
                .size(),
            1u);
  // Without bp, f binds to the next slice: fine when there is one.
  EXPECT_EQ(all(trace(R"({"ph":"s","cat":"d","name":"n","pid":1,"tid":0,"ts":2.000,"id":7},)"
                      R"({"ph":"f","cat":"d","name":"n","pid":1,"tid":1,"ts":11.000,"id":7})")),
            "");
}

TEST(TraceValidator, FlowIdsPairUp) {
  EXPECT_EQ(
      problems(trace(R"({"ph":"s","cat":"DataFlow","name":"a","pid":1,"tid":0,"ts":3.000,"id":0})"), "flow-id-reuse")
          .size(),
      1u);
  EXPECT_EQ(problems(trace(R"({"ph":"f","cat":"d","name":"n","pid":1,"tid":1,"ts":12.000,"id":9,"bp":"e"})"),
                     "flow-unmatched")
                .size(),
            1u);
  EXPECT_EQ(
      problems(trace(R"({"ph":"t","cat":"d","name":"n","pid":1,"tid":1,"ts":12.000,"id":9})"), "flow-unmatched").size(),
      1u);
  // TensorFlow's s/t pairs never end their flows.
  EXPECT_EQ(problems(trace(R"({"ph":"s","cat":"d","name":"n","pid":1,"tid":0,"ts":2.000,"id":7},)"
                           R"({"ph":"t","cat":"d","name":"n","pid":1,"tid":1,"ts":12.000,"id":7})"),
                     "flow-unterminated", true)
                .size(),
            1u);
}

TEST(TraceValidator, FlowV2NeedsADirection) {
  EXPECT_EQ(
      problems(trace(R"({"ph":"X","name":"D","pid":1,"tid":4,"ts":1.000,"dur":1.000,"bind_id":3})"), "flow-v2").size(),
      1u);
  EXPECT_EQ(all(trace(R"({"ph":"X","name":"D","pid":1,"tid":4,"ts":1.000,"dur":1.000,"bind_id":3,"flow_out":true},)"
                      R"({"ph":"X","name":"D","pid":1,"tid":5,"ts":3.000,"dur":1.000,"bind_id":3,"flow_in":true})")),
            "");
}

TEST(TraceValidator, Metadata) {
  EXPECT_EQ(problems(trace(R"({"name":"process_uptime","ph":"M","pid":1,"args":{"x":1}})"), "metadata").size(), 1u);
  EXPECT_EQ(
      problems(trace(R"({"name":"thread_name","ph":"M","pid":1,"tid":0,"args":{"title":"x"}})"), "metadata").size(),
      1u);
  EXPECT_EQ(
      problems(trace(R"({"name":"process_sort_index","ph":"M","pid":1,"args":{"sort_index":"1"}})"), "metadata").size(),
      1u);
}

TEST(TraceValidator, ObjectEvents) {
  const std::string n = R"({"ph":"N","cat":"Tensor","name":"t","pid":2,"tid":0,"ts":1.000,"id":1})";
  const std::string d = R"({"ph":"D","cat":"Tensor","name":"t","pid":2,"tid":0,"ts":3.000,"id":1})";
  EXPECT_EQ(problems(trace(R"({"ph":"N","cat":"Tensor","name":"t","pid":2,"tid":0,"ts":1.000})"), "object").size(), 1u);
  EXPECT_EQ(problems(trace(n + R"(,{"ph":"O","cat":"Tensor","name":"t","pid":2,"tid":0,"ts":2.000,"id":1})"), "object")
                .size(),
            1u);
  EXPECT_EQ(problems(trace(d), "object").size(), 1u);
  // With memory counters in the trace, tensor objects (TensorFlow's layout) are fine.
  EXPECT_EQ(all(trace(n + "," + d)), "");
}

TEST(TraceValidator, PhasesPerfettoDoesNotRender) {
  // Objects without any counter: memory is invisible in Perfetto.
  const std::string no_counters =
      R"({"traceEvents":[{"ph":"N","cat":"T","name":"t","pid":2,"tid":0,"ts":1.000,"id":1},)"
      R"({"ph":"D","cat":"T","name":"t","pid":2,"tid":0,"ts":3.000,"id":1}]})";
  EXPECT_EQ(problems(no_counters, "not-rendered", true).size(), 2u);
  EXPECT_EQ(
      problems(trace(R"({"ph":"S","cat":"a","name":"A","pid":1,"tid":0,"ts":1.000,"id":1})"), "not-rendered", true)
          .size(),
      1u);
  EXPECT_EQ(
      problems(trace(R"({"ph":"v","name":"d","pid":1,"tid":0,"ts":1.000,"id":1,"args":{}})"), "not-rendered", true)
          .size(),
      1u);
}

TEST(TraceValidator, Size) {
  // 257 MB of whitespace around a clean trace: too big for chrome://tracing.
  std::string big(size_t{257} << 20, ' ');
  big += trace();
  const auto p = validate_chrome_trace(big);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].rule, "size");
  EXPECT_TRUE(p[0].warning);
  EXPECT_NE(p[0].message.find("256 MB"), std::string::npos);
}

TEST(TraceValidator, ManyProblemsOfOneRuleAreCapped) {
  std::string extra;
  for (int i = 0; i < 120; ++i)
    extra += std::string(i ? "," : "") + R"({"ph":"X","name":"A","pid":1,"tid":7,"ts":1.000})";
  const auto p = problems(trace(extra), "complete-dur");
  EXPECT_EQ(p.size(), 50u);
  EXPECT_NE(all(trace(extra)).find("70 more problems of this rule"), std::string::npos);
}

}  // namespace
}  // namespace stepscope
