#include "endpoint.hpp"

#include <Python.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>

#include <holoscan/errors.hpp>

#include "cast_arg.hpp"
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

int hello_timeout(nb::handle timeout_arg, const char* who, const char* name) {
  const int timeout_ms = named_integer<int>(timeout_arg, who, name, "0 to 2**31-1");
  if (timeout_ms < 0) {
    raise_invalid_argument(std::string(who) + ": " + name + " must be 0 or more, not " +
                           std::to_string(timeout_ms) +
                           " (the Hello is a wait that no signal interrupts)");
  }
  return timeout_ms;
}

std::optional<int> wait_timeout(nb::handle timeout_ms, const char* who) {
  if (timeout_ms.is_none()) {
    return std::nullopt;
  }
  return named_integer<int>(timeout_ms, who, "timeout_ms", "None or -2**31 to 2**31-1");
}

std::uint64_t peer_argument(nb::handle peer, const char* who) {
  return named_integer<std::uint64_t>(peer, who, "peer", "a peer id, 0 to 2**64-1");
}

std::optional<std::uint64_t> optional_peer_argument(nb::handle peer, const char* who) {
  if (peer.is_none()) {
    return std::nullopt;
  }
  return peer_argument(peer, who);
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
