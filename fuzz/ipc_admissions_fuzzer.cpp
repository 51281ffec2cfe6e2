// libFuzzer target for an importer connection's admission record: any order of channel imports,
// imports aside, give-backs and refused Publishes must never admit an export twice, and must agree
// exactly with a model that remembers every id while no more finished ahead of the channel than
// the record keeps one by one (tests/support/admissions_script.hpp says what is checked).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "admissions_script.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (const std::string broken = holoscan_test::run_admissions_script(data, size);
      !broken.empty()) {
    std::fprintf(stderr, "ipc admissions: %s\n", broken.c_str());
    __builtin_trap();
  }
  return 0;
}
