#pragma once
// The exception being raised, taken aside and raised again, or cleared when it is an ordinary
// failure: Python only, so that the test extension can build the code that uses it.
#include <Python.h>

#include "held_reference.hpp"

namespace holoscan::python {

/** @brief The exception being raised now, taken (the indicator is then clear) and normalized,
 *         its traceback attached; holds none when nothing is raised. */
HeldReference take_raised_exception() noexcept;

/** @brief Raises `exception` (one that take_raised_exception() took) again, as it was; none
 *         clears the indicator. */
void restore_raised_exception(HeldReference exception) noexcept;

/**
 * @brief Clears the error being raised and says true when it is an ordinary failure (an
 *        Exception other than MemoryError), which a lookup may treat as "none"; says false and
 *        leaves it raised otherwise (KeyboardInterrupt, SystemExit, MemoryError), so that an
 *        interruption is never lost. Needs the GIL and an error raised.
 */
bool clear_ordinary_error() noexcept;

}  // namespace holoscan::python
