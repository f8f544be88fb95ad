// When periodic hooks fire: every N steps or every N seconds (TensorFlow's SecondOrStepTimer),
// with the reference's inclusive semantics, on an injectable clock so tests control time.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>

namespace stepscope {

// Seconds on some monotonic scale. Hooks take a Clock* (null = the steady clock).
class Clock {
 public:
  virtual ~Clock() = default;
  virtual double now_secs() const = 0;
  // The process-wide steady clock.
  static const Clock* system();
};

// A clock tests move by hand.
class FakeClock : public Clock {
 public:
  explicit FakeClock(double start = 1000.0) : now_(start) {}
  double now_secs() const override { return now_; }
  void advance(double secs) { now_ += secs; }
  void set(double secs) { now_ = secs; }

 private:
  double now_;
};

class HookTimer {
 public:
  virtual ~HookTimer() = default;
  virtual void reset() = 0;
  virtual bool should_trigger_for_step(int64_t step) = 0;
  // Records a trigger at `step`; returns (elapsed secs, elapsed steps) since the previous one,
  // or nothing on the first.
  virtual std::optional<std::pair<double, int64_t>> update_last_triggered_step(int64_t step) = 0;
  virtual std::optional<int64_t> last_triggered_step() const = 0;
};

class SecondOrStepTimer : public HookTimer {
 public:
  // Exactly one of every_secs / every_steps; otherwise InvalidArgumentError with the reference's
  // texts ("Either every_secs or every_steps should be provided." / "Can not provide both
  // every_secs and every_steps."). Beyond the reference, which takes anything: every_steps must
  // be >= 1 and every_secs a finite number >= 0 (a NaN never compares true, so such a timer
  // would silently never fire again); the InvalidArgumentError names the option as the hook
  // calls it (secs_name, steps_name), e.g. "save_steps must be at least 1, given: 0".
  SecondOrStepTimer(std::optional<double> every_secs, std::optional<int64_t> every_steps,
                    const Clock* clock = nullptr, const char* secs_name = "every_secs",
                    const char* steps_name = "every_steps");
  void reset() override;
  bool should_trigger_for_step(int64_t step) override;
  std::optional<std::pair<double, int64_t>> update_last_triggered_step(int64_t step) override;
  std::optional<int64_t> last_triggered_step() const override { return last_step_; }

 private:
  std::optional<double> every_secs_;
  std::optional<int64_t> every_steps_;
  const Clock* clock_;
  std::optional<int64_t> last_step_;
  double last_time_ = 0;
};

// Never fires (LoggingTensorHook with only at_end).
class NeverTriggerTimer : public HookTimer {
 public:
  void reset() override {}
  bool should_trigger_for_step(int64_t) override { return false; }
  std::optional<std::pair<double, int64_t>> update_last_triggered_step(int64_t) override { return std::nullopt; }
  std::optional<int64_t> last_triggered_step() const override { return std::nullopt; }
};

}  // namespace stepscope
