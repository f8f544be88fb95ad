#include "stepscope/tools/merge_command.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "stepscope/base/error.h"
#include "stepscope/base/file_io.h"

namespace stepscope {
namespace {

using nlohmann::json;

struct Input {
  const std::string* name;
  json trace;
  int64_t rank;
  int64_t base_ns, offset_ns, error_ns;
};

int64_t int_field(const json& object, const char* key, int64_t fallback) {
  auto it = object.find(key);
  return it != object.end() && it->is_number_integer() ? it->get<int64_t>() : fallback;
}

// Phases whose id names a flow, an async slice or an object: one rank's ids must not meet another's.
// "12.345" for 12345 ns.
std::string micros(int64_t ns) {
  char text[32];
  const int64_t a = ns < 0 ? -ns : ns;
  std::snprintf(text, sizeof text, "%s%lld.%03lld", ns < 0 ? "-" : "", static_cast<long long>(a / 1000),
                static_cast<long long>(a % 1000));
  return text;
}

bool has_scoped_id(const std::string& ph) {
  return ph.size() == 1 && std::string_view("stfbneNOD").find(ph[0]) != std::string_view::npos;
}

}  // namespace

std::string merge_rank_traces(const std::vector<std::pair<std::string, std::string>>& traces) {
  if (traces.empty()) throw InvalidArgumentError("merge: no traces to merge");
  std::vector<Input> inputs;
  for (size_t i = 0; i < traces.size(); ++i) {
    const auto& [name, text] = traces[i];
    json trace = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (trace.is_discarded() || !trace.is_object() || !trace.contains("traceEvents") ||
        !trace["traceEvents"].is_array())
      throw InvalidArgumentError(name + ": not a Chrome trace (a JSON object with a traceEvents array)");
    const json metadata = trace.value("metadata", json::object());
    Input in{&name,
             std::move(trace),
             int_field(metadata, "rank", static_cast<int64_t>(i)),
             0,
             int_field(metadata, "clock_offset_ns", 0),
             int_field(metadata, "clock_offset_error_ns", 0)};
    in.base_ns = int_field(in.trace, "baseTimeNanoseconds", -1);
    if (in.base_ns < 0 && traces.size() > 1)
      throw InvalidArgumentError(name + ": no baseTimeNanoseconds, so its events cannot be placed on the job's clock");
    inputs.push_back(std::move(in));
  }
  std::sort(inputs.begin(), inputs.end(), [](const Input& a, const Input& b) { return a.rank < b.rank; });
  for (size_t i = 1; i < inputs.size(); ++i)
    if (inputs[i].rank == inputs[i - 1].rank)
      throw InvalidArgumentError(*inputs[i].name + ": rank " + std::to_string(inputs[i].rank) + " again (also " +
                                 *inputs[i - 1].name + ")");

  // On rank 0's clock, from the earliest input's base, so no time goes negative.
  int64_t base = INT64_MAX;
  for (const Input& in : inputs) base = std::min(base, std::max<int64_t>(0, in.base_ns) - in.offset_ns);
  int64_t pid_stride = 1;
  for (const Input& in : inputs)
    for (const json& e : in.trace["traceEvents"])
      if (e.is_object() && e.contains("pid") && e["pid"].is_number_integer())
        pid_stride = std::max(pid_stride, e["pid"].get<int64_t>() + 1);

  // Events are written one by one, ts and dur as microseconds with three decimals (integer
  // nanoseconds, as every stepscope trace: json's shortest-double form would lose that layout).
  std::string events;
  json ranks = json::array();
  for (size_t k = 0; k < inputs.size(); ++k) {
    Input& in = inputs[k];
    const std::string prefix = "rank " + std::to_string(in.rank);
    const int64_t shift_ns = std::max<int64_t>(0, in.base_ns) - in.offset_ns - base;
    for (json& e : in.trace["traceEvents"]) {
      if (!e.is_object()) continue;
      if (e.contains("pid") && e["pid"].is_number_integer())
        e["pid"] = static_cast<int64_t>(k) * pid_stride + e["pid"].get<int64_t>();
      const std::string ph = e.value("ph", "");
      if (e.contains("id") && has_scoped_id(ph))
        e["id"] = prefix + ":" + (e["id"].is_string() ? e["id"].get<std::string>() : e["id"].dump());
      if (ph == "M" && e.value("name", "") == "process_name" && e.contains("args") && e["args"].contains("name") &&
          e["args"]["name"].is_string())
        e["args"]["name"] = prefix + ": " + e["args"]["name"].get<std::string>();
      if (ph == "M" && e.value("name", "") == "process_sort_index" && e.contains("pid"))
        e["args"]["sort_index"] = e["pid"];
      std::string times;
      for (const char* key : {"ts", "dur"}) {
        auto it = e.find(key);
        if (it == e.end() || !it->is_number()) continue;
        const int64_t ns = std::llround(it->get<double>() * 1000.0) + (key[0] == 't' ? shift_ns : 0);
        times += std::string(",\"") + key + "\":" + micros(ns);
        e.erase(it);
      }
      std::string text = e.dump();
      text.insert(text.size() - 1, text.size() > 2 ? times : times.substr(std::min<size_t>(1, times.size())));
      if (!events.empty()) events += ',';
      events += text;
    }
    ranks.push_back({{"rank", in.rank},
                     {"file", *in.name},
                     {"clock_offset_ns", in.offset_ns},
                     {"clock_offset_error_ns", in.error_ns}});
  }
  json rest = {{"displayTimeUnit", "ns"}};
  if (base != INT64_MAX && inputs.front().base_ns >= 0) rest["baseTimeNanoseconds"] = base;
  rest["metadata"] = {{"merged_ranks", std::move(ranks)}};
  return "{\"traceEvents\":[" + events + "]," + rest.dump().substr(1);
}

Stragglers find_stragglers(const std::string& merged_trace) {
  const json trace = json::parse(merged_trace, nullptr, /*allow_exceptions=*/false);
  if (trace.is_discarded() || !trace.is_object() || !trace.contains("traceEvents"))
    throw InvalidArgumentError("straggler report: not a Chrome trace");
  // Each process's rank, from the names merge gave them ("rank R: ...").
  std::map<int64_t, int64_t> rank_of_pid;
  for (const json& e : trace["traceEvents"])
    if (e.value("ph", "") == "M" && e.value("name", "") == "process_name" && e.contains("args") &&
        e["args"].value("name", "").starts_with("rank "))
      rank_of_pid[e.value("pid", int64_t{-1})] = std::atoll(e["args"]["name"].get<std::string>().c_str() + 5);
  static const std::set<std::string> kCollectives = {"Allreduce", "Broadcast", "Reduce", "Allgather", "ReduceScatter"};
  // (node name, n-th run) -> rank -> start (µs).
  std::map<std::pair<std::string, int>, std::map<int64_t, double>> runs;
  std::map<std::pair<int64_t, std::string>, int> seen;  // (rank, node) -> runs so far
  std::vector<const json*> slices;
  for (const json& e : trace["traceEvents"])
    if (e.value("ph", "") == "X" && e.contains("args") && kCollectives.count(e["args"].value("op", "")) &&
        rank_of_pid.count(e.value("pid", int64_t{-1})) && e.contains("ts") && e["ts"].is_number())
      slices.push_back(&e);
  std::stable_sort(slices.begin(), slices.end(),
                   [](const json* a, const json* b) { return (*a)["ts"].get<double>() < (*b)["ts"].get<double>(); });
  for (const json* e : slices) {
    const int64_t rank = rank_of_pid[(*e)["pid"].get<int64_t>()];
    const std::string name = (*e)["args"].value("name", "");
    const int n = seen[{rank, name}]++;
    runs[{name, n}][rank] = (*e)["ts"].get<double>();
  }
  Stragglers result;
  for (const auto& [key, starts] : runs) {
    if (starts.size() < 2) continue;
    auto last = std::max_element(starts.begin(), starts.end(),
                                 [](const auto& a, const auto& b) { return a.second < b.second; });
    CollectiveWait row{.collective = key.first + (key.second ? " #" + std::to_string(key.second + 1) : ""),
                       .last_rank = last->first,
                       .wait_us = {}};
    for (const auto& [rank, start] : starts) {
      result.total_wait_us[rank] += 0;  // every rank is in the totals, the last to arrive too
      if (rank == last->first) continue;
      const double wait = last->second - start;
      result.total_wait_us[rank] += wait;
      row.max_wait_us = std::max(row.max_wait_us, wait);
      row.wait_us[rank] = wait;
    }
    result.collectives.push_back(std::move(row));
  }
  std::stable_sort(result.collectives.begin(), result.collectives.end(),
                   [](const CollectiveWait& a, const CollectiveWait& b) { return a.max_wait_us > b.max_wait_us; });
  return result;
}

std::string Stragglers::to_json(size_t top) const {
  auto by_rank = [](const std::map<int64_t, double>& waits) {
    json out = json::object();
    for (const auto& [rank, us] : waits) out[std::to_string(rank)] = us;
    return out;
  };
  json rows = json::array();
  for (size_t i = 0; i < collectives.size() && i < top; ++i)
    rows.push_back({{"collective", collectives[i].collective},
                    {"last_rank", collectives[i].last_rank},
                    {"max_wait_us", collectives[i].max_wait_us},
                    {"wait_us", by_rank(collectives[i].wait_us)}});
  return json{{"collectives", std::move(rows)}, {"total_wait_us", by_rank(total_wait_us)}}.dump();
}

std::string straggler_report(const std::string& merged_trace, size_t top) {
  const Stragglers stragglers = find_stragglers(merged_trace);
  if (stragglers.collectives.empty()) return "no collective ran on two ranks or more\n";
  std::string out = "collective  last to arrive  others waited (us)\n";
  for (size_t i = 0; i < stragglers.collectives.size() && i < top; ++i) {
    const CollectiveWait& row = stragglers.collectives[i];
    out += row.collective + "  rank " + std::to_string(row.last_rank) + "  ";
    bool first = true;
    for (const auto& [rank, wait] : row.wait_us) {
      char text[64];
      std::snprintf(text, sizeof text, "%srank %lld %.3f", first ? "" : ", ", static_cast<long long>(rank), wait);
      out += text;
      first = false;
    }
    out += "\n";
  }
  out += "total wait (us):";
  for (const auto& [rank, wait] : stragglers.total_wait_us) {
    char text[64];
    std::snprintf(text, sizeof text, " rank %lld %.3f", static_cast<long long>(rank), wait);
    out += text;
  }
  return out + "\n";
}

void add_merge_command(CLI::App& app, MergeCommand& m) {
  m.command =
      app.add_subcommand("merge", "One Chrome trace of a data-parallel job from its ranks' timelines, on one clock");
  m.command->add_option("traces", m.inputs, "The ranks' timelines (.json or .json.gz), in any order")->required();
  m.command->add_option("--output,-o", m.output, "The merged trace to write (.json, or .json.gz)")->required();
  m.command->add_flag("--stragglers", m.stragglers,
                      "Also print, for each collective, the rank that arrived last and how long the others waited");
}

int run_merge_command(const MergeCommand& m, uint64_t max_decompressed_bytes, std::ostream& out) {
  std::vector<std::pair<std::string, std::string>> traces;
  for (const std::string& path : m.inputs) traces.emplace_back(path, read_file(path, max_decompressed_bytes));
  const std::string merged = merge_rank_traces(traces);
  write_file_atomically(m.output, merged, m.output.size() > 3 && m.output.ends_with(".gz"));
  out << "wrote " << m.output << ": " << traces.size() << " rank(s), " << merged.size() << " bytes of JSON\n";
  if (m.stragglers) out << straggler_report(merged);
  return 0;
}

}  // namespace stepscope
