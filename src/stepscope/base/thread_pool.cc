#include "stepscope/base/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <memory>

#include "stepscope/base/clock.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace stepscope {
namespace {

// How long a thread with nothing to do spins before it sleeps. Waking a sleeping thread costs
// from microseconds to, on this workplace's virtual machines, hundreds of microseconds (the
// idle virtual CPU must be scheduled again): longer than most gaps between a step's tasks.
constexpr int64_t kSpinNs = 200000;

// A hint to the core that this is a spin loop (frees the other hyperthread's resources).
inline void pause() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}
std::atomic<uint32_t> next_thread_id{0};
}  // namespace

uint32_t current_thread_id() {
  thread_local uint32_t id = next_thread_id.fetch_add(1, std::memory_order_relaxed);
  return id;
}

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = std::max(1u, std::thread::hardware_concurrency());
  workers_.reserve(num_threads);
  for (int i = 0; i < num_threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::schedule(Task task) {
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(task);
    queued_.store(static_cast<int64_t>(queue_.size()), std::memory_order_relaxed);
    wake = sleeping_ > 0;
  }
  if (wake) cv_.notify_one();
}


void ThreadPool::spin_until_queued(const std::atomic<bool>* done) const {
  const int64_t until = now_ns() + kSpinNs;
  while (queued_.load(std::memory_order_relaxed) == 0) {
    if (done && done->load(std::memory_order_relaxed)) return;
    for (int i = 0; i < 32; ++i) pause();
    // More threads than cores (or a busy machine): let a thread with work have this core.
    std::this_thread::yield();
    if (now_ns() > until) return;
  }
}

void ThreadPool::run_tasks(const std::atomic<bool>* done) {
  for (;;) {
    spin_until_queued(done);
    Task task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      auto finished = [&] { return done ? done->load(std::memory_order_acquire) : stopping_; };
      while (!finished() && queue_.empty()) {
        ++sleeping_;
        cv_.wait(lock);
        --sleeping_;
      }
      // A worker drains the queue before it stops; a caller leaves what is left to the workers.
      if (done ? finished() : queue_.empty()) return;
      task = queue_.front();
      queue_.pop_front();
      queued_.store(static_cast<int64_t>(queue_.size()), std::memory_order_relaxed);
    }
    task.fn(task.context, task.arg);
  }
}

void ThreadPool::worker_loop() {
  run_tasks(nullptr);
}

void ThreadPool::run_until(const std::atomic<bool>& done) { run_tasks(&done); }

void ThreadPool::wake_all() {
  { std::lock_guard<std::mutex> lock(mutex_); }  // a waiter either saw `done` or is waiting
  cv_.notify_all();
}

namespace {
// Shared by the caller and the helpers of one parallel_for; helpers hold a reference so the
// state outlives a caller that finished every chunk itself.
struct ParallelForState {
  const std::function<void(int64_t, int64_t)>* fn;
  int64_t n, chunk, num_chunks;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
  std::mutex mutex;
  std::condition_variable cv;
  std::exception_ptr error;

  // Runs chunks until none is left; returns after finishing its last claimed one.
  void drain() {
    for (;;) {
      int64_t c = next.fetch_add(1, std::memory_order_relaxed);
      if (c >= num_chunks) return;
      int64_t b = c * chunk, e = std::min(n, b + chunk);
      try {
        (*fn)(b, e);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!error) error = std::current_exception();
      }
      if (done.fetch_add(1, std::memory_order_acq_rel) + 1 == num_chunks) {
        std::lock_guard<std::mutex> lock(mutex);
        cv.notify_all();
      }
    }
  }
};
}  // namespace

void ThreadPool::parallel_for(int64_t n, int64_t min_chunk,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  min_chunk = std::max<int64_t>(1, min_chunk);
  const int64_t max_parts = static_cast<int64_t>(workers_.size()) + 1;
  int64_t parts = std::min(max_parts, (n + min_chunk - 1) / min_chunk);
  if (parts <= 1) {
    fn(0, n);
    return;
  }
  auto state = std::make_shared<ParallelForState>();
  state->fn = &fn;
  state->n = n;
  state->chunk = (n + parts - 1) / parts;
  state->num_chunks = (n + state->chunk - 1) / state->chunk;
  for (int64_t i = 1; i < state->num_chunks; ++i) {
    auto* held = new std::shared_ptr<ParallelForState>(state);
    schedule({[](void* ctx, int64_t) {
                auto* s = static_cast<std::shared_ptr<ParallelForState>*>(ctx);
                (*s)->drain();
                delete s;
              },
              held, 0});
  }
  state->drain();
  // The last chunks are usually done within microseconds: wait for them spinning, not asleep.
  const int64_t until = now_ns() + kSpinNs;
  while (state->done.load(std::memory_order_acquire) != state->num_chunks && now_ns() < until) {
    for (int i = 0; i < 32; ++i) pause();
    std::this_thread::yield();
  }
  {
    std::unique_lock<std::mutex> lock(state->mutex);
    state->cv.wait(lock, [&] { return state->done.load() == state->num_chunks; });
  }
  if (state->error) std::rethrow_exception(state->error);
}

}  // namespace stepscope
