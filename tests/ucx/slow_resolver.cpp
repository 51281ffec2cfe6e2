#include "ucx/slow_resolver.hpp"
#include "support/next_definition.hpp"

#include <netdb.h>

#include <atomic>
#include <cstring>
#include <thread>

namespace {

std::atomic<long long> g_delay_ms{0};
std::atomic<int> g_resolving{0};

}  // namespace

extern "C" int getaddrinfo(const char* node, const char* service, const struct addrinfo* hints,
                           struct addrinfo** result) {
  using Resolve = int (*)(const char*, const char*, const struct addrinfo*, struct addrinfo**);
  static const auto real = holoscan::test::required_next_definition<Resolve>("getaddrinfo");
  if (node != nullptr && std::strcmp(node, holoscan::test::kSlowName) == 0) {
    g_resolving.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(g_delay_ms.load()));
    g_resolving.fetch_sub(1);
    return EAI_NONAME;
  }
  return real(node, service, hints, result);
}

namespace holoscan::test {

SlowResolver::SlowResolver(std::chrono::milliseconds delay) noexcept {
  g_delay_ms.store(delay.count());
}

SlowResolver::~SlowResolver() { g_delay_ms.store(0); }

int SlowResolver::resolving() const noexcept { return g_resolving.load(); }

}  // namespace holoscan::test
