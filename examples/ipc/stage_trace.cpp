#include "ipc/stage_trace.hpp"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <utility>

namespace ipc_demo {

StageTrace::StageTrace(std::string path, long count) : path_(std::move(path)) {
  if (!path_.empty() && count > 0) {
    stamps_.assign(static_cast<std::size_t>(count), {});
  }
}

void StageTrace::mark(long tensor, std::size_t stage) {
  if (tensor < 0 || static_cast<std::size_t>(tensor) >= stamps_.size() || stage >= kStages) {
    return;
  }
  stamps_[static_cast<std::size_t>(tensor)][stage] =
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::steady_clock::now().time_since_epoch())
          .count();
}

bool StageTrace::write() const {
  if (path_.empty()) {
    return true;
  }
  std::ofstream file(path_);
  for (std::size_t i = 0; i < stamps_.size(); ++i) {
    file << i;
    for (std::int64_t stamp : stamps_[i]) {
      file << ' ' << stamp;
    }
    file << '\n';
  }
  return static_cast<bool>(file);
}

std::vector<std::array<std::int64_t, StageTrace::kStages>> StageTrace::read(
    const std::string& path) {
  std::vector<std::array<std::int64_t, kStages>> stamps;
  std::ifstream file(path);
  std::string line;
  while (std::getline(file, line)) {
    std::istringstream words(line);
    long tensor = 0;
    std::array<std::int64_t, kStages> row{};
    words >> tensor;
    for (std::int64_t& stamp : row) {
      words >> stamp;
    }
    stamps.push_back(row);
  }
  return stamps;
}

namespace {

using Stamps = std::vector<std::array<std::int64_t, StageTrace::kStages>>;

// One segment: from stage `from` of one side's stamps to stage `to` of the other's (or its own).
struct Segment {
  const char* name;
  const Stamps* start;
  std::size_t from;
  const Stamps* end;
  std::size_t to;
};

void print_segment(std::FILE* out, const Segment& segment, long first) {
  std::vector<double> us;
  const std::size_t count = std::min(segment.start->size(), segment.end->size());
  for (std::size_t i = static_cast<std::size_t>(first); i < count; ++i) {
    const std::int64_t begin = (*segment.start)[i][segment.from];
    const std::int64_t end = (*segment.end)[i][segment.to];
    if (begin != 0 && end != 0) {
      us.push_back(static_cast<double>(end - begin) / 1000.0);
    }
  }
  if (us.empty()) {
    std::fprintf(out, "TRACE %-44s no stamps\n", segment.name);
    return;
  }
  std::sort(us.begin(), us.end());
  std::fprintf(out, "TRACE %-44s median_us=%9.2f p90_us=%9.2f\n", segment.name, us[us.size() / 2],
               us[us.size() * 9 / 10]);
}

}  // namespace

void print_round_trip_stages(std::FILE* out, const std::string& prefix, long first) {
  const Stamps producer = StageTrace::read(prefix + ".producer");
  const Stamps consumer = StageTrace::read(prefix + ".consumer");
  const Segment segments[] = {
      {"producer: allocate (polls the exporter)", &producer, 0, &producer, 1},
      {"producer: fill kernel, set_readiness_stream", &producer, 1, &producer, 2},
      {"producer: publish (export, send)", &producer, 2, &producer, 3},
      {"-> consumer: receive returns the import", &producer, 3, &consumer, 0},
      {"consumer: wait, check kernel, deallocation", &consumer, 0, &consumer, 1},
      {"consumer: drop (release recorded and sent)", &consumer, 1, &consumer, 2},
      {"-> producer: its poll sees the Release", &consumer, 2, &producer, 4},
      {"round trip", &producer, 0, &producer, 4},
  };
  for (const Segment& segment : segments) {
    print_segment(out, segment, first);
  }
}

void print_pipeline_stages(std::FILE* out, const std::string& prefix, long first) {
  const Stamps producer = StageTrace::read(prefix + ".producer");
  const Stamps relay = StageTrace::read(prefix + ".relay");
  const Stamps sink = StageTrace::read(prefix + ".consumer");
  const Segment segments[] = {
      {"producer: allocate (polls the exporter)", &producer, 0, &producer, 1},
      {"producer: fill kernel, set_readiness_stream", &producer, 1, &producer, 2},
      {"producer: publish (export, send)", &producer, 2, &producer, 3},
      {"-> relay: receive returns the import", &producer, 3, &relay, 1},
      {"relay: receive (waiting included)", &relay, 0, &relay, 1},
      {"relay: allocate (polls the exporter)", &relay, 1, &relay, 2},
      {"relay: wait, add-one kernel, both points", &relay, 2, &relay, 3},
      {"relay: publish (export, send)", &relay, 3, &relay, 4},
      {"relay: drop both (Release sent)", &relay, 4, &relay, 5},
      {"-> sink: receive returns the import", &relay, 4, &sink, 0},
      {"sink: wait, check kernel, deallocation", &sink, 0, &sink, 1},
      {"sink: drop (release recorded and sent)", &sink, 1, &sink, 2},
      {"relay: one tensor, end to end", &relay, 0, &relay, 5},
  };
  for (const Segment& segment : segments) {
    print_segment(out, segment, first);
  }
}

}  // namespace ipc_demo
