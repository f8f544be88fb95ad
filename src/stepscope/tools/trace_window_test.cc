#include "stepscope/tools/trace_window.h"

#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "stepscope/base/error.h"
#include "stepscope/base/file_io.h"
#include "stepscope/testing/temp_dir.h"
#include "stepscope/tools/trace_server.h"

namespace stepscope {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Two threads of slices 0..100 µs, a counter, a flow inside [10, 30], a flow from 10 to 80, a
// tensor object living 20..40 and a B/E pair 50..60.
std::string small_trace() {
  return R"({"traceEvents":[
{"name":"process_name","ph":"M","pid":1,"args":{"name":"Compute"}},
{"name":"thread_name","ph":"M","pid":1,"tid":0,"args":{"name":"a"}},
{"ph":"X","name":"step","pid":1,"tid":0,"ts":0,"dur":100},
{"ph":"X","name":"op1","pid":1,"tid":0,"ts":10,"dur":5},
{"ph":"X","name":"op2","pid":1,"tid":1,"ts":25,"dur":5},
{"ph":"X","name":"op3","pid":1,"tid":1,"ts":78,"dur":4},
{"ph":"s","cat":"DataFlow","name":"t","pid":1,"tid":0,"ts":12,"id":1},
{"ph":"f","cat":"DataFlow","name":"t","pid":1,"tid":1,"ts":26,"id":1,"bp":"e"},
{"ph":"s","cat":"DataFlow","name":"t","pid":1,"tid":0,"ts":13,"id":2},
{"ph":"f","cat":"DataFlow","name":"t","pid":1,"tid":1,"ts":79,"id":2,"bp":"e"},
{"ph":"N","cat":"Tensor","name":"x","pid":2,"tid":0,"ts":20,"id":"t1"},
{"ph":"O","cat":"Tensor","name":"x","pid":2,"tid":0,"ts":21,"id":"t1","args":{"snapshot":{}}},
{"ph":"D","cat":"Tensor","name":"x","pid":2,"tid":0,"ts":40,"id":"t1"},
{"ph":"C","name":"mem","pid":3,"tid":0,"ts":5,"args":{"bytes":10}},
{"ph":"C","name":"mem","pid":3,"tid":0,"ts":35,"args":{"bytes":30}},
{"ph":"B","name":"span","pid":1,"tid":2,"ts":50},
{"ph":"E","pid":1,"tid":2,"ts":60}
],"displayTimeUnit":"ns","otherData":{"version":"x"}})";
}

std::set<std::string> names_of(const json& trace, const std::string& ph) {
  std::set<std::string> names;
  for (const json& e : trace["traceEvents"])
    if (e.value("ph", "") == ph) names.insert(e.value("name", "") + (e.contains("id") ? "#" + e["id"].dump() : ""));
  return names;
}

TEST(TraceIndexTest, Summary) {
  const TraceIndex index(small_trace(), "small.json");
  const TraceSummary s = index.summary(10);
  EXPECT_EQ(s.metadata_events, 2);
  EXPECT_EQ(s.events, 15);
  EXPECT_EQ(s.slices, 5);  // 4 X and one B/E pair
  EXPECT_EQ(s.counters, 2);
  EXPECT_EQ(s.flows, 2);
  EXPECT_EQ(s.objects, 1);
  EXPECT_EQ(s.start_us, 0);
  EXPECT_EQ(s.end_us, 100);
  ASSERT_EQ(s.density.size(), 10u);
  int64_t sum = 0;
  for (int64_t n : s.density) sum += n;
  EXPECT_EQ(sum, s.events);
  EXPECT_EQ(s.density[1], 3);  // op1 and the two flow starts: ts in [10, 20)
  const json j = json::parse(index.summary_json(10));
  EXPECT_EQ(j["events"], 15);
  EXPECT_EQ(j["density"].size(), 10u);
  EXPECT_EQ(j["file"], "small.json");
}

