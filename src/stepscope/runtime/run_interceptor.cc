#include "stepscope/runtime/run_interceptor.h"

#include <atomic>

#include "stepscope/base/error.h"

namespace stepscope {
namespace {

std::atomic<RunInterceptor*> installed{nullptr};

}  // namespace

void install_run_interceptor(RunInterceptor* interceptor) {
  RunInterceptor* expected = nullptr;
  if (!installed.compare_exchange_strong(expected, interceptor, std::memory_order_acq_rel))
    throw InternalError("Already in context or context not cleaned.");
}

void remove_run_interceptor(RunInterceptor* interceptor) {
  RunInterceptor* expected = interceptor;
  installed.compare_exchange_strong(expected, nullptr, std::memory_order_acq_rel);
}

RunInterceptor* current_run_interceptor() { return installed.load(std::memory_order_acquire); }

}  // namespace stepscope
