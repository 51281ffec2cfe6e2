// The release thread from Python: flush and count deferred releases, its options (the C++
// ReleaseThreadOptions, durations as datetime.timedelta) and the producer deleters that threw.
#include <nanobind/nanobind.h>
#include <nanobind/stl/chrono.h>
#include <nanobind/stl/string.h>

#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <new>
#include <string>

#include <holoscan/deferred_release.hpp>

#include "bindings.hpp"
#include "errors.hpp"
#include "held_reference.hpp"
#include "stream/application_exit_wait.hpp"
#include "text_arg.hpp"
#include "without_gil.hpp"

namespace nb = nanobind;

namespace holoscan::python {
namespace {

// The end of int64's range on `seconds`' side: where a value past any duration is kept.
template <class Unit>
Unit saturated(nb::handle seconds) {
  const int negative = PyObject_RichCompareBool(seconds.ptr(), nb::int_(0).ptr(), Py_LT);
  if (negative < 0) {
    throw nb::python_error();
  }
  return Unit(negative != 0 ? std::numeric_limits<std::int64_t>::min()
                            : std::numeric_limits<std::int64_t>::max());
}

// A timedelta (or a number of seconds) in whole `Unit`s, rounded down and saturated to int64:
// a value past the range stays past it, for set_release_thread_options to refuse by name.
template <class Unit>
Unit whole_units(nb::handle value, const char* field) {
  nb::module_ datetime = nb::module_::import_("datetime");
  nb::object timedelta = datetime.attr("timedelta");
  nb::object duration = nb::borrow(value);
  if (PyBool_Check(value.ptr())) {  // a flag, not one second
    throw nb::type_error(
        (std::string(field) + " must be a datetime.timedelta or seconds, not a bool").c_str());
  }
  if (PyFloat_Check(value.ptr()) && std::isnan(PyFloat_AsDouble(value.ptr()))) {
    raise_invalid_argument(std::string(field) + " must be a number of seconds, not nan");
  }
  if (PyLong_Check(value.ptr()) || PyFloat_Check(value.ptr())) {
    try {
      duration = timedelta(nb::arg("seconds") = value);
    } catch (nb::python_error& error) {
      if (!error.matches(PyExc_OverflowError)) {
        throw;
      }
      return saturated<Unit>(value);  // past timedelta's range (infinity too): past ours
    }
  } else if (!nb::isinstance(value, timedelta)) {
    throw nb::type_error((std::string(field) + " must be a datetime.timedelta or seconds").c_str());
  }
  const auto unit_us = std::chrono::duration_cast<std::chrono::microseconds>(Unit(1)).count();
  const nb::object unit = timedelta(nb::arg("microseconds") = unit_us);
  // A subclass's __floordiv__ is Python code, and what it returns may have a finalizer: both run
  // as running_python and held_reference.hpp say.
  const HeldReference count(
      running_python([&] { return PyNumber_FloorDivide(duration.ptr(), unit.ptr()); }));
  if (!count.is_valid() && PyErr_ExceptionMatches(PyExc_TypeError) == 0) {
    throw nb::python_error();
  }
  // Only an int is a count (reading anything else through its __index__ would run Python code
  // outside running_python).
  int overflow = 0;
  const long long units = count.is_valid() && PyLong_Check(count.get()) != 0
                              ? PyLong_AsLongLongAndOverflow(count.get(), &overflow)
                              : -1;
  if (units == -1 &&
      (PyErr_Occurred() != nullptr || !count.is_valid() || PyLong_Check(count.get()) == 0)) {
    // A timedelta subclass whose floor division gives no integer: the argument is no duration
    // (the error must not stay set behind a result, which Python reports as a SystemError).
    PyErr_Clear();
    throw nb::type_error((std::string(field) + " must be a datetime.timedelta or seconds").c_str());
  }
  if (overflow != 0) {
    return Unit(overflow > 0 ? std::numeric_limits<std::int64_t>::max()
                             : std::numeric_limits<std::int64_t>::min());
  }
  return Unit(units);
}

// A count of releases: an int (not a bool), never negative; a count past size_t is kept at its
// largest, for set_release_thread_options to refuse by name.
std::size_t release_count(nb::handle value, const char* field) {
  if (PyBool_Check(value.ptr()) || !PyLong_Check(value.ptr())) {
    throw nb::type_error((std::string(field) + " must be an int (releases)").c_str());
  }
  int overflow = 0;
  const long long count = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
  if (overflow < 0 || (overflow == 0 && count < 0)) {
    raise_invalid_argument("ReleaseThreadOptions::" + std::string(field) +
                           " must be 0 to 100000, not " + display_text(value));
  }
  if (overflow > 0 || static_cast<unsigned long long>(count) > SIZE_MAX) {
    return SIZE_MAX;
  }
  return static_cast<std::size_t>(count);
}

ReleaseThreadOptions make_options(nb::handle poll_interval, nb::handle exit_drain,
                                  nb::handle backlog_limit) {
  ReleaseThreadOptions options;
  if (!poll_interval.is_none()) {
    options.poll_interval = whole_units<std::chrono::microseconds>(poll_interval, "poll_interval");
  }
  if (!exit_drain.is_none()) {
    options.exit_drain = whole_units<std::chrono::milliseconds>(exit_drain, "exit_drain");
  }
  if (!backlog_limit.is_none()) {
    options.backlog_limit = release_count(backlog_limit, "backlog_limit");
  }
  return options;
}

std::string repr(const ReleaseThreadOptions& options) {
  return "ReleaseThreadOptions(poll_interval=" + std::to_string(options.poll_interval.count()) +
         " us, exit_drain=" + std::to_string(options.exit_drain.count()) +
         " ms, backlog_limit=" + std::to_string(options.backlog_limit) + ")";
}

// A duration field: read as a timedelta, written from a timedelta or seconds.
template <class Unit>
void def_duration(nb::class_<ReleaseThreadOptions>& type, const char* name,
                  Unit ReleaseThreadOptions::*field, nb::sig setter_signature, const char* doc) {
  type.def_prop_rw(
      name, [field](const ReleaseThreadOptions& o) { return o.*field; },
      [field, name](ReleaseThreadOptions& o, nb::handle value) {
        o.*field = whole_units<Unit>(value, name);
      },
      nb::for_setter(setter_signature), doc);
}

void bind_options(nb::module_& module) {
  nb::class_<ReleaseThreadOptions> type(
      module, "ReleaseThreadOptions",
      "How the release thread polls the GPU, how long the exit drain may wait for it, and how far "
      "it may fall behind before a drop waits for it (the C++ holoscan::ReleaseThreadOptions). "
      "The environment variables HOLOSCAN_DLPACK_RELEASE_POLL_US, HOLOSCAN_DLPACK_EXIT_DRAIN_MS "
      "and HOLOSCAN_DLPACK_RELEASE_BACKLOG win over what code sets.");
  type.def(
          "__init__",
          [](ReleaseThreadOptions* self, nb::handle poll_interval, nb::handle exit_drain,
             nb::handle backlog_limit) {
            new (self) ReleaseThreadOptions(make_options(poll_interval, exit_drain, backlog_limit));
          },
          nb::kw_only(), nb::arg("poll_interval") = nb::none(), nb::arg("exit_drain") = nb::none(),
          nb::arg("backlog_limit") = nb::none(), Entry(),
          nb::sig("def __init__(self, *, poll_interval: datetime.timedelta | float | None = None, "
                  "exit_drain: datetime.timedelta | float | None = None, "
                  "backlog_limit: int | None = None) -> None"),
          "Options with the defaults (50 us, 5 s, 4096 releases) where None; a number of "
          "seconds for a duration.")
      .def(
          "__eq__",
          [](const ReleaseThreadOptions& a, const ReleaseThreadOptions& b) {
            return a.poll_interval == b.poll_interval && a.exit_drain == b.exit_drain &&
                   a.backlog_limit == b.backlog_limit;
          },
          nb::is_operator(), Entry())
      .def("__repr__", &repr, Entry());
  def_duration(type, "poll_interval", &ReleaseThreadOptions::poll_interval,
               nb::sig("def poll_interval(self, value: datetime.timedelta | float, /) -> None"),
               "The shortest rest between two polling rounds while releases are pending (1 us "
               "to 1 s, whole microseconds).");
  def_duration(type, "exit_drain", &ReleaseThreadOptions::exit_drain,
               nb::sig("def exit_drain(self, value: datetime.timedelta | float, /) -> None"),
               "The longest the exit drain waits for pending releases (0 to 24 h, whole "
               "milliseconds).");
  type.def_prop_rw(
      "backlog_limit", [](const ReleaseThreadOptions& o) { return o.backlog_limit; },
      [](ReleaseThreadOptions& o, nb::handle value) {
        o.backlog_limit = release_count(value, "backlog_limit");
      },
      nb::for_setter(nb::sig("def backlog_limit(self, value: int, /) -> None")),
      "How far the release thread may fall behind (0 to 100000 releases; 0: no limit): past it, "
      "a thread that drops a tensor waits for the release thread, at most 1 ms a drop.");
}

}  // namespace

void bind_release_controls(nb::module_& module) {
  bind_options(module);
  module.def(
      "set_release_thread_options",
      [](const ReleaseThreadOptions& options) {
        if (auto set = set_release_thread_options(options); !set) {
          raise_error(set.error());
        }
      },
      nb::arg("options"), Entry(),
      "Sets the release thread's options from code (environment variables still win). "
      "InvalidArgumentError naming the field, with nothing changed, when a value is out of its "
      "range.");
  module.def("release_thread_options", &release_thread_options, Entry(),
             "The options in effect: the environment's, else those set from code, else the "
             "defaults.");
  module.def("failed_releases", &failed_releases, Entry(),
             "DLPack producer deleters that threw (contained: counted, the first 16 reported on "
             "stderr; what they did not free leaks).");
  module.def(
      "flush_deferred_releases",
      [] {
        // The releases waited for may need this thread's GIL (they queue for it): let go. A
        // Python producer's deleter, run by the drain, may drop owners whose releases are
        // deferred in turn: flushed again until a drain leaves nothing of the kind.
        do {
          without_gil([] { flush_deferred_releases(); });
        } while (drain_python_releases() && pending_deferred_releases() != 0);
      },
      Entry(),
      "Blocks until every release deferred before the call has run (and those their "
      "deleters deferred in turn), Python ones too.");
  module.def(
      "pending_deferred_releases", [] { return pending_deferred_releases(); }, Entry(),
      "Releases the library has queued and not yet run.");

  // Before finalization begins, and while every module is whole: wait (without the GIL, for at
  // most the exit drain's limit) for the releases still behind the GPU, whose producers are
  // Python's and would otherwise be left to the C exit drain, after finalization, which can only
  // leak them; then run what is queued, and stop queueing, since no Python thread will drain
  // again and Py_AddPendingCall is unsafe later on.
  nb::module_::import_("atexit").attr("register")(nb::cpp_function([] {
    // Read with the GIL: the environment may be changing under os.environ on another thread.
    const std::chrono::milliseconds limit = release_thread_options().exit_drain;
    // Timed without the GIL: taking it back (a daemon thread may hold it) waits for no release.
    std::chrono::steady_clock::duration waited{};
    without_gil([limit, &waited] {
      const auto began = std::chrono::steady_clock::now();
      (void)flush_deferred_releases_for(limit);
      waited = std::chrono::steady_clock::now() - began;
    });
    // The library's own exit drain, later, waits only for what is left of the same limit.
    detail::application_exit_wait(waited);
    stop_python_releases();
  }));
}

}  // namespace holoscan::python
