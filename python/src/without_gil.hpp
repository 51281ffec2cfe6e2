#pragma once
// Work without the GIL that survives the interpreter's exit. CPython (before 3.14) ends a thread
// that takes the GIL back once finalization has begun with pthread_exit(); glibc unwinds its
// stack by force, and the unwinding through nanobind's frames (a noexcept destructor, a
// catch (...) that does not rethrow) aborts the process. A daemon thread that was inside a wait
// here when the interpreter exited parks for ever instead, as CPython 3.14 itself does.
#include <Python.h>

#include <utility>

namespace holoscan::python {

/** @brief Whether the interpreter is finalizing (Py_Finalize has begun). */
bool interpreter_finalizing() noexcept;

/**
 * @brief The GIL let go for the lifetime of the object. The destructor takes it back, or, when
 *        finalization began since (this thread would be ended), parks the thread for ever.
 */
class GilReleased {
 public:
  /** @brief Lets go of the GIL, which the caller holds. */
  GilReleased() noexcept;
  /** @brief Takes the GIL back, or parks the thread for ever once the interpreter is exiting. */
  ~GilReleased();
  GilReleased(const GilReleased&) = delete;
  GilReleased& operator=(const GilReleased&) = delete;

 private:
  // Read with the GIL held, so exact: only the thread that runs the finalization holds the GIL
  // once it has begun, and that thread may take it back.
  bool finalizing_before_;
  PyThreadState* state_;
};

/** @brief Parks the calling thread until the process ends (exit() ends it). */
[[noreturn]] void park_until_exit() noexcept;

/**
 * @brief `call()`'s result, where `call` runs Python code from the extension's C++ frames (a
 *        producer's `__dlpack__`). Python code may give the GIL away and take it back; a daemon
 *        thread that does so once finalization has begun is ended by CPython before 3.14 with
 *        pthread_exit(), whose forced unwinding would run the C++ frames' destructors (references
 *        dropped without the GIL) and reach noexcept ones (the process aborts). Such a thread
 *        parks here instead, as GilReleased parks one coming back from a wait. `call` must be
 *        C calls only (no C++ object with a destructor in its frame), so that nothing is
 *        unwound before the thread parks.
 */
template <typename Call>
auto running_python(Call&& call) {
  try {
    return std::forward<Call>(call)();
  } catch (...) {
    // Only CPython's forced unwinding gets here (`call` is C calls), as in ~GilReleased: the
    // catch block never ends, so the unwinding is never resumed.
    park_until_exit();
  }
}

/**
 * @brief `work()`'s result, called without the GIL (it must touch no Python object). Whatever
 *        `work` holds is let go when it returns or throws, before the GIL is taken back.
 */
template <typename Work>
auto without_gil(Work&& work) {
  const GilReleased released;
  return std::forward<Work>(work)();
}

}  // namespace holoscan::python
