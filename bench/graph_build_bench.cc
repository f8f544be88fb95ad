// Building a graph: what a node added costs, with the call stack of its creation captured
// (graph/call_stack.h, the default) and without (STEPSCOPE_CAPTURE_STACKS=0), and what the
// profiler's symbolisation of those stacks costs when a code view first needs it.
//   BM_AddNodes/capture:C/depth:D   a chain of 1000 Neg nodes built from D nested user calls
//                                   deep; items/s = nodes added per second
//   BM_CaptureCallStack/depth:D     capture_call_stack alone, D calls deep
//   BM_SymbolizeStacks/cold:1       Profiler::profile_code of a 1000-node graph (distinct stacks
//                                   per call site); the first symbolisation of a process is not
//                                   repeatable, so cold:1 includes libdw's cache of addresses
#include <benchmark/benchmark.h>

#include <memory>
#include <sstream>

#include "stepscope/graph/call_stack.h"
#include "stepscope/ops/all_ops.h"
#include "stepscope/profiler/tfprof/profiler.h"

namespace stepscope {
namespace {

__attribute__((noinline)) Output nested_neg(const Scope& s, Output x, int depth) {
  Output y = depth <= 0 ? neg(s, x) : nested_neg(s, x, depth - 1);
  asm volatile("" ::: "memory");  // no tail call: each level keeps its frame
  return y;
}

__attribute__((noinline)) int nested_capture(int depth) {
  uintptr_t pcs[kMaxCallStackDepth];
  const int n = depth <= 0 ? capture_call_stack(pcs, kMaxCallStackDepth) : nested_capture(depth - 1);
  asm volatile("" ::: "memory");
  return n;
}

void BM_AddNodes(benchmark::State& state) {
  const bool capture = state.range(0) != 0;
  const int depth = static_cast<int>(state.range(1));
  constexpr int kNodes = 1000;
  for (auto _ : state) {
    state.PauseTiming();
    auto g = std::make_unique<Graph>();
    g->set_capture_call_stacks(capture);
    Scope root(*g);
    Output x = placeholder(root, DType::kFloat32, Shape{4});
    state.ResumeTiming();
    for (int i = 0; i < kNodes; ++i) x = nested_neg(root, x, depth);
    state.PauseTiming();
    g.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * kNodes);
}
BENCHMARK(BM_AddNodes)->ArgsProduct({{0, 1}, {0, 10}})->ArgNames({"capture", "depth"});

void BM_CaptureCallStack(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(nested_capture(static_cast<int>(state.range(0))));
}
BENCHMARK(BM_CaptureCallStack)->Arg(0)->Arg(10)->Arg(30)->ArgName("depth");

void BM_SymbolizeStacks(benchmark::State& state) {
  for (auto _ : state) {
    state.PauseTiming();
    Graph g;
    Scope root(g);
    Output x = placeholder(root, DType::kFloat32, Shape{4});
    for (int i = 0; i < 1000; ++i) x = nested_neg(root, x, i % 8);
    Profiler profiler(g);
    std::ostringstream log;
    profiler.set_log(&log);
    state.ResumeTiming();
    benchmark::DoNotOptimize(profiler.profile_code(ProfileOptionBuilder().with_empty_output().build()));
  }
}
BENCHMARK(BM_SymbolizeStacks)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace stepscope

BENCHMARK_MAIN();
