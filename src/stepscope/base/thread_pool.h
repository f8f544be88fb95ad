// A fixed-size pool of worker threads. The executor hands it plain {function, context, arg}
// tasks (no std::function, no allocation per task); kernels split large loops with
// parallel_for, in which the calling thread takes chunks too, so a worker that waits on its
// own parallel_for never deadlocks the pool. A worker that runs out of tasks spins for a few
// tens of microseconds before it sleeps: within a step the next task usually comes sooner
// than a sleeping thread can be woken (on virtual machines, tens of microseconds).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace stepscope {

struct Task {
  void (*fn)(void* context, int64_t arg) = nullptr;
  void* context = nullptr;
  int64_t arg = 0;
};

class ThreadPool {
 public:
  // num_threads == 0 means one per hardware core.
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()); }
  void schedule(Task task);

  // Calls fn(begin, end) over [0, n) in chunks of at least `min_chunk` items, on the pool and
  // on the calling thread; returns when every chunk is done. Exceptions from fn are rethrown
  // on the caller (the first one wins).
  void parallel_for(int64_t n, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& fn);

  // Runs queued tasks on the calling thread, as one more worker, until `done` is true; sleeps
  // while there are none. Whoever sets `done` must call wake_all() afterwards. Session::run
  // waits for its step this way, so that the thread that called it keeps working: with one
  // worker, a kernel's parallel_for would otherwise have nobody to share its chunks with.
  void run_until(const std::atomic<bool>& done);
  void wake_all();

 private:
  void worker_loop();
  // Runs tasks until the pool stops (done == nullptr) or *done is true.
  void run_tasks(const std::atomic<bool>* done);
  // Returns when a task is queued, *done is true, or after ~50 us of neither.
  void spin_until_queued(const std::atomic<bool>* done) const;

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  bool stopping_ = false;
  // Tasks queued (a hint read without the lock by spinning workers) and workers asleep on cv_
  // (schedule() skips the wake-up system call when none is).
  std::atomic<int64_t> queued_{0};
  int sleeping_ = 0;
  std::vector<std::thread> workers_;
};

// A small dense id for the calling thread (0, 1, 2, ... in order of first use), for traces.
uint32_t current_thread_id();

}  // namespace stepscope
