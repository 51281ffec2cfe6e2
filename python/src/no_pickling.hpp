#pragma once
// Pickling refused for a class made through a factory (nb::new_): protocols 0 and 1 rebuild an
// instance with object.__new__, which nanobind lets through for such a class, and the instance,
// whose C++ object never existed, aborted the process when it was freed.
#include <nanobind/nanobind.h>

#include <string>

namespace holoscan::python {

/** @brief Gives `type` a __reduce_ex__ that raises TypeError ("cannot pickle 'Name' object"). */
template <class T>
void refuse_pickling(nanobind::class_<T>& type, const char* name) {
  const std::string message = std::string("cannot pickle '") + name + "' object";
  type.def(
      "__reduce_ex__",
      [message](T&, nanobind::handle) -> nanobind::object {
        throw nanobind::type_error(message.c_str());
      },
      nanobind::arg("protocol"), "Refuses pickling: the object holds a process's resources.");
}

}  // namespace holoscan::python
