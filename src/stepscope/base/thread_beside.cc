#include "stepscope/base/thread_beside.h"

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

#include <utility>

namespace stepscope {
namespace {

// The cores the process may use, for a new thread to be placed off its creator's and then let
// go anywhere again (no-ops where affinity is not Linux's).
struct Cores {
#if defined(__linux__)
  Cores() : known(sched_getaffinity(0, sizeof allowed, &allowed) == 0) {}
  cpu_set_t allowed;
  bool known;
  void move_off_this_core(std::thread& thread) const {
    const int here = sched_getcpu();
    if (!known || here < 0 || here >= CPU_SETSIZE || !CPU_ISSET(here, &allowed) || CPU_COUNT(&allowed) < 2) return;
    cpu_set_t elsewhere = allowed;
    CPU_CLR(here, &elsewhere);
    pthread_setaffinity_np(thread.native_handle(), sizeof elsewhere, &elsewhere);  // only advice if it fails
  }
  void let_this_thread_go_anywhere() const {
    if (known) pthread_setaffinity_np(pthread_self(), sizeof allowed, &allowed);
  }
#else
  void move_off_this_core(std::thread&) const {}
  void let_this_thread_go_anywhere() const {}
#endif
};

}  // namespace

ThreadBeside::ThreadBeside(std::function<void()> work) {
  auto done = std::make_shared<std::atomic<bool>>(false);
  auto placed = std::make_shared<std::atomic<bool>>(false);
  const Cores cores;
  thread_ = std::thread([work = std::move(work), done, placed, cores]() {
    // Once its creator has placed it (a wait of microseconds, off its creator's core: on it,
    // the wait gives the core back), it may go anywhere again.
    placed->wait(false, std::memory_order_acquire);
    cores.let_this_thread_go_anywhere();
    try {
      work();
    } catch (...) {  // a head start only (see the header)
    }
    done->store(true, std::memory_order_release);
  });
  done_ = std::move(done);
  cores.move_off_this_core(thread_);
  placed->store(true, std::memory_order_release);
  placed->notify_one();
}

ThreadBeside& ThreadBeside::operator=(ThreadBeside&& other) noexcept {
  if (this != &other) {
    join();
    thread_ = std::move(other.thread_);
    done_ = std::move(other.done_);
  }
  return *this;
}

void ThreadBeside::join() noexcept {
  if (thread_.joinable()) thread_.join();
}

}  // namespace stepscope