TEST(TraceIndexTest, FullWindowKeepsWholeFlowsAndObjectsAndTopLevelKeys) {
  const TraceIndex index(small_trace(), "small.json");
  const TraceWindow w = index.window(9, 31, 100);
  EXPECT_FALSE(w.sampled);
  const json j = json::parse(w.json);
  EXPECT_EQ(j["displayTimeUnit"], "ns");
  EXPECT_EQ(j["otherData"]["version"], "x");
  EXPECT_EQ(j["stepscope_window"]["sampled"], false);
  EXPECT_EQ(j["stepscope_window"]["events"], w.events);
  EXPECT_EQ(names_of(j, "X"), (std::set<std::string>{"step", "op1", "op2"}));
  // Flow 1 binds in the window; flow 2 ends at 79, outside: left out whole.
  EXPECT_EQ(names_of(j, "s"), (std::set<std::string>{"t#1"}));
  EXPECT_EQ(names_of(j, "f"), (std::set<std::string>{"t#1"}));
  // The tensor lives 20..40: all three of its events, D at 40 included.
  EXPECT_EQ(names_of(j, "D"), (std::set<std::string>{"x#\"t1\""}));
  EXPECT_EQ(names_of(j, "N").size(), 1u);
  EXPECT_EQ(names_of(j, "C").size(), 0u);  // the counters are at 5 and 35
  EXPECT_EQ(names_of(j, "M").size(), 2u);
  EXPECT_EQ(names_of(j, "B").size(), 0u);
  EXPECT_EQ(w.events, static_cast<int64_t>(j["traceEvents"].size()));

  // The B/E pair travels together.
  const json span = json::parse(index.window(55, 56, 100).json);
  EXPECT_EQ(names_of(span, "B").size(), 1u);
  EXPECT_EQ(names_of(span, "E").size(), 1u);
  EXPECT_EQ(names_of(span, "s").size(), 0u);  // flow 2 (13..79) is not whole in it

  const json all = json::parse(index.window(0, 100, 100).json);
  EXPECT_EQ(all["traceEvents"].size(), 17u);
}

TEST(TraceIndexTest, DownSamplesPerThreadAndPixel) {
  // One thread: a 1000 µs parent and 1000 slices of 0.5 µs; a counter every µs.
  std::string text = R"({"traceEvents":[{"ph":"M","name":"thread_name","pid":1,"tid":1,"args":{"name":"t"}},)";
  text += R"({"ph":"X","name":"parent","pid":1,"tid":1,"ts":0,"dur":1000},)";
  text += R"({"ph":"s","name":"f","cat":"c","pid":1,"tid":1,"ts":1,"id":7},)";
  text += R"({"ph":"f","name":"f","cat":"c","pid":1,"tid":1,"ts":2,"id":7,"bp":"e"},)";
  for (int i = 0; i < 1000; ++i) {
    text += R"({"ph":"X","name":"k","pid":1,"tid":1,"ts":)" + std::to_string(i) + R"(,"dur":)" +
            (i % 10 == 3 ? "0.6" : "0.5") + "},";
    text += R"({"ph":"C","name":"mem","pid":2,"ts":)" + std::to_string(i) + R"(.5,"args":{"v":)" +
            std::to_string(i % 10) + "}},";
  }
  text.pop_back();
  text += R"(],"displayTimeUnit":"ns"})";
  const TraceIndex index(text, "big.json");
  const TraceWindow full = index.window(0, 1000, 100);
  EXPECT_FALSE(full.sampled);
  EXPECT_EQ(full.overlapping, 2003);

  const TraceWindow w = index.window(0, 1000, 100, /*max_events=*/500);  // a pixel is 10 µs
  EXPECT_TRUE(w.sampled);
  EXPECT_EQ(w.overlapping, 2003);
  const json j = json::parse(w.json);
  EXPECT_EQ(j["stepscope_window"]["sampled"], true);
  EXPECT_EQ(j["displayTimeUnit"], "ns");
  int parents = 0, shorts = 0, counters = 0, flows = 0, meta = 0;
  std::set<double> counter_values;
  for (const json& e : j["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "M") ++meta;
    if (ph == "s" || ph == "f") ++flows;
    if (ph == "X" && e["name"] == "parent") ++parents;
    if (ph == "X" && e["name"] == "k") {
      ++shorts;
      EXPECT_EQ(e["dur"], 0.6);  // the longest of its pixel
    }
    if (ph == "C") {
      ++counters;
      counter_values.insert(e["args"]["v"].get<double>());
    }
  }
  EXPECT_EQ(meta, 1);
  EXPECT_EQ(parents, 1);
  EXPECT_EQ(shorts, 100);
  EXPECT_EQ(flows, 0);
  EXPECT_EQ(counters, 200);  // the lowest and the highest of each pixel
  EXPECT_EQ(counter_values, (std::set<double>{0, 9}));
  EXPECT_EQ(w.events, static_cast<int64_t>(j["traceEvents"].size()));
}

TEST(TraceIndexTest, BareArrayAndEmptyTrace) {
  const TraceIndex index(R"([{"ph":"X","name":"a","pid":1,"tid":1,"ts":1.5,"dur":2}])", "a.json");
  EXPECT_EQ(index.summary().events, 1);
  EXPECT_EQ(index.summary().end_us, 3.5);
  EXPECT_EQ(json::parse(index.window(0, 10, 10).json)["traceEvents"].size(), 1u);
  const TraceIndex empty(R"({"traceEvents":[]})", "e.json");
  EXPECT_EQ(empty.summary().events, 0);
  EXPECT_EQ(json::parse(empty.window(0, 0, 1).json)["traceEvents"].size(), 0u);
}

TEST(TraceIndexTest, FlowV2IsKeptOnlyWhenBothSlicesAreInTheWindow) {
  const TraceIndex index(R"({"traceEvents":[
{"ph":"X","name":"producer","pid":1,"tid":1,"ts":1,"dur":1,"bind_id":3,"flow_out":true},
{"ph":"X","name":"consumer","pid":1,"tid":2,"ts":10,"dur":1,"flow_in":true,"bind_id":3,"args":{"a":1}}]})",
                         "v2.json");
  EXPECT_EQ(index.summary().flows, 1);
  const json both = json::parse(index.window(0, 20, 10).json);
  EXPECT_EQ(both["traceEvents"][0]["bind_id"], 3);
  EXPECT_EQ(both["traceEvents"][1]["flow_in"], true);
  const json one = json::parse(index.window(0, 5, 10).json);
  ASSERT_EQ(one["traceEvents"].size(), 1u);
  EXPECT_EQ(one["traceEvents"][0], json::parse(R"({"ph":"X","name":"producer","pid":1,"tid":1,"ts":1,"dur":1})"));
  const json other = json::parse(index.window(9, 20, 10).json);
  EXPECT_EQ(other["traceEvents"][0],
            json::parse(R"({"ph":"X","name":"consumer","pid":1,"tid":2,"ts":10,"dur":1,"args":{"a":1}})"));
  const json sampled = json::parse(index.window(0, 20, 10, /*max_events=*/1).json);
  ASSERT_EQ(sampled["traceEvents"].size(), 2u);
  EXPECT_FALSE(sampled["traceEvents"][0].contains("bind_id"));
}

