// Covers a connection's release rings (src/ipc/import/ipc_release_stream.*) when the connection
// goes: its streams are destroyed at once (CUDA lets what is queued there finish), and its events
// go back to the interprocess pool only once its exporter's process has exited. Until then an
// exporter may still poll one, and a record of it on a stream that may never run again would hold
// that exporter's claim: only the next connection to the same exporter takes them over, once their
// last release has completed, so that reconnecting piles nothing up. A forked child's copy records
// nothing and calls no CUDA.
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <thread>

#include "holoscan/ipc/fd.hpp"
#include "ipc/cuda/ipc_event_pool.hpp"
#include "ipc/import/ipc_release_stream.hpp"
#include "stream/stream_point_list.hpp"
#include "support/fake_cuda_ipc.hpp"
#include "support/ipc_raw_socket.hpp"

namespace holoscan::detail {
namespace {

using test::CudaIpcEntry;

// A process standing for an exporter: it lives until end() and is watched through a pidfd.
class ExporterProcess {
 public:
  ExporterProcess() {
    int ends[2] = {-1, -1};
    if (::pipe(ends) != 0) {
      return;
    }
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(ends[1]);
      char byte = 0;
      // Until the parent closes its end; whatever read returns, the child goes.
      const ssize_t got = ::read(ends[0], &byte, 1);
      ::_exit(got < 0 ? 1 : 0);
    }
    ::close(ends[0]);
    hold_ = ipc::UniqueFd(ends[1]);
    pidfd_ = ipc::UniqueFd(static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0)));
  }
  ~ExporterProcess() { end(); }
  ExporterProcess(const ExporterProcess&) = delete;
  ExporterProcess& operator=(const ExporterProcess&) = delete;

  int pidfd() const { return pidfd_.get(); }
  void end() {
    hold_.reset();
    if (pid_ > 0 && !reaped_) {
      int status = 0;
      (void)::waitpid(pid_, &status, 0);
      reaped_ = true;
    }
  }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  ipc::UniqueFd hold_;
  ipc::UniqueFd pidfd_;
};

class IpcReleaseRings : public ::testing::Test {
 protected:
  void SetUp() override {
    if (exporter_.pidfd() < 0) {
      GTEST_SKIP() << "pidfd_open is not available (Linux 5.3+)";
    }
  }
  void TearDown() override {
    if (point_ != nullptr) {
      EXPECT_EQ(test::FakeCuda::table().event_destroy(point_), cudaSuccess);
    }
  }

  // A deallocation point of consumer_, after work that runs until complete_consumer().
  StreamPointList busy_point() {
    consumer_ = scope_.fake().create_stream(0);
    scope_.fake().launch(consumer_);
    const CudaApi& runtime = test::FakeCuda::table();
    EXPECT_EQ(runtime.event_create_with_flags(&point_, cudaEventDisableTiming), cudaSuccess);
    EXPECT_EQ(runtime.event_record(point_, consumer_), cudaSuccess);
    StreamPointList points;
    EXPECT_TRUE(points.push_back(StreamPoint{consumer_, point_, 0}));
    return points;
  }
  void complete_consumer() { scope_.fake().complete(consumer_); }
  // A connection to the exporter that made one release, completed at once, and went.
  void leave_a_completed_release() {
    std::optional<ReleaseRings> gone = to_exporter();
    ASSERT_TRUE(gone->record(0, StreamPointList()).has_value());
  }
  // Rings of a connection to the exporter process.
  std::optional<ReleaseRings> to_exporter() {
    return std::optional<ReleaseRings>{std::in_place, exporter_.pidfd()};
  }
  std::uint64_t events_created() const {
    return scope_.ipc().calls(CudaIpcEntry::kEventCreateWithFlags);
  }

  test::FakeCudaIpcScope scope_;
  ExporterProcess exporter_;
  cudaStream_t consumer_ = nullptr;
  cudaEvent_t point_ = nullptr;
};

