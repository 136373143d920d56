#include "test_util.h"

#include "vlrnn/measure/environment.h"
#include "vlrnn/measure/threads.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <ATen/Parallel.h>

#include <atomic>

namespace vlrnn::measure {
namespace {

// Restores the process's thread counts when a test ends.
struct KeepThreads {
  ThreadSettings saved = current_threads();
  ~KeepThreads() {
    at::set_num_threads(saved.torch_threads);
    if (saved.blas_threads > 0) apply_thread_policy(saved.torch_threads, saved.blas_threads);
  }
};

TEST(ThreadPolicy, SetsLibTorchAndTheBlas) {
  KeepThreads keep;
  const auto s = apply_thread_policy(1, 1);
  EXPECT_EQ(s.torch_threads, 1);
  EXPECT_EQ(at::get_num_threads(), 1);
  if (s.blas_control.empty()) GTEST_SKIP() << "this BLAS (" << detect_blas().vendor << ") has no thread control";
  EXPECT_EQ(s.blas_threads, 1);
  EXPECT_EQ(current_threads().blas_threads, 1);
}

TEST(ThreadPolicy, ZeroBlasThreadsMeansTheCoresLibTorchLeaves) {
  KeepThreads keep;
  const auto s = apply_thread_policy(1, 0);
  if (s.blas_control.empty()) GTEST_SKIP() << "this BLAS has no thread control";
  EXPECT_EQ(s.blas_threads, cpu_count());  // one intra-op thread: every core
  const auto wide = apply_thread_policy(int(cpu_count()), 0);
  // Every core to LibTorch: where the pools fight, one BLAS thread.
  EXPECT_EQ(wide.blas_threads, kPoolsFight ? 1 : cpu_count());
}

TEST(ThreadPolicy, DefaultBlasThreadsShareTheCoresWherePoolsFight) {
  EXPECT_EQ(default_blas_threads(1, 8, true), 8);
  EXPECT_EQ(default_blas_threads(2, 8, true), 4);
  EXPECT_EQ(default_blas_threads(3, 8, true), 2);
  EXPECT_EQ(default_blas_threads(2, 2, true), 1);
  EXPECT_EQ(default_blas_threads(16, 2, true), 1);  // never 0
  EXPECT_EQ(default_blas_threads(2, 8, false), 8);  // 1.x: the BLAS keeps every core
}

TEST(ThreadPolicy, PoolsContendOnlyWhenBothAreWideAndOverfill) {
  const ThreadSettings both{2, 2, "openblas_set_num_threads", /*blas_own_pool=*/true};
  const auto warning = pools_contend(both, 2);
  EXPECT_NE(warning.find("OPENBLAS_NUM_THREADS=1"), std::string::npos) << warning;
  EXPECT_NE(warning.find("2 intra-op threads"), std::string::npos) << warning;
  EXPECT_EQ(pools_contend(both, 4), "");  // 2 x 2 fit 4 cores
  ThreadSettings shared = both;
  shared.blas_own_pool = false;
  EXPECT_EQ(pools_contend(shared, 2), "");  // OpenMP OpenBLAS: LibTorch's own threads
  EXPECT_EQ(pools_contend({1, 2, "x", true}, 2), "");
  EXPECT_EQ(pools_contend({2, 1, "x", true}, 2), "");
  EXPECT_EQ(pools_contend({2, -1, "", true}, 2), "");  // no BLAS thread control
}

TEST(ThreadPolicy, OpenBlasIsControlled) {
  // The machines the README's numbers come from run OpenBLAS: its control must be found,
  // or the policy silently does nothing there.
  if (detect_blas().vendor != "OpenBLAS") GTEST_SKIP() << "BLAS is " << detect_blas().vendor;
  EXPECT_EQ(current_threads().blas_control, "openblas_set_num_threads");
}

TEST(ThreadPolicy, IntraOpThreadsSplitTheLibrarysLoops) {
  // NOTE [ OpenMP for our own loops ] (cmake/VlrnnDependencies.cmake): at::parallel_for is
  // compiled into the file that calls it, and splits only where that file was compiled with
  // LibTorch's threading. This file gets its flags from linking the library, as the
  // library's own files (lstm_block, linear_scan) get theirs: two threads, two tasks.
  testing::IntraOpThreads two(2);
  std::atomic<int> tasks{0};
  at::parallel_for(0, 8192, 4096, [&](int64_t, int64_t) { ++tasks; });
  EXPECT_EQ(tasks.load(), 2) << "at::parallel_for ran as one task on 2 intra-op threads";
}

TEST(ThreadPolicy, RejectsBadCounts) {
  KeepThreads keep;
  EXPECT_THROW(apply_thread_policy(0, 1), c10::Error);
  EXPECT_THROW(apply_thread_policy(1, -1), c10::Error);
}

}  // namespace
}  // namespace vlrnn::measure
