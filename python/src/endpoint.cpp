#include "endpoint.hpp"

#include <Python.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>

#include <holoscan/errors.hpp>

#include "errors.hpp"
#include "imports.hpp"

namespace nb = nanobind;

namespace holoscan::python {
namespace {

// Long enough to cost nothing (a wait ends as soon as its socket is ready, whatever the slice),
// short enough that Ctrl-C or a close() from another thread is noticed at once.
constexpr long long kSliceMs = 100;

long long now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Tensor tensor_argument(nb::handle object, const std::optional<cudaStream_t>& stream) {
  if (nb::isinstance<Tensor>(object)) {
    return initialized_tensor(object);
  }
  nb::object protocol_stream = nb::none();
  if (stream) {
    protocol_stream =
        nb::int_(*stream == nullptr ? std::intptr_t{1} : reinterpret_cast<std::intptr_t>(*stream));
  }
  return nb::cast<Tensor&>(as_tensor(object, protocol_stream));
}

int hello_timeout(int timeout_ms, const char* who, const char* name) {
  if (timeout_ms < 0) {
    raise_invalid_argument(std::string(who) + ": " + name + " must be 0 or more, not " +
                           std::to_string(timeout_ms) +
                           " (the Hello is a wait that no signal interrupts)");
  }
  return timeout_ms;
}

void raise_closed(const char* who) {
  raise_error(Error{ErrorCode::kClosed, std::string(who) + ": closed", 0});
}

SlicedWait::SlicedWait(int timeout_ms) noexcept
    : unlimited_(timeout_ms < 0),
      end_ns_(now_ns() + static_cast<long long>(std::max(timeout_ms, 0)) * 1000000) {}

int SlicedWait::slice_ms() const noexcept {
  if (unlimited_) {
    return static_cast<int>(kSliceMs);
  }
  const long long left_ns = end_ns_ - now_ns();
  if (left_ns <= 0) {
    return 0;
  }
  // Rounded up, so that the last slice never ends just before the deadline.
  return static_cast<int>(std::min(kSliceMs, (left_ns + 999999) / 1000000));
}

bool SlicedWait::expired() const noexcept { return !unlimited_ && now_ns() >= end_ns_; }

void handle_signals() {
  if (PyErr_CheckSignals() != 0) {
    throw nb::python_error();
  }
}

}  // namespace holoscan::python
