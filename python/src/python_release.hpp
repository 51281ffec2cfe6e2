#pragma once
// Releases of imported Python producers, made safe for any thread that drops the last owner.
//
// The library may run an owner's deleter on any thread: the one that drops the last Tensor, or
// its release thread (a deferred release), possibly while a Python thread holds the GIL and waits
// for that very release (flush_deferred_releases), or from its C atexit drain after the
// interpreter is gone. A Python producer's deleter (NumPy's and CuPy's take the GIL) and our own
// Py_DECREF therefore never run there: the library calls our deleter, which only hands the real
// release to this queue. Queueing takes a mutex for a few instructions, allocates nothing and
// never waits for the GIL, so it cannot deadlock with a thread that holds the GIL.
#include <Python.h>

#include <cstddef>

namespace holoscan::python {

/** @brief One release that needs the interpreter: a producer's deleter and its references. */
struct PythonRelease {
  /**
   * @brief Runs the release and frees the node. `python_alive` false (after finalization) means
   *        the producer must be leaked: touch no Python object and call no producer deleter.
   */
  void (*run)(PythonRelease* self, bool python_alive) noexcept = nullptr;
  /** @brief Link of the queue (intrusive, so that queueing never allocates). */
  PythonRelease* next = nullptr;
};

/**
 * @brief Runs `node` now when this thread holds the GIL (the finalizing thread too); otherwise
 *        queues it for a Python thread (a pending call, and every entry into the module); once
 *        Python is exiting, leaks the producer when no GIL is held. Callable from any thread,
 * noexcept, never blocks on the GIL.
 */
void release_with_python(PythonRelease* node) noexcept;

/** @brief Runs every queued release; the caller holds the GIL. Whether it ran any. */
bool drain_python_releases() noexcept;

/** @brief Whether anything is queued (one relaxed atomic load, for the entry check). */
bool python_releases_queued() noexcept;

/** @brief Number of releases queued and not yet run (tests). */
std::size_t queued_python_releases() noexcept;

/**
 * @brief Called from Python's atexit, before finalization: drains the queue while the interpreter
 *        is whole and stops queueing; every later release leaks its Python producer.
 */
void stop_python_releases() noexcept;

/** @brief Drains pending releases on entry to each bound function (a nanobind call guard). */
struct ModuleEntry {
  ModuleEntry() noexcept {
    if (python_releases_queued()) {
      drain_python_releases();
    }
  }
};

}  // namespace holoscan::python
