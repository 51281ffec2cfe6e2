// The other process of the UCX GPU tests; it connects to the test's listener on 127.0.0.1.
//
//   holoscan_dlpack_ucx_gpu_peer send port=P count=N elements=E delay_us=D
//       sends N device tensors (gpu_series.hpp); exits 0 when all were delivered, 4 otherwise.
//   holoscan_dlpack_ucx_gpu_peer receive port=P count=N elements=E
//       receives N device tensors and checks them on the GPU; exits 0 when all were right.
//   holoscan_dlpack_ucx_gpu_peer drain port=P elements=E
//       receives device tensors and drops them until the connection ends (or it is killed).
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "ucx/gpu_series.hpp"

namespace {

std::uint64_t option(int argc, char** argv, const std::string& key) {
  for (int i = 2; i < argc; ++i) {
    const std::string word = argv[i];
    if (word.rfind(key + "=", 0) == 0) {
      return std::strtoull(word.c_str() + key.size() + 1, nullptr, 10);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  namespace test = holoscan::test;
  const std::string role = argc > 1 ? argv[1] : "";
  const auto count = option(argc, argv, "count");
  const auto elements = static_cast<std::int64_t>(option(argc, argv, "elements"));
  auto config = role == "receive" || role == "drain" ? test::device_receiving_config(elements)
                                  : holoscan::ucx::WorkerConfig{};
  auto worker = holoscan::ucx::Worker::create(config);
  auto peer = worker ? worker->connect("127.0.0.1",
                                       static_cast<std::uint16_t>(option(argc, argv, "port")))
                     : holoscan::expected<holoscan::ucx::PeerId>();
  if (!worker || !peer) {
    std::fprintf(stderr, "ucx gpu peer: no connection\n");
    return 2;
  }
  if (role == "drain") {
    for (;;) {
      auto received = worker->receive(-1);
      if (!received) {
        return received.error().code == holoscan::ErrorCode::kClosed ? 0 : 5;
      }
    }
  }
  if (role == "send") {
    const auto report =
        test::send_device_series(*worker, *peer, count, elements, option(argc, argv, "delay_us"));
    std::fprintf(stderr, "ucx gpu peer: %llu delivered, %llu failed %s\n",
                 static_cast<unsigned long long>(report.delivered),
                 static_cast<unsigned long long>(report.failed), report.error.c_str());
    return report.delivered == count ? 0 : 4;
  }
  const auto report = test::receive_device_series(*worker, count, elements);
  std::fprintf(stderr, "ucx gpu peer: %llu received, %llu mismatches, %llu wrong sums %s\n",
               static_cast<unsigned long long>(report.received),
               static_cast<unsigned long long>(report.mismatches),
               static_cast<unsigned long long>(report.wrong_sums), report.error.c_str());
  return report.received == count && report.mismatches == 0 && report.wrong_sums == 0 ? 0 : 5;
}
