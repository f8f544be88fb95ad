#include "stepscope/hooks/timer.h"

#include <chrono>
#include <cmath>
#include <sstream>

#include "stepscope/base/error.h"

namespace stepscope {

namespace {
class SteadyClock final : public Clock {
 public:
  double now_secs() const override {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }
};
}  // namespace

const Clock* Clock::system() {
  static const SteadyClock clock;
  return &clock;
}

SecondOrStepTimer::SecondOrStepTimer(std::optional<double> every_secs, std::optional<int64_t> every_steps,
                                     const Clock* clock, const char* secs_name, const char* steps_name)
    : every_secs_(every_secs), every_steps_(every_steps), clock_(clock ? clock : Clock::system()) {
  if (!every_secs_ && !every_steps_)
    throw InvalidArgumentError("Either every_secs or every_steps should be provided.");
  if (every_secs_ && every_steps_) throw InvalidArgumentError("Can not provide both every_secs and every_steps.");
  if (every_steps_ && *every_steps_ < 1)
    throw InvalidArgumentError(std::string(steps_name) + " must be at least 1, given: " +
                               std::to_string(*every_steps_));
  if (every_secs_ && !(std::isfinite(*every_secs_) && *every_secs_ >= 0)) {
    std::ostringstream given;
    given << *every_secs_;
    throw InvalidArgumentError(std::string(secs_name) + " must be a finite number of seconds >= 0, given: " +
                               given.str());
  }
}

void SecondOrStepTimer::reset() { last_step_.reset(); }

bool SecondOrStepTimer::should_trigger_for_step(int64_t step) {
  if (!last_step_) return true;
  if (step == *last_step_) return false;
  if (every_secs_ && clock_->now_secs() >= last_time_ + *every_secs_) return true;
  if (every_steps_ && step >= *last_step_ + *every_steps_) return true;
  return false;
}

std::optional<std::pair<double, int64_t>> SecondOrStepTimer::update_last_triggered_step(int64_t step) {
  const double now = clock_->now_secs();
  std::optional<std::pair<double, int64_t>> elapsed;
  if (last_step_) elapsed = std::make_pair(now - last_time_, step - *last_step_);
  last_step_ = step;
  last_time_ = now;
  return elapsed;
}

}  // namespace stepscope
