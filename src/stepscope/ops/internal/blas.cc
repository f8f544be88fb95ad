#include "stepscope/ops/internal/blas.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "stepscope/base/error.h"

namespace stepscope::blas {
namespace {

// CBLAS enum values (cblas.h): RowMajor = 101, NoTrans = 111, Trans = 112.
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;

using SgemmFn = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*,
                         int);
using DgemmFn = void (*)(int, int, int, int, int, int, double, const double*, int, const double*, int, double,
                         double*, int);
using SetThreadsFn = void (*)(int);
using CoreNameFn = char* (*)();

struct Library {
  SgemmFn sgemm = nullptr;
  DgemmFn dgemm = nullptr;
  SetThreadsFn set_threads = nullptr;
  CoreNameFn core_name = nullptr;
};

const Library& library() {
  static const Library lib = [] {
    // Choose the kernels before OpenBLAS's constructor reads the environment.
    if (!std::getenv("OPENBLAS_CORETYPE")) {
      __builtin_cpu_init();
      if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw"))
        setenv("OPENBLAS_CORETYPE", "SkylakeX", 0);
      else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        setenv("OPENBLAS_CORETYPE", "Haswell", 0);
    }
    if (!std::getenv("OPENBLAS_NUM_THREADS")) setenv("OPENBLAS_NUM_THREADS", "1", 0);
    void* handle = nullptr;
    for (const char* name : {"libopenblas.so.0", "libopenblas.so"})
      if ((handle = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
    if (!handle)
      throw InternalError(std::string("cannot load OpenBLAS (Debian package libopenblas0): ") + dlerror());
    Library l;
    l.sgemm = reinterpret_cast<SgemmFn>(dlsym(handle, "cblas_sgemm"));
    l.dgemm = reinterpret_cast<DgemmFn>(dlsym(handle, "cblas_dgemm"));
    l.set_threads = reinterpret_cast<SetThreadsFn>(dlsym(handle, "openblas_set_num_threads"));
    l.core_name = reinterpret_cast<CoreNameFn>(dlsym(handle, "openblas_get_corename"));
    if (!l.sgemm || !l.dgemm) throw InternalError("OpenBLAS has no cblas_sgemm/cblas_dgemm");
    if (l.set_threads) l.set_threads(1);
    return l;
  }();
  return lib;
}

}  // namespace

void sgemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  library().sgemm(kRowMajor, transpose_a ? kTrans : kNoTrans, transpose_b ? kTrans : kNoTrans, static_cast<int>(m),
                  static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb),
                  beta, c, static_cast<int>(ldc));
}

void dgemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
           int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  library().dgemm(kRowMajor, transpose_a ? kTrans : kNoTrans, transpose_b ? kTrans : kNoTrans, static_cast<int>(m),
                  static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb),
                  beta, c, static_cast<int>(ldc));
}

void load() { library(); }

std::string core_name() {
  const Library& l = library();
  return l.core_name ? std::string(l.core_name()) : std::string("unknown");
}

void set_num_threads(int threads) {
  const Library& l = library();
  if (l.set_threads) l.set_threads(threads);
}

}  // namespace stepscope::blas