TEST(TraceIndexTest, TimesAtTheEdgesOfADouble) {
  const TraceIndex index(R"([{"ph":"X","name":"a","pid":1,"tid":1,"ts":-1e308,"dur":1e308},
{"ph":"i","name":"b","pid":1,"tid":1,"ts":1e308},{"ph":"i","name":"c","pid":1,"tid":1,"ts":1e999}])",
                         "edge.json");
  int64_t sum = 0;
  for (int64_t n : index.summary(10).density) sum += n;
  EXPECT_EQ(sum, 3);
  EXPECT_TRUE(index.window(-1e308, 1e308, 10, 1).sampled);
}

template <typename E>
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("wrong error type: ") + e.what();
  }
  return "no error";
}

TEST(TraceIndexTest, BadInputIsNamed) {
  auto index_of = [](std::string text) { return [text] { TraceIndex(text, "run/bad.json"); }; };
  EXPECT_EQ(error_of<DataLossError>(index_of(R"({"traceEvents":[{"ph":"X",}]})")),
            "run/bad.json: not valid JSON at byte 26: expected a string");
  EXPECT_EQ(error_of<DataLossError>(index_of("")), "run/bad.json: not valid JSON at byte 0: the file is empty");
  EXPECT_NE(error_of<DataLossError>(index_of(R"({"traceEvents":[)")).find("run/bad.json: not valid JSON"),
            std::string::npos);
  EXPECT_NE(error_of<DataLossError>(index_of(R"({"traceEvents":[]} x)")).find("data after the end"), std::string::npos);
  EXPECT_EQ(error_of<InvalidArgumentError>(index_of(R"({"events":[]})")),
            "run/bad.json: no \"traceEvents\" array: not a Chrome trace");
  EXPECT_EQ(error_of<InvalidArgumentError>(index_of(R"({"traceEvents":[1]})")),
            "run/bad.json: traceEvents[0] is not an object: not a Chrome trace");
  EXPECT_EQ(error_of<InvalidArgumentError>(index_of(R"("x")")),
            "run/bad.json: neither a JSON object nor an array: not a Chrome trace");
  EXPECT_EQ(error_of<InvalidArgumentError>(index_of(R"([{"ph":"X","ts":"1"}])")),
            "run/bad.json: traceEvents[0] (ph \"X\"): \"ts\" is not a number: \"1\"");
  EXPECT_EQ(error_of<InvalidArgumentError>(index_of(R"([{"ph":"i"}])")),
            "run/bad.json: traceEvents[0] (ph \"i\"): no \"ts\"");
  EXPECT_NE(error_of<DataLossError>(index_of(std::string(300, '[') + std::string(300, ']'))).find("nested too deeply"),
            std::string::npos);

  const TraceIndex index(small_trace(), "small.json");
  EXPECT_EQ(error_of<InvalidArgumentError>([&] { index.window(5, 4, 10); }),
            "small.json: window start 5.000 is after its end 4.000");
  EXPECT_NE(error_of<InvalidArgumentError>([&] { index.window(NAN, 4, 10); }).find("start is not a finite"),
            std::string::npos);
  EXPECT_NE(error_of<InvalidArgumentError>([&] { index.window(0, 4, 0); }).find("resolution 0"), std::string::npos);
}

class TraceWindowServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    write("run/timeline-1.json", small_trace());
    std::string gz;
    gzip_append(gz, small_trace());
    write("run/timeline-2.json.gz", gz);
    write("run/broken.json", R"({"traceEvents":[{"ph":)");
    write("run/notrace.json", R"({"a":1})");
  }
  void write(const std::string& name, const std::string& contents) {
    fs::create_directories((root_ / name).parent_path());
    std::ofstream(root_ / name, std::ios::binary) << contents;
  }
  HttpReply get(const std::string& target, const ServedDirectory* served = nullptr) {
    const ServedDirectory plain(root_);
    return handle_request(served ? *served : plain, "GET", target);
  }

  testing::TempDir tmp_;
  fs::path root_ = tmp_.path();
};

TEST_F(TraceWindowServerTest, SummaryAndWindowRoutes) {
  for (const std::string name : {"run/timeline-1.json", "run/timeline-2.json.gz"}) {
    SCOPED_TRACE(name);
    HttpReply summary = get("/api/trace_summary/" + name);
    ASSERT_EQ(summary.status, 200) << summary.body;
    EXPECT_EQ(summary.content_type, "application/json");
    EXPECT_EQ(json::parse(summary.body)["events"], 15);

    HttpReply window = get("/api/trace_window/" + name + "?start=9&end=31&resolution=100");
    ASSERT_EQ(window.status, 200) << window.body;
    const json j = json::parse(window.body);
    EXPECT_EQ(names_of(j, "X"), (std::set<std::string>{"step", "op1", "op2"}));
    bool sampled_header = false;
    for (const auto& [key, value] : window.headers)
      if (key == "X-Stepscope-Window-Sampled") sampled_header = value == "0";
    EXPECT_TRUE(sampled_header);
    // Without a range: the whole trace.
    EXPECT_EQ(json::parse(get("/api/trace_window/" + name).body)["traceEvents"].size(), 17u);
  }
}

TEST_F(TraceWindowServerTest, BadParametersAndFilesAreRefused) {
  const std::string w = "/api/trace_window/run/timeline-1.json";
  HttpReply r = get(w + "?start=abc&end=3");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.content_type, "application/json");
  EXPECT_EQ(json::parse(r.body)["error"], "parameter start is not a finite number: 'abc'");
  EXPECT_EQ(get(w + "?start=5&end=3").status, 400);
  EXPECT_EQ(json::parse(get(w + "?start=5&end=3").body)["error"],
            "run/timeline-1.json: window start 5.000 is after its end 3.000");
  EXPECT_EQ(get(w + "?end=inf").status, 400);
  EXPECT_EQ(get(w + "?resolution=1.5").status, 400);
  EXPECT_EQ(get(w + "?resolution=0").status, 400);
  EXPECT_EQ(get(w + "?start=1e1&end=2e1&resolution=10").status, 200);
  EXPECT_EQ(get(w + "?max_events=0").status, 400);
  r = get(w + "?max_events=3");
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(json::parse(r.body)["stepscope_window"]["sampled"]);

  r = get("/api/trace_summary/run/broken.json");
  EXPECT_EQ(r.status, 422);
  EXPECT_EQ(json::parse(r.body)["error"].get<std::string>().rfind("run/broken.json: not valid JSON", 0), 0u) << r.body;
  r = get("/api/trace_window/run/notrace.json?start=0&end=1");
  EXPECT_EQ(r.status, 422);
  EXPECT_EQ(json::parse(r.body)["error"], "run/notrace.json: no \"traceEvents\" array: not a Chrome trace");
  EXPECT_EQ(get("/api/trace_summary/run/nope.json").status, 404);
  EXPECT_EQ(get("/api/trace_summary/../etc/passwd").status, 403);
  EXPECT_EQ(get("/api/trace_summary/%2e%2e/x.json").status, 403);
  EXPECT_EQ(get("/api/trace_window/").status, 403);

  const ServedDirectory with_token(root_, "secret");
  EXPECT_EQ(get("/api/trace_summary/run/timeline-1.json", &with_token).status, 403);
  EXPECT_EQ(get("/api/trace_summary/run/timeline-1.json?token=secret", &with_token).status, 200);
}