TEST_F(IpcReleaseRings, AGoneConnectionsEventsWaitForItsExporterToExitNotJustForTheGpu) {
  StreamPointList points = busy_point();
  std::optional<ReleaseRings> rings = to_exporter();
  ASSERT_TRUE(rings->record(0, points).has_value());
  ASSERT_TRUE(rings->record(0, points).has_value());
  rings.reset();
  EXPECT_EQ(scope_.ipc().live_streams(), 0u) << "the stream outlived its connection";
  EXPECT_EQ(retire_release_rings(), 1u);
  EXPECT_EQ(destroy_free_ipc_events(), 2u) << "a gone connection's events went back to the pool";

  complete_consumer();
  EXPECT_EQ(retire_release_rings(), 1u)
      << "given back while the exporter may still poll them (its releases completed)";
  EXPECT_EQ(destroy_free_ipc_events(), 2u);

  exporter_.end();
  EXPECT_EQ(retire_release_rings(), 0u);
  EXPECT_EQ(destroy_free_ipc_events(), 0u) << "the events never came back after the exit";
}

TEST_F(IpcReleaseRings, AConnectionToAnotherExporterNeverTakesAGoneOnesEvents) {
  leave_a_completed_release();
  ExporterProcess another;
  ReleaseRings other(another.pidfd());
  ASSERT_TRUE(other.record(0, StreamPointList()).has_value());
  EXPECT_EQ(events_created(), 2u) << "a connection to another exporter took the gone one's event";
}

TEST_F(IpcReleaseRings, TheNextConnectionToTheSameExporterTakesOverOnlyCompletedEvents) {
  StreamPointList points = busy_point();
  std::optional<ReleaseRings> gone = to_exporter();
  ASSERT_TRUE(gone->record(0, points).has_value());
  gone.reset();
  std::optional<ReleaseRings> next = to_exporter();
  StreamPointList none;
  ASSERT_TRUE(next->record(0, none).has_value());
  EXPECT_EQ(events_created(), 2u) << "taken over while its release had not completed";
  next.reset();

  complete_consumer();
  std::optional<ReleaseRings> after = to_exporter();
  ASSERT_TRUE(after->record(0, none).has_value());
  ASSERT_TRUE(after->record(0, none).has_value());
  EXPECT_EQ(events_created(), 2u) << "the completed events of both gone rings were not taken over";
  EXPECT_EQ(retire_release_rings(), 0u);
}

TEST_F(IpcReleaseRings, AGoneRingIsJudgedByItsLastReleaseNotItsFirst) {
  std::optional<ReleaseRings> gone = to_exporter();
  StreamPointList none;
  StreamPointList points = busy_point();
  ASSERT_TRUE(gone->record(0, none).has_value());    // completes at once
  ASSERT_TRUE(gone->record(0, points).has_value());  // pending
  gone.reset();
  ReleaseRings next(exporter_.pidfd());
  ASSERT_TRUE(next.record(0, none).has_value());
  EXPECT_EQ(events_created(), 3u) << "taken over while its last release was pending";
}

// An exporter may not have polled a gone connection's event yet: a record of it here must complete
// at once, or the exporter's claim would wait on this stream's consumers (for ever, if one waited
// on a dead exporter).
TEST_F(IpcReleaseRings, ATakenOverEventIsRecordedOnlyWhereTheRecordCompletesAtOnce) {
  leave_a_completed_release();
  StreamPointList none;
  ReleaseRings next(exporter_.pidfd());
  StreamPointList points = busy_point();
  ASSERT_TRUE(next.record(0, points).has_value());
  EXPECT_EQ(events_created(), 2u) << "recorded behind points that had not passed";
  ASSERT_TRUE(next.record(0, none).has_value());
  EXPECT_EQ(events_created(), 3u) << "recorded behind an earlier release still pending";
  complete_consumer();
  ASSERT_TRUE(next.record(0, none).has_value());
  EXPECT_EQ(events_created(), 3u) << "not taken over once the stream was idle";
}

