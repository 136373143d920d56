// DataParallel: ranks (threads of this process, each with its own model copy, meeting over
// a real TCP store and gloo) that each compute their share of a batch end with the gradient
// one process computes on the whole batch; the ranks' disagreements and deaths are errors.
#include "test_util.h"

#include "vlrnn/distributed/data_parallel.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace vlrnn {
namespace {

using testing::expect_close;
using testing::expect_error_mentions;
using testing::Named;

// A TCP port nothing listens on now (the kernel's pick for port 0).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t size = sizeof(address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size);
  ::close(fd);
  return ntohs(address.sin_port);
}

ProcessGroupConfig config_of(int64_t rank, int64_t world, int port, int timeout_s = 30) {
  ProcessGroupConfig config;
  config.rank = rank;
  config.world_size = world;
  config.port = port;
  config.timeout = std::chrono::seconds(timeout_s);
  return config;
}

// Runs body(rank's DataParallel) on `world` threads; rethrows the first rank's exception.
// free_port()'s port is free when picked, not when the ranks' store binds it: a test run
// beside this one (ctest -j) can take it in between, and connecting the group then fails.
// A group that fails to connect is tried again on a fresh port, up to three times; an error
// once connected, the body's included, is this test's.
void on_ranks(int64_t world, const std::function<void(int64_t, DataParallel&)>& body,
              int timeout_s = 30) {
  for (int attempt = 1;; ++attempt) {
    const int port = free_port();
    std::vector<std::exception_ptr> errors(world);
    std::vector<char> connected(world, 0);
    std::vector<std::thread> threads;
    for (int64_t rank = 0; rank < world; ++rank) {
      threads.emplace_back([&, rank] {
        try {
          DataParallel ranks(config_of(rank, world, port, timeout_s));
          connected[rank] = 1;
          body(rank, ranks);
        } catch (...) {
          errors[rank] = std::current_exception();
        }
      });
    }
    for (auto& t : threads) t.join();
    const bool connecting_failed =
        std::find(connected.begin(), connected.end(), 0) != connected.end();
    if (connecting_failed && attempt < 3) continue;
    for (auto& e : errors) {
      if (e) std::rethrow_exception(e);
    }
    return;
  }
}

// A model, head and batch of 5 sequences of unequal lengths, in float64; one copy per rank,
// built from the same seed.
struct Problem {
  std::shared_ptr<RecurrentModule> model;
  std::shared_ptr<OutputModule> head;
  SequenceBatch batch;

  explicit Problem(bool variable) {
    torch::manual_seed(7);
    model = make_model({"lstm", 3, 4, 1});
    model->to(torch::kFloat64);
    head = make_head("ce", model->output_size(), 3);
    head->to(torch::kFloat64);
    batch.inputs = torch::randn({11, 5, 3}, torch::kFloat64);
    batch.targets = torch::randint(0, 3, {11, 5}, torch::kLong);
    if (variable) batch.lengths = torch::tensor({11, 4, 7, 1, 9}, torch::kLong);
  }

  std::vector<torch::Tensor> parameters() const {
    auto all = model->parameters();
    for (const auto& p : head->parameters()) all.push_back(p);
    return all;
  }

  Named gradients() const {
    Named out;
    for (const auto& item : model->named_parameters()) out["model." + item.key()] = item.value().grad();
    for (const auto& item : head->named_parameters()) out["head." + item.key()] = item.value().grad();
    return out;
  }
};

TEST(DataParallel, RowsSplitAsTensorSplit) {
  on_ranks(3, [](int64_t rank, DataParallel& ranks) {
    const std::vector<std::pair<int64_t, int64_t>> of_seven{{0, 3}, {3, 2}, {5, 2}};
    EXPECT_EQ(ranks.rows(7), of_seven[rank]);
    EXPECT_EQ(ranks.rows(3), (std::pair<int64_t, int64_t>{rank, 1}));
    expect_error_mentions([&] { ranks.rows(2); }, {"batch of 2", "3 ranks"});
  });
}

