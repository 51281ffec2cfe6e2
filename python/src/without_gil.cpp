#include "without_gil.hpp"

#include <unistd.h>

namespace holoscan::python {
namespace {

// The process is exiting: the thread waits for exit() to end it, holding nothing.
[[noreturn]] void park_for_ever() noexcept {
  for (;;) {
    pause();
  }
}

}  // namespace

void park_until_exit() noexcept { park_for_ever(); }

bool interpreter_finalizing() noexcept {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

GilReleased::GilReleased() noexcept
    : finalizing_before_(interpreter_finalizing()), state_(PyEval_SaveThread()) {}

GilReleased::~GilReleased() {
  // No thread takes the GIL once finalization has begun, except the one that runs it: a thread
  // that let go of the GIL before then is one that CPython would end.
  if (!finalizing_before_ && interpreter_finalizing()) {
    park_for_ever();
  }
  try {
    PyEval_RestoreThread(state_);
  } catch (...) {
    // Finalization began between the check and the wait for the GIL: CPython's pthread_exit()
    // unwinds from here by force. It never ends the catch block, so it is never resumed.
    park_for_ever();
  }
}

}  // namespace holoscan::python
