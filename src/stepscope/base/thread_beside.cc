#include "stepscope/base/thread_beside.h"

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace stepscope {
namespace {

// The cores the process may use, for a thread to be placed off its waker's core and then let go
// anywhere again (no-ops where affinity is not Linux's).
struct Cores {
#if defined(__linux__)
  Cores() : known(sched_getaffinity(0, sizeof allowed, &allowed) == 0) {}
  cpu_set_t allowed;
  bool known;
  void move_off_this_core(pthread_t thread) const {
    const int here = sched_getcpu();
    if (!known || here < 0 || here >= CPU_SETSIZE || !CPU_ISSET(here, &allowed) || CPU_COUNT(&allowed) < 2) return;
    cpu_set_t elsewhere = allowed;
    CPU_CLR(here, &elsewhere);
    pthread_setaffinity_np(thread, sizeof elsewhere, &elsewhere);  // only advice if it fails
  }
  void let_this_thread_go_anywhere() const {
    if (known) pthread_setaffinity_np(pthread_self(), sizeof allowed, &allowed);
  }
#else
  void move_off_this_core(std::thread::native_handle_type) const {}
  void let_this_thread_go_anywhere() const {}
#endif
};

// One kept thread. Its waker gives it work under `mutex`, after placing it.
struct Helper {
  std::thread::native_handle_type handle{};
  std::mutex mutex;
  std::condition_variable wake;
  std::function<void()> work;
  std::shared_ptr<std::atomic<bool>> done;
  Cores cores;  // its waker's: where it may go once it runs
};

// More parked threads than this exit instead: a burst of ThreadBesides is not kept for good.
constexpr size_t kMostParked = 8;

// Never destroyed: parked threads wait on it until the process ends.
struct Parked {
  std::mutex mutex;
  std::vector<Helper*> helpers;
  int made = 0;  // threads made in this process (for make_ahead)
};
Parked* the_parked = nullptr;  // set once, before anything uses it (parked_helpers)

#if defined(__linux__)
// A forked child has none of its parent's threads: it must not hand work to their Helpers (and
// wait for it forever, as a death test's child would). Held across the fork, the list is whole
// in the child, which forgets it.
void lock_parked() { the_parked->mutex.lock(); }
void unlock_parked() { the_parked->mutex.unlock(); }
void forget_parked() {
  the_parked->helpers.clear();  // their memory is left: their threads are not here to free it
  the_parked->made = 0;
  the_parked->mutex.unlock();
}
#endif

Parked& parked_helpers() {
  static Parked* parked = [] {
    the_parked = new Parked;
#if defined(__linux__)
    pthread_atfork(lock_parked, unlock_parked, forget_parked);
#endif
    return the_parked;
  }();
  return *parked;
}

void serve(Helper* helper) {
  Parked& parked = parked_helpers();
  for (;;) {
    std::function<void()> work;
    std::shared_ptr<std::atomic<bool>> done;
    {
      std::unique_lock<std::mutex> lock(helper->mutex);
      helper->wake.wait(lock, [&] { return helper->work != nullptr; });
      work = std::move(helper->work);
      helper->work = nullptr;
      done = std::move(helper->done);
      // Placed off its waker's core before the work was given (under this mutex): from here on
      // it may go anywhere.
      helper->cores.let_this_thread_go_anywhere();
    }
    try {
      work();
    } catch (...) {  // a head start only (see the header)
    }
    work = nullptr;  // what it holds goes before its owner hears that the work is done
    bool keep;
    {
      // Parked before the owner hears: an owner that starts the next ThreadBeside right away
      // finds this thread, not a new one.
      std::lock_guard<std::mutex> lock(parked.mutex);
      keep = parked.helpers.size() < kMostParked;
      if (keep) parked.helpers.push_back(helper);
    }
    done->store(true, std::memory_order_release);
    done->notify_all();
    if (!keep) {
      delete helper;
      return;
    }
  }
}

// A new helper (detached: it serves until the process ends, or exits itself).
Helper* new_helper() {
  auto helper = std::make_unique<Helper>();
  std::thread thread(serve, helper.get());  // waits for work: nothing reaches it before it is placed
  helper->handle = thread.native_handle();
  thread.detach();
  return helper.release();
}

// A parked helper, or a new one.
Helper* take_helper() {
  Parked& parked = parked_helpers();
  {
    std::lock_guard<std::mutex> lock(parked.mutex);
    if (!parked.helpers.empty()) {
      Helper* helper = parked.helpers.back();
      parked.helpers.pop_back();
      return helper;
    }
    ++parked.made;
  }
  return new_helper();
}

}  // namespace

ThreadBeside::ThreadBeside(std::function<void()> work) {
  auto done = std::make_shared<std::atomic<bool>>(false);
  Helper* helper = take_helper();  // nothing throws once it is taken
  {
    std::lock_guard<std::mutex> lock(helper->mutex);
    helper->cores = Cores();
    helper->cores.move_off_this_core(helper->handle);
    helper->work = std::move(work);
    helper->done = done;
  }
  helper->wake.notify_one();
  done_ = std::move(done);
}

ThreadBeside& ThreadBeside::operator=(ThreadBeside&& other) noexcept {
  if (this != &other) {
    join();
    done_ = std::move(other.done_);
  }
  return *this;
}

void ThreadBeside::join() noexcept {
  if (!done_) return;
  done_->wait(false, std::memory_order_acquire);
  done_.reset();
}

void ThreadBeside::make_ahead() noexcept {
  Parked& parked = parked_helpers();
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(parked.mutex);
      if (parked.made >= kMadeAhead) return;
      ++parked.made;
    }
    try {
      Helper* helper = new_helper();
      std::lock_guard<std::mutex> lock(parked.mutex);
      parked.helpers.push_back(helper);
    } catch (const std::exception&) {  // only a head start: a ThreadBeside makes its own
      return;
    }
  }
}

int ThreadBeside::parked() {
  Parked& parked = parked_helpers();
  std::lock_guard<std::mutex> lock(parked.mutex);
  return static_cast<int>(parked.helpers.size());
}

}  // namespace stepscope

namespace stepscope {

unsigned hardware_cores() {
  static const unsigned cores = std::thread::hardware_concurrency();
  return cores;
}

}  // namespace stepscope
