#pragma once
// GoogleTest printers, so that failed expectations show names instead of raw bytes.
#include <ostream>

#include "holoscan/expected.hpp"

namespace holoscan {

/** @brief Prints an ErrorCode by its name (found by GoogleTest through ADL). */
inline void PrintTo(ErrorCode code, std::ostream* os) { *os << error_code_name(code); }

}  // namespace holoscan
