#pragma once
// Runs a script of bytes against an importer connection's admission record
// (src/ipc/import/ipc_admissions.hpp) beside a model that remembers every id exactly, and checks
// after every step what the record promises: no export is ever admitted twice, a held export is
// held, id 0 is none; and, for as long as no more exports finished ahead of the channel than the
// record remembers one by one, every verdict is exactly the model's. Shared by the admissions
// fuzzer and a seeded test, so that CI runs it even where the fuzzers are not built.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <set>
#include <string>

#include "ipc/import/ipc_admissions.hpp"

namespace holoscan_test {

/** @brief Steps an importer connection takes on an export id, as the importer's core does. */
enum class AdmissionStep : std::uint8_t {
  kChannelImport,   ///< A Publish read off the channel: verdict, carried, hold if new.
  kAsideImport,     ///< import_tensor with a descriptor that came another way: verdict, hold.
  kGiveBack,        ///< A Release for the id (an import dropped, or a new id refused).
  kChannelRefusal,  ///< A Publish the channel refused unread: verdict, carried, finish if new.
};

/**
 * @brief Runs `size` bytes as steps (3 bytes each: step and id) and returns the first broken
 *        promise, or an empty string. Ids are drawn from a range that lets more exports finish
 *        ahead of the channel than the record remembers one by one, and some from the top of the
 *        64-bit range.
 */
inline std::string run_admissions_script(const std::uint8_t* bytes, std::size_t size) {
  using holoscan::ipc::detail::Admissions;
  using holoscan::ipc::detail::kRememberedAhead;
  using Verdict = Admissions::Verdict;
  Admissions record;
  std::set<std::uint64_t> held;
  std::set<std::uint64_t> ever;   // held at some time, or finished
  std::set<std::uint64_t> ahead;  // finished above what the channel carried
  std::uint64_t carried = 0;
  bool exact = true;  // no more finished ahead than remembered, so far

  for (std::size_t at = 0; at + 3 <= size; at += 3) {
    const auto step = static_cast<AdmissionStep>(bytes[at] & 3);
    const std::uint64_t low = (static_cast<std::uint64_t>(bytes[at + 1]) << 8) | bytes[at + 2];
    const std::uint64_t id = (bytes[at] & 0x80) != 0
                                 ? std::numeric_limits<std::uint64_t>::max() - (low & 3)
                                 : low % (3 * kRememberedAhead);
    const std::string where = "step " + std::to_string(at / 3) + " on id " + std::to_string(id);

    const Verdict verdict = record.verdict(id);
    if ((id == 0) != (verdict == Verdict::kNoExport)) {
      return where + ": id 0 and only it names no export";
    }
    if (held.count(id) != 0 ? verdict != Verdict::kHeld : verdict == Verdict::kHeld) {
      return where + ": held exactly when the model holds it";
    }
    if (verdict == Verdict::kNew && (ever.count(id) != 0 || id <= carried)) {
      return where + ": admitted again, or below the channel's order";
    }
    if (exact && id != 0 && held.count(id) == 0 &&
        (verdict == Verdict::kNew) != (ever.count(id) == 0 && id > carried)) {
      return where + ": new exactly when never seen and ahead of the channel";
    }
    if ((verdict == Verdict::kSeen) != (id != 0 && held.count(id) == 0 && id <= carried)) {
      return where + ": seen exactly when not held and at or below the channel's order";
    }
    if (verdict == Verdict::kFinishedAhead && (id <= carried || (exact && ever.count(id) == 0))) {
      return where + ": finished ahead only above the channel's order, and only once finished";
    }

    const bool channel =
        step == AdmissionStep::kChannelImport || step == AdmissionStep::kChannelRefusal;
    if (channel && id > carried) {
      record.carried(id);
      carried = id;
      for (auto it = ahead.begin(); it != ahead.end() && *it <= carried;) {
        it = ahead.erase(it);
      }
    }
    const bool finish = step == AdmissionStep::kGiveBack ||
                        (step == AdmissionStep::kChannelRefusal && verdict == Verdict::kNew);
    if (!finish && verdict == Verdict::kNew) {
      record.hold(id);
      held.insert(id);
      ever.insert(id);
    }
    if (finish && id != 0) {
      record.finish(id);
      held.erase(id);
      ever.insert(id);
      if (id > carried) {
        ahead.insert(id);
        exact = exact && ahead.size() <= kRememberedAhead;
      }
    }
    if (record.held() != held.size()) {
      return where + ": " + std::to_string(record.held()) + " held, the model holds " +
             std::to_string(held.size());
    }
  }
  return {};
}

}  // namespace holoscan_test
