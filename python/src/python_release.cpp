#include "python_release.hpp"

#include <pthread.h>

#include <atomic>
#include <mutex>
#include <new>

#include "without_gil.hpp"

namespace holoscan::python {
namespace {

// FIFO of releases waiting for a thread that holds the GIL. The mutex is held only to link or
// unlink nodes and to register the pending call: never while waiting for the GIL or running a
// release, so a GIL holder that takes it cannot wait on a thread that waits for the GIL.
struct Queue {
  std::mutex mutex;
  PythonRelease* head = nullptr;
  PythonRelease* tail = nullptr;
  std::size_t length = 0;
  bool scheduled = false;  // a pending call is registered and has not started yet
  std::atomic<bool> queued{false};
  // Cleared by the atexit hook under the mutex, so that no thread registers a pending call or
  // queues a node once finalization may begin (Py_AddPendingCall is unsafe after it).
  std::atomic<bool> alive{true};
};

// Never destroyed: the library's release thread may call in after static destructors ran. Made
// at load time (constant-initialized), not on the heap at first use: its users are noexcept
// paths, where a refused allocation would end the process.
union LeakedQueue {
  Queue queue;
  constexpr LeakedQueue() : queue() {}
  ~LeakedQueue() {}  // the Queue's own destructor never runs
};
LeakedQueue leaked_queue;

Queue& queue() noexcept { return leaked_queue.queue; }

// A fork() while a thread of the parent (the library's release thread, queueing) held the mutex
// would copy it taken into the child, whose next entry into the module would wait for it for
// ever. The child forgets what the parent queued (those releases are the parent's: its threads,
// its pending call) and starts with a fresh mutex; no lock is taken across fork() (see
// stream/fork_locked.hpp for why).
void forget_in_child() noexcept {
  Queue& q = queue();
  new (&q.mutex) std::mutex();  // the inherited one may be taken by a thread the child lacks
  q.head = q.tail = nullptr;
  q.length = 0;
  q.scheduled = false;
  q.queued.store(false, std::memory_order_relaxed);
}

// Registered when the module is loaded, before any of its threads exists.
[[maybe_unused]] const bool fork_handler_registered =
    pthread_atfork(nullptr, nullptr, &forget_in_child) == 0;

// PyGILState_Check() answers 1 on any thread once subinterpreters exist or after finalization,
// so the thread's own state is compared with the one that holds the GIL. A thread that never ran
// Python (the library's release thread) has no state of its own and never matches.
bool this_thread_holds_gil() noexcept {
  PyThreadState* mine = PyGILState_GetThisThreadState();
  if (mine == nullptr) {
    return false;
  }
#if PY_VERSION_HEX >= 0x030D0000
  return PyThreadState_GetUnchecked() == mine;
#else
  return _PyThreadState_UncheckedGet() == mine;
#endif
}

PythonRelease* take_all(Queue& q) noexcept {
  std::lock_guard<std::mutex> lock(q.mutex);
  PythonRelease* list = q.head;
  q.head = q.tail = nullptr;
  q.length = 0;
  q.queued.store(false, std::memory_order_relaxed);
  return list;
}

void run_all(PythonRelease* list, bool python_alive) noexcept {
  while (list != nullptr) {
    PythonRelease* next = list->next;
    list->run(list, python_alive);
    list = next;
  }
}

// Runs on the main thread with the GIL, from the interpreter's eval loop. Only the pending call
// itself lets the next release register another: a drain by an entry into the module leaves this
// one registered, and registering one per drain while the main thread waits in C would fill the
// interpreter's table (32 calls, shared by every extension).
int drain_from_pending_call(void*) noexcept {
  {
    Queue& q = queue();
    std::lock_guard<std::mutex> lock(q.mutex);
    q.scheduled = false;
  }
  drain_python_releases();
  return 0;
}

}  // namespace

void release_with_python(PythonRelease* node) noexcept {
  Queue& q = queue();
  if (this_thread_holds_gil()) {
    // The common case (the last Tensor dropped by Python code): the producer goes right now, so
    // that it lives exactly as long as its last owner. Also while the interpreter finalizes: the
    // thread that finalizes holds the GIL as it clears the modules' globals and drops every other
    // object then (leaking here kept a producer, its class, the module's globals and the Tensors
    // in them). Once Py_Finalize is over no thread holds it (this_thread_holds_gil reads only
    // the runtime's thread-state bookkeeping, which says so).
    node->run(node, true);
    return;
  }
  // Nothing is queued after the atexit hook or Py_Finalize: no pending call may be added then.
  if (!q.alive.load(std::memory_order_acquire) || Py_IsInitialized() == 0) {
    node->run(node, false);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(q.mutex);
    if (q.alive.load(std::memory_order_relaxed)) {
      node->next = nullptr;
      (q.tail != nullptr ? q.tail->next : q.head) = node;
      q.tail = node;
      ++q.length;
      q.queued.store(true, std::memory_order_release);
      // One pending call per batch: the interpreter's table of pending calls is small. If it is
      // full, the next release tries again and every entry into the module drains anyway.
      if (!q.scheduled) {
        q.scheduled = Py_AddPendingCall(&drain_from_pending_call, nullptr) == 0;
      }
      return;
    }
  }
  node->run(node, false);
}

bool drain_python_releases() noexcept {
  Queue& q = queue();
  bool ran = false;
  // A release may drop other owners (a producer holding our Tensors) and queue more: loop.
  while (PythonRelease* list = take_all(q)) {
    run_all(list, q.alive.load(std::memory_order_acquire) && !interpreter_finalizing());
    ran = true;
  }
  return ran;
}

bool python_releases_queued() noexcept { return queue().queued.load(std::memory_order_acquire); }

std::size_t queued_python_releases() noexcept {
  Queue& q = queue();
  std::lock_guard<std::mutex> lock(q.mutex);
  return q.length;
}

void stop_python_releases() noexcept {
  Queue& q = queue();
  drain_python_releases();
  PythonRelease* late = nullptr;
  {
    std::lock_guard<std::mutex> lock(q.mutex);
    q.alive.store(false, std::memory_order_release);
    late = q.head;
    q.head = q.tail = nullptr;
    q.length = 0;
    q.queued.store(false, std::memory_order_relaxed);
  }
  // Queued between the drain and the flag: the interpreter is still whole (atexit runs before
  // finalization), so these still run for real.
  run_all(late, true);
}

}  // namespace holoscan::python