// A busy release may take a gone ring's event once that ring's completion is a second old: an
// exporter polling its claims has seen it by then (one that has not waits longer, never less).
TEST_F(IpcReleaseRings, ReconnectingWithBusyReleasesReusesEventsSettledASecondAgo) {
  StreamPointList points = busy_point();
  std::optional<ReleaseRings> gone = to_exporter();
  for (int release = 0; release < 3; ++release) {
    ASSERT_TRUE(gone->record(0, points).has_value());
  }
  complete_consumer();
  gone.reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  scope_.fake().launch(consumer_);
  ASSERT_EQ(test::FakeCuda::table().event_record(point_, consumer_), cudaSuccess);  // busy again
  ReleaseRings next(exporter_.pidfd());
  for (int release = 0; release < 3; ++release) {
    ASSERT_TRUE(next.record(0, points).has_value());
  }
  EXPECT_EQ(events_created(), 3u) << "busy releases piled up new events beside settled ones";
}

// A failed record leaves its waits on the stream with nothing after them: a taken-over event
// recorded next would wait on them too, so the stream is not idle until a record lies after them.
TEST_F(IpcReleaseRings, WaitsLeftByAFailedRecordKeepTheStreamBusy) {
  leave_a_completed_release();
  StreamPointList none;
  ReleaseRings next(exporter_.pidfd());
  StreamPointList points = busy_point();
  scope_.ipc().fail_next(test::CudaIpcEntry::kEventRecord, cudaErrorUnknown);
  EXPECT_FALSE(next.record(0, points).has_value());
  ASSERT_TRUE(next.record(0, none).has_value());
  EXPECT_EQ(events_created(), 3u) << "taken over behind a wait the failed release left";
}

TEST_F(IpcReleaseRings, ReconnectingToALiveExporterPilesUpNeitherEventsNorDescriptors) {
  StreamPointList none;
  const int fds_before = test::open_fd_count();
  for (int round = 0; round < 200; ++round) {
    std::optional<ReleaseRings> rings = to_exporter();
    for (int release = 0; release < 3; ++release) {
      ASSERT_TRUE(rings->record(0, none).has_value());
    }
  }
  EXPECT_EQ(events_created(), 3u);
  EXPECT_EQ(retire_release_rings(), 1u);
  EXPECT_LE(test::open_fd_count(), fds_before + 1) << "a pidfd copy per gone connection";
}

TEST_F(IpcReleaseRings, AnExporterThatExitedFirstHasItsEventsBackWithTheConnection) {
  std::optional<ReleaseRings> rings = to_exporter();
  StreamPointList none;
  ASSERT_TRUE(rings->record(0, none).has_value());
  exporter_.end();
  rings.reset();
  EXPECT_EQ(retire_release_rings(), 0u);
  EXPECT_EQ(destroy_free_ipc_events(), 0u);
}

TEST_F(IpcReleaseRings, WithoutTheExportersPidfdTheEventsNeverReachThePool) {
  std::optional<ReleaseRings> rings{std::in_place, -1};
  StreamPointList none;
  ASSERT_TRUE(rings->record(0, none).has_value());
  rings.reset();
  exporter_.end();
  EXPECT_EQ(retire_release_rings(), 1u);
  EXPECT_EQ(destroy_free_ipc_events(), 1u);
}

// A child forked without exec holds a copy of the connection and of its rings: CUDA cannot be used
// there, and the rings' lock may have been copied taken by another thread of the parent.
TEST_F(IpcReleaseRings, AForkedChildsCopyRecordsNothingAndCallsNoCuda) {
  std::optional<ReleaseRings> rings = to_exporter();
  StreamPointList none;
  ASSERT_TRUE(rings->record(0, none).has_value());
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const auto calls = [&] {
      std::uint64_t total = 0;
      for (int entry = 0; entry < static_cast<int>(CudaIpcEntry::kCount); ++entry) {
        total += scope_.ipc().calls(static_cast<CudaIpcEntry>(entry));
      }
      return total;
    };
    const std::uint64_t before = calls();
    auto recorded = rings->record(0, none);
    const bool refused = !recorded && recorded.error().code == ErrorCode::kFailure;
    rings.reset();
    ::_exit(refused && calls() == before ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the child recorded, or called CUDA through the parent's rings";
  rings.reset();
  EXPECT_EQ(scope_.ipc().live_streams(), 0u);
}

}  // namespace
}  // namespace holoscan::detail
