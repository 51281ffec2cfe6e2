#pragma once
// What a test's interposer needs: a function defined in the test under a library's name, which
// the dynamic linker binds first, calls the definition it stands in front of through these.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

namespace holoscan::test {

/** @brief The definition of `name` that the caller's own hides (the next one in the lookup
 *         order) as a `Function`, or null when no library loaded defines it. */
template <typename Function>
Function next_definition(const char* name) noexcept {
  return reinterpret_cast<Function>(::dlsym(RTLD_NEXT, name));
}

/** @brief next_definition() of a function the interposer cannot work without: a missing one
 *         aborts the test naming it, instead of a call through null. */
template <typename Function>
Function required_next_definition(const char* name) noexcept {
  const auto function = next_definition<Function>(name);
  if (function == nullptr) {
    std::fprintf(stderr, "interposer: no definition of %s follows the test's own\n", name);
    std::abort();
  }
  return function;
}

}  // namespace holoscan::test