TEST_F(TraceWindowServerTest, ViewerPageIsWindowedForBigTracesOrOnRequest) {
  const HttpReply small = get("/viewer/run/timeline-1.json");
  ASSERT_EQ(small.status, 200);
  EXPECT_NE(small.body.find("WINDOWED = false"), std::string::npos);
  EXPECT_EQ(small.body.find("windowed_viewer.js"), std::string::npos);
  const HttpReply asked = get("/viewer/run/timeline-1.json?mode=window");
  EXPECT_NE(asked.body.find("WINDOWED = true"), std::string::npos);
  EXPECT_NE(asked.body.find("<script src=\"/ui/windowed_viewer.js\"></script>"), std::string::npos);
  EXPECT_NE(get("/ui/windowed_viewer.js").body.find("async function startWindowed"), std::string::npos);

  std::string big = R"({"traceEvents":[)";
  while (big.size() < 16'000'000) big += R"({"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":1},)";
  big.back() = ']';
  write("run/big.json", big + "}");
  EXPECT_TRUE(use_windowed_viewer(root_ / "run/big.json", ""));
  EXPECT_FALSE(use_windowed_viewer(root_ / "run/big.json", "mode=full"));
  EXPECT_NE(get("/viewer/run/big.json").body.find("WINDOWED = true"), std::string::npos);
}

TEST_F(TraceWindowServerTest, ConcurrentRequestsShareTheCache) {
  // The server answers on many threads: summaries and windows of several files at once, while
  // one of them is rewritten (a new index), must all answer whole.
  for (int i = 0; i < 5; ++i) write("run/c" + std::to_string(i) + ".json", small_trace());
  std::vector<std::thread> threads;
  std::atomic<int> good = 0;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < 20; ++k) {
        const std::string name = "run/c" + std::to_string((t + k) % 5) + ".json";
        const HttpReply summary = get("/api/trace_summary/" + name);
        const HttpReply window = get("/api/trace_window/" + name + "?start=9&end=31&resolution=100");
        if (summary.status == 200 && window.status == 200 && json::parse(window.body)["traceEvents"].size() == 10)
          ++good;
      }
    });
  }
  for (int k = 0; k < 5; ++k) write_file_atomically(root_ / "run/c4.json", small_trace() + std::string(k + 1, ' '));
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(good, 160);
}

TEST_F(TraceWindowServerTest, CacheRebuildsWhenTheFileChanges) {
  const fs::path file = root_ / "run/timeline-1.json";
  auto a = cached_trace_index(file, "run/timeline-1.json");
  EXPECT_EQ(cached_trace_index(file, "run/timeline-1.json"), a);
  write("run/timeline-1.json", R"({"traceEvents":[{"ph":"i","ts":1,"pid":1,"tid":1}]})");
  fs::last_write_time(file, fs::last_write_time(file) + std::chrono::seconds(2));
  auto b = cached_trace_index(file, "run/timeline-1.json");
  EXPECT_NE(b, a);
  EXPECT_EQ(b->summary().events, 1);
  // At most three kept: a fourth file pushes the least recently used one out.
  for (int i = 0; i < 4; ++i) write("run/t" + std::to_string(i) + ".json", small_trace());
  auto first = cached_trace_index(root_ / "run/t0.json", "t0");
  for (int i = 1; i < 4; ++i) cached_trace_index(root_ / ("run/t" + std::to_string(i) + ".json"), "t");
  EXPECT_NE(cached_trace_index(root_ / "run/t0.json", "t0"), first);
}

}  // namespace
}  // namespace stepscope
