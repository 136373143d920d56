#include "test_util.h"

#include "vlrnn/measure/cpu_memory_tracker.h"
#include "vlrnn/measure/out_of_memory.h"

namespace vlrnn::measure {
namespace {

constexpr int64_t kMiB = 1 << 20;

TEST(CpuMemoryTracker, CountsTheBytesOfAKnownSetOfAllocations) {
  ScopedCpuMemoryTracking tracking;
  auto& tracker = CpuMemoryTracker::instance();
  ASSERT_TRUE(tracker.installed());
  const int64_t start = tracker.reset_peak();
  {
    auto a = torch::empty({1000}, torch::kFloat32);        // 4000 bytes
    auto b = torch::empty({250, 16}, torch::kFloat64);     // 32000 bytes
    auto c = torch::empty({3, 5, 7}, torch::kInt64);       // 840 bytes
    const int64_t expected = 4000 + 32000 + 840;
    const int64_t counted = tracker.current_bytes() - start;
    // Exact in practice; the brief allows a few percent for allocator bookkeeping.
    EXPECT_NEAR(double(counted), double(expected), 0.03 * double(expected));
    EXPECT_GE(tracker.peak_bytes() - start, counted);
  }
  EXPECT_EQ(tracker.current_bytes(), start) << "freed tensors must leave the count";
}

TEST(CpuMemoryTracker, PeakSeesATemporaryAndResetForgetsIt) {
  ScopedCpuMemoryTracking tracking;
  auto& tracker = CpuMemoryTracker::instance();
  const int64_t start = tracker.reset_peak();
  auto kept = torch::empty({kMiB / 4}, torch::kFloat32);  // 1 MiB
  {
    auto temporary = torch::empty({2 * kMiB / 4}, torch::kFloat32);  // 2 MiB
  }
  EXPECT_EQ(tracker.current_bytes() - start, kMiB);
  EXPECT_EQ(tracker.peak_bytes() - start, 3 * kMiB);
  EXPECT_EQ(tracker.reset_peak(), start + kMiB);
  EXPECT_EQ(tracker.peak_bytes() - start, kMiB);
}

TEST(CpuMemoryTracker, TensorsFromBeforeInstallationAreNeitherCountedNorUncounted) {
  auto& tracker = CpuMemoryTracker::instance();
  tracker.uninstall();
  auto before = torch::ones({kMiB / 4}, torch::kFloat32);
  ScopedCpuMemoryTracking tracking;
  const int64_t start = tracker.current_bytes();
  before = torch::Tensor();  // freed by its own deleter
  EXPECT_EQ(tracker.current_bytes(), start);
}

TEST(CpuMemoryTracker, ATensorMadeWhileInstalledIsUncountedWhenFreedAfterUninstall) {
  auto& tracker = CpuMemoryTracker::instance();
  tracker.install();
  const int64_t start = tracker.current_bytes();
  auto t = torch::empty({1024}, torch::kFloat32);
  tracker.uninstall();
  EXPECT_FALSE(tracker.installed());
  EXPECT_EQ(tracker.current_bytes() - start, 4096);
  auto untracked = torch::empty({1024}, torch::kFloat32);
  EXPECT_EQ(tracker.current_bytes() - start, 4096);
  t = torch::Tensor();
  EXPECT_EQ(tracker.current_bytes(), start);
}

TEST(CpuMemoryTracker, ArithmeticThroughTheTrackerIsCorrect) {
  ScopedCpuMemoryTracking tracking;
  auto a = torch::arange(10, torch::kFloat64);
  auto b = (a * 2 + 1).sum();
  EXPECT_EQ(b.item<double>(), 100.0);
}

TEST(CpuMemoryTracker, RawAllocateWorks) {
  ScopedCpuMemoryTracking tracking;
  auto& tracker = CpuMemoryTracker::instance();
  const int64_t start = tracker.current_bytes();
  auto* allocator = c10::GetAllocator(c10::DeviceType::CPU);
  void* p = allocator->raw_allocate(512);
  EXPECT_EQ(tracker.current_bytes() - start, 512);
  allocator->raw_deallocate(p);
  EXPECT_EQ(tracker.current_bytes(), start);
}

TEST(CpuMemoryTracker, LimitThrowsOutOfMemory) {
  ScopedCpuMemoryTracking tracking;
  auto& tracker = CpuMemoryTracker::instance();
  tracker.set_limit(tracker.current_bytes() + kMiB);
  auto fits = torch::empty({kMiB / 8}, torch::kFloat32);  // 0.5 MiB
  try {
    auto too_big = torch::empty({kMiB / 4}, torch::kFloat32);  // 1 MiB more
    ADD_FAILURE() << "expected an out-of-memory error";
  } catch (const std::exception& e) {
    EXPECT_TRUE(is_out_of_memory(e)) << e.what();
    EXPECT_NE(std::string(e.what()).find("out of memory"), std::string::npos);
  }
  tracker.set_limit(0);
  auto now_fits = torch::empty({kMiB / 4}, torch::kFloat32);
  EXPECT_EQ(tracker.limit(), 0);
  testing::expect_error_mentions([&] { tracker.set_limit(-1); }, {"set_limit", ">= 0", "-1"});
}

TEST(OutOfMemory, ClassifiesErrors) {
  EXPECT_TRUE(is_out_of_memory(std::bad_alloc()));
  EXPECT_TRUE(is_out_of_memory(std::runtime_error("CUDA out of memory. Tried to allocate")));
  EXPECT_TRUE(is_out_of_memory(
      std::runtime_error("DefaultCPUAllocator: not enough memory: you tried to allocate")));
  EXPECT_FALSE(is_out_of_memory(std::runtime_error("shape mismatch")));
}

}  // namespace
}  // namespace vlrnn::measure
