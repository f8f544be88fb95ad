// tfprof's advisor (tensorflow/core/profiler/internal/advisor): checkers that look at a
// profile and report what may be wrong or expensive. Profiler::advise runs the checkers named
// in AdvisorOptions::checkers, in TensorFlow's order (AcceleratorUtilizationChecker,
// OperationChecker, ExpensiveOperationChecker), then the checkers added with
// Profiler::add_checker, and returns their reports by checker name.
//
// The built-in checkers' texts are TensorFlow's:
//  - AcceleratorUtilizationChecker: per GPU device (from the latest step of each node placed
//    there) "device: <d> utilization: 0.83", or "device: <d> low utilization: 0.12" below 0.5.
//  - OperationChecker: "Maybe use faster FusedBatchNorm instead of BatchNorm" and
//    "Found operation using NHWC data_format on GPU. Maybe NCHW is faster."
//  - ExpensiveOperationChecker: the 3 most expensive op types ("top 1 operation type: MatMul,
//    cpu: 1.20ms, accelerator: 0us, total: 1.20ms (35.12%)"), graph nodes ("top 1 graph node:
//    dense/MatMul, cpu: ..., accelerator: ..., total: ...") and source lines.
// And one of stepscope's own, CriticalPathChecker (critical_path_checker.h): the chain of ops
// that determined the latest step's wall time.
#pragma once

#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace stepscope {

class Profiler;

// A checker of the advisor: Profiler::add_checker adds one of the user's; advise() runs it when
// AdvisorOptions::checkers names it.
class AdviceChecker {
 public:
  virtual ~AdviceChecker() = default;
  virtual std::string name() const = 0;
  // The checker's reports (each may span lines). `options` are the checker's own options;
  // diagnostics (TensorFlow's stderr lines: "Missing ... Skip <checker>") go to `log`.
  virtual std::vector<std::string> check(const Profiler& profiler, const std::map<std::string, std::string>& options,
                                         std::ostream& log) const = 0;
};

// TensorFlow's three open-source checkers, in the order advise() runs them, then stepscope's
// CriticalPathChecker.
std::vector<std::unique_ptr<AdviceChecker>> builtin_advice_checkers();

}  // namespace stepscope
