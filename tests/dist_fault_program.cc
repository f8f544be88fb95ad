// The test dist.a_failing_rank_ends_the_job (CMakeLists.txt) runs this on 2 ranks: rank 1's step 3
// fails in a kernel (CheckNumerics on a NaN), so rank 1 leaves main while rank 0 waits for it in
// that step's Allreduce. The job must end with a clear error within the shutdown timeout, not hang.
#include <cmath>
#include <cstdio>
#include <limits>

#include "stepscope/dist/mpi.h"
#include "stepscope/ops/all_ops.h"
#include "stepscope/runtime/session.h"

using namespace stepscope;

int main() {
  try {
    dist::init({.shutdown_timeout_secs = 2});
    Graph g;
    Scope root(g);
    Output x = placeholder(root, DType::kFloat32, Shape{2});
    Output sum = allreduce(root, check_numerics(root, x, "rank input"));
    Session session(g);
    for (int step = 0; step < 10; ++step) {
      const float v = dist::rank() == 1 && step == 3 ? std::numeric_limits<float>::quiet_NaN() : 1.0f;
      session.run(sum, {{x, Tensor::from_vector<float>({v, v})}});
    }
    std::printf("rank %d: all steps ran\n", dist::rank());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d failed: %s\n", dist::rank(), e.what());
    return 1;  // dist::shutdown runs at exit
  }
  return 0;
}
