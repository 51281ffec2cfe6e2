#include "stream/fork_gate.hpp"

#include <atomic>
#include <thread>

namespace holoscan::detail {
namespace {

// Sequentially consistent, as in Dekker's algorithm: a section announces itself and then looks
// for a fork; a fork announces itself and then looks for sections; one of the two sees the other.
std::atomic<int> sections_in_progress{0};
std::atomic<int> forks_closing{0};

// Gates this thread closed for the fork() it is making (one per object's prepare handler). A
// concurrent fork() of another thread is not this child's: the child keeps only its own count.
thread_local int closed_by_this_thread = 0;

}  // namespace

ForkGate::Section::Section() noexcept {
  if (closed_by_this_thread > 0) {
    // Set-up from a later prepare handler of this thread's own fork(): it ends before the copy.
    sections_in_progress.fetch_add(1);
    return;
  }
  while (true) {
    sections_in_progress.fetch_add(1);
    if (forks_closing.load() == 0) {
      return;
    }
    sections_in_progress.fetch_sub(1);
    while (forks_closing.load() != 0) {
      std::this_thread::yield();
    }
  }
}

ForkGate::Section::~Section() { sections_in_progress.fetch_sub(1); }

void ForkGate::close() noexcept {
  forks_closing.fetch_add(1);
  ++closed_by_this_thread;
  // A section is a few instructions and an allocation (malloc's own fork lock is taken only after
  // the prepare handlers), so this wait is short and cannot depend on the fork.
  while (sections_in_progress.load() != 0) {
    std::this_thread::yield();
  }
}

void ForkGate::open_in_parent() noexcept {
  --closed_by_this_thread;
  forks_closing.fetch_sub(1);
}

void ForkGate::open_in_child() noexcept {
  --closed_by_this_thread;
  sections_in_progress.store(0);  // a thread caught announcing itself does not exist here
  forks_closing.store(closed_by_this_thread);
}

}  // namespace holoscan::detail