TEST(DataParallel, CollectivesSumAndAgree) {
  on_ranks(2, [](int64_t rank, DataParallel& ranks) {
    EXPECT_EQ(ranks.sum(double(rank + 1)), 3.0);
    EXPECT_TRUE(ranks.any(rank == 1));
    EXPECT_FALSE(ranks.any(false));
    auto a = torch::full({2}, double(rank)), b = torch::full({3}, 10.0 * double(rank));
    ranks.sum({a, b});
    EXPECT_TRUE(torch::equal(a, torch::full({2}, 1.0)));
    EXPECT_TRUE(torch::equal(b, torch::full({3}, 10.0)));
    ranks.check_agree("the config", "same");
    expect_error_mentions([&] { ranks.check_agree("the config", rank == 0 ? "a" : "b"); },
                          {"ranks disagree on the config", "rank " + std::to_string(rank)});
  });
}

struct Case {
  std::string method;
  Reduction reduction;
  bool variable;
};

std::string fmt_case(const Case& c) {
  return c.method + " " + to_string(c.reduction) + (c.variable ? " variable" : " fixed");
}

// Each rank's share through the case's method, then reduce_gradients, against full BPTT on
// the whole batch in one process. One group serves every case (joining costs ~1 s).
void expect_ranks_equal_one_process(const std::vector<Case>& cases, int64_t world) {
  std::vector<Named> want;
  std::vector<std::vector<std::unique_ptr<Problem>>> copies(cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    Problem whole(cases[i].variable);
    make_method("full")->compute({*whole.model, *whole.head, whole.batch, {}, cases[i].reduction});
    want.push_back(whole.gradients());
    for (int64_t r = 0; r < world; ++r) copies[i].push_back(std::make_unique<Problem>(cases[i].variable));
  }
  // One rank computes at a time: the planner's measurements and the memory meters are
  // process-wide (ranks are processes in real use, threads only here), and two threads
  // measuring at once corrupt each other's counts. The collectives stay concurrent.
  std::mutex computing;
  on_ranks(world, [&](int64_t rank, DataParallel& ranks) {
    for (size_t i = 0; i < cases.size(); ++i) {
      Problem& mine = *copies[i][rank];
      const auto share = ranks.share(mine.batch);
      {
        const std::lock_guard<std::mutex> one_at_a_time(computing);
        make_method_from_spec(cases[i].method)->compute(
            {*mine.model, *mine.head, share, {}, cases[i].reduction});
      }
      ranks.reduce_gradients(mine.parameters(), share.batch_size(), cases[i].reduction);
    }
  });
  for (size_t i = 0; i < cases.size(); ++i) {
    for (int64_t r = 0; r < world; ++r) {
      expect_close(copies[i][r]->gradients(), want[i], 1e-10,
                   fmt_case(cases[i]) + " rank " + std::to_string(r));
    }
  }
}

TEST(DataParallel, RanksEqualOneProcessOnTheWholeBatch) {
  std::vector<Case> cases;
  for (const std::string method : {"vlrnn:block_length=3", "planner:percent=30", "checkpoint", "full"}) {
    for (const auto reduction : {Reduction::kSum, Reduction::kMean}) {
      for (const bool variable : {false, true}) cases.push_back({method, reduction, variable});
    }
  }
  expect_ranks_equal_one_process(cases, 2);  // 3 + 2 sequences
  expect_ranks_equal_one_process({{"vlrnn:block_length=2", Reduction::kMean, true}}, 5);  // one each
}

// NOTE [ Ranks never wait forever ]: a rank that dies closes its connections, and the
// others fail at once; one that hangs makes them fail after the timeout.
TEST(DataParallel, ARankThatDiesOrHangsEndsTheOthersWithinTheTimeout) {
  for (const bool dies : {true, false}) {
    const auto start = std::chrono::steady_clock::now();
    expect_error_mentions([dies] {
      on_ranks(2, [dies](int64_t rank, DataParallel& ranks) {
        if (rank == 0) ranks.sum(1.0);
        else if (!dies) std::this_thread::sleep_for(std::chrono::seconds(4));
      }, /*timeout_s=*/2);
    }, {"DataParallel: rank 0 of 2", "an all-reduce failed", "timeout (2 s"});
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(waited, 10.0) << (dies ? "a dead rank" : "a hung rank");
  }
}

TEST(DataParallel, OneProcessNeedsNoGroup) {
  DataParallel single;
  EXPECT_EQ(single.world_size(), 1);
  EXPECT_EQ(single.sum(2.5), 2.5);
  Problem p(true);
  EXPECT_TRUE(torch::equal(single.share(p.batch).inputs, p.batch.inputs));
}

