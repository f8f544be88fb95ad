// A thread for work meant to run beside its caller, on a core the caller leaves idle: mapping
// the memory a step is about to write, making a plan's names while its first traced step runs.
//
// Linux often starts a new thread on its creator's core, where it waits for the creator's time
// slice: measured on this workplace's 2-core VMs, 2 threads in 5 started 1-3 ms late while
// their creator ran, the other core idle. Work worth a thread there is a few hundred µs to a few
// ms, so a ThreadBeside is placed on the other cores the process may use (where there are
// any), and once it runs it may go anywhere again.
//
// The threads are kept, parked, for the next ThreadBeside: a new thread cost its creator 15-40
// µs there (95 µs for a process's first), and waiting for its exit another 20-25, where waking a
// parked one and waiting for its work cost a few µs. A traced step starts one or two of them.
#pragma once

#include <atomic>
#include <functional>
#include <memory>

namespace stepscope {

class ThreadBeside {
 public:
  ThreadBeside() = default;
  // Starts `work` on a thread of its own (a parked one where there is one, else a new one), off
  // the calling thread's core where the process may use another. What `work` throws is dropped:
  // it is a head start on something its caller would otherwise do (or fail at) itself. Throws
  // std::system_error where no thread can be had.
  explicit ThreadBeside(std::function<void()> work);
  ThreadBeside(ThreadBeside&& other) noexcept = default;
  // Waits for the work it held, if any, first.
  ThreadBeside& operator=(ThreadBeside&& other) noexcept;
  ThreadBeside(const ThreadBeside&) = delete;
  ThreadBeside& operator=(const ThreadBeside&) = delete;
  // Waits for the work: it may read what its owner holds.
  ~ThreadBeside() { join(); }

  // Whether work was started (and not joined yet).
  bool started() const { return done_ != nullptr; }
  // Whether the work has returned, what it held destroyed (true without any).
  bool done() const { return !done_ || done_->load(std::memory_order_acquire); }
  void join() noexcept;

  // Has threads parked for the process's first ThreadBesides, made now, until kMadeAhead were
  // made in the process: what a new thread costs (~95 µs for a process's first on this
  // workplace's VMs, 15-40 later) is then paid here (when a session is made), not inside its
  // traced steps. Two: a traced step may start two, and the first traced step's may still be
  // at work beside the next (making its plan's names): the second step found none parked and
  // made one, 35-130 µs of a 10^3-node step's ~200.
  static constexpr int kMadeAhead = 2;
  static void make_ahead() noexcept;
  // How many threads are parked, waiting for work (for tests).
  static int parked();

 private:
  std::shared_ptr<std::atomic<bool>> done_;
};

// std::thread::hardware_concurrency(), asked once: it reads a file of /sys each time (~10 µs a
// call on this workplace's VMs).
unsigned hardware_cores();

}  // namespace stepscope