// Each variable set for the body, put back after (suites share a process).
void with_environment(const std::vector<std::pair<std::string, std::string>>& variables,
                      const std::function<void()>& body) {
  std::vector<std::pair<std::string, std::optional<std::string>>> saved;
  for (const auto& [name, value] : variables) {
    const char* old = std::getenv(name.c_str());
    saved.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
    if (value.empty()) ::unsetenv(name.c_str()); else ::setenv(name.c_str(), value.c_str(), 1);
  }
  body();
  for (const auto& [name, old] : saved) {
    if (old) ::setenv(name.c_str(), old->c_str(), 1); else ::unsetenv(name.c_str());
  }
}

TEST(ProcessGroupConfig, FromTorchrunsOrSlurmsVariables) {
  const std::vector<std::string> names{"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR",
                                       "MASTER_PORT", "SLURM_PROCID", "SLURM_NTASKS",
                                       "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID", "SLURM_JOB_ID",
                                       "VLRNN_DIST_TIMEOUT_S"};
  std::vector<std::pair<std::string, std::string>> cleared;
  for (const auto& n : names) cleared.emplace_back(n, "");
  with_environment(cleared, [] {
    EXPECT_EQ(ProcessGroupConfig::from_environment().world_size, 1);
    with_environment({{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "node7"},
                      {"MASTER_PORT", "1234"}, {"VLRNN_DIST_TIMEOUT_S", "9"}}, [] {
      const auto c = ProcessGroupConfig::from_environment();
      EXPECT_EQ(c.rank, 1);
      EXPECT_EQ(c.world_size, 4);
      EXPECT_EQ(c.local_rank, 1);  // LOCAL_RANK unset: one machine
      EXPECT_EQ(c.master_addr, "node7");
      EXPECT_EQ(c.port, 1234);
      EXPECT_EQ(c.timeout, std::chrono::seconds(9));
      EXPECT_EQ(c.describe(), "rank 1 of 4 (node7:1234)");
    });
    with_environment({{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "3"}, {"SLURM_STEP_NUM_TASKS", "3"},
                      {"SLURM_JOB_ID", "40017"}}, [] {
      const auto c = ProcessGroupConfig::from_environment();
      EXPECT_EQ(c.rank, 2);
      EXPECT_EQ(c.world_size, 3);
      EXPECT_EQ(c.port, 29500 + 17);  // one port per job
    });
    with_environment({{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}},
                     [] { EXPECT_EQ(ProcessGroupConfig::from_environment().local_rank, 1); });
    with_environment({{"SLURM_PROCID", "5"}, {"SLURM_STEP_NUM_TASKS", "8"},
                      {"SLURM_LOCALID", "1"}},
                     [] { EXPECT_EQ(ProcessGroupConfig::from_environment().local_rank, 1); });
    // A batch script's own shell: a job of 3 tasks, but no srun step: one process.
    with_environment({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "3"}, {"SLURM_JOB_ID", "40017"}},
                     [] { EXPECT_EQ(ProcessGroupConfig::from_environment().world_size, 1); });
    with_environment({{"RANK", "4"}, {"WORLD_SIZE", "4"}}, [] {
      expect_error_mentions([] { ProcessGroupConfig::from_environment(); },
                            {"RANK", "from 0 to 3", "'4'"});
    });
    with_environment({{"WORLD_SIZE", "two"}}, [] {
      expect_error_mentions([] { ProcessGroupConfig::from_environment(); },
                            {"WORLD_SIZE", "integer", "'two'"});
    });
  });
}

// Several ranks asking for "cuda" take one GPU each, by their number on the machine; what
// names a device, or one process, keeps it.
TEST(ProcessGroupConfig, EachRankOfAMachineTrainsOnItsOwnGpu) {
  ProcessGroupConfig group;
  group.world_size = 8;
  group.rank = 5;
  group.local_rank = 1;
  EXPECT_EQ(group.device_of_rank(torch::Device("cuda"), 4), torch::Device("cuda:1"));
  EXPECT_EQ(group.device_of_rank(torch::Device("cuda:3"), 4), torch::Device("cuda:3"));
  EXPECT_EQ(group.device_of_rank(torch::Device("cpu"), 0), torch::Device("cpu"));
  expect_error_mentions([&] { group.device_of_rank(torch::Device("cuda"), 1); },
                        {"LOCAL_RANK 1", "rank 5 of 8", "has 1", "cuda:N"});
  ProcessGroupConfig one_process;
  EXPECT_EQ(one_process.device_of_rank(torch::Device("cuda"), 0), torch::Device("cuda"));
}

}  // namespace
}  // namespace vlrnn
