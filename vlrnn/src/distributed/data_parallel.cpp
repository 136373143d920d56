#include "vlrnn/distributed/data_parallel.h"

// c10d's gloo backend is declared only under USE_C10D_GLOO, which LibTorch defines for its
// own build but not for its users; CMake sets VLRNN_WITH_GLOO where LibTorch has the
// backend and the gloo headers are installed (libgloo-dev).
#ifdef VLRNN_WITH_GLOO
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#endif

#include <cstdlib>
#include <limits>
#include <sstream>

namespace vlrnn {

bool data_parallel_available() {
#ifdef VLRNN_WITH_GLOO
  return true;
#else
  return false;
#endif
}

namespace {

// An environment variable as an integer in [low, high]; `fallback` when it is unset.
int64_t integer_variable(const char* name, int64_t fallback, int64_t low, int64_t high) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  const long long value = std::strtoll(text, &end, 10);
  TORCH_CHECK(*end == '\0' && value >= low && value <= high, "environment variable ", name,
              ": expected an integer from ", low, " to ", high, ", got '", text, "'");
  return value;
}

std::string string_variable(const char* name, const std::string& fallback) {
  const char* text = std::getenv(name);
  return text == nullptr || *text == '\0' ? fallback : std::string(text);
}

// FNV-1a, kept to 62 bits so that its negation fits an int64 (check_agree's MAX of ±h).
int64_t fingerprint(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return int64_t(h >> 2);
}

#ifdef VLRNN_WITH_GLOO
// The store's libuv backend, which 2.4+ asks for by default, is missing from builds without
// libuv (Debian's 2.x: "use_libuv was requested but PyTorch was build without libuv
// support"); the older backend, the only one before 2.4, serves a few ranks as well.
template <typename Options>
auto without_libuv(Options& options, int) -> decltype(options.useLibUV = false, void()) {
  options.useLibUV = false;
}
template <typename Options>
void without_libuv(Options&, long) {}  // before 2.4: no such option
#endif

}  // namespace

ProcessGroupConfig ProcessGroupConfig::from_environment() {
  ProcessGroupConfig config;
  const int64_t max_ranks = 1 << 20;
  if (std::getenv("WORLD_SIZE") != nullptr) {
    config.world_size = integer_variable("WORLD_SIZE", 1, 1, max_ranks);
    config.rank = integer_variable("RANK", 0, 0, config.world_size - 1);
    config.local_rank = integer_variable("LOCAL_RANK", config.rank, 0, config.world_size - 1);
  } else if (std::getenv("SLURM_STEP_NUM_TASKS") != nullptr) {
    // A task of an srun step. (Not SLURM_NTASKS: a batch script's own shell has it too, and
    // a vlrnn it starts without srun is one process.)
    config.world_size = integer_variable("SLURM_STEP_NUM_TASKS", 1, 1, max_ranks);
    config.rank = integer_variable("SLURM_PROCID", 0, 0, config.world_size - 1);
    config.local_rank = integer_variable("SLURM_LOCALID", config.rank, 0, config.world_size - 1);
    // One port per job, so that two jobs on one node do not meet.
    config.port = int(29500 + integer_variable("SLURM_JOB_ID", 0, 0,
                                               std::numeric_limits<int64_t>::max()) % 10000);
  }
  config.master_addr = string_variable("MASTER_ADDR", config.master_addr);
  config.port = int(integer_variable("MASTER_PORT", config.port, 1, 65535));
  config.timeout = std::chrono::seconds(
      integer_variable("VLRNN_DIST_TIMEOUT_S", config.timeout.count(), 1, 7 * 24 * 3600));
  return config;
}

std::string ProcessGroupConfig::describe() const {
  if (world_size == 1) return "1 process";
  std::ostringstream out;
  out << "rank " << rank << " of " << world_size << " (" << master_addr << ":" << port << ")";
  return out.str();
}

torch::Device ProcessGroupConfig::device_of_rank(const torch::Device& asked,
                                                 int64_t cuda_devices) const {
  if (world_size == 1 || !asked.is_cuda() || asked.has_index()) return asked;
  TORCH_CHECK(local_rank < cuda_devices, "LOCAL_RANK ", local_rank, " (", describe(),
              "): expected one CUDA device per rank of a machine, but this one has ",
              cuda_devices, "; start at most ", cuda_devices, " ranks per machine, or name "
              "the device (cuda:N) for every rank to share");
  return torch::Device(torch::kCUDA, c10::DeviceIndex(local_rank));
}

#ifdef VLRNN_WITH_GLOO
struct DataParallel::Group {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo;
  std::string who;  // ProcessGroupConfig::describe()
  std::chrono::seconds timeout;

  // NOTE [ Ranks never wait forever ]: gloo's error says what broke, not why a user sees it.
  void all_reduce(torch::Tensor& t, c10d::ReduceOp op) const {
    std::vector<torch::Tensor> tensors{t};
    c10d::AllreduceOptions options;
    options.reduceOp = op;
    try {
      gloo->allreduce(tensors, options)->wait();
    } catch (const std::exception& e) {
      TORCH_CHECK(false, "DataParallel: ", who, ": an all-reduce failed, so another rank died, "
                  "stopped or fell more than the timeout (", timeout.count(), " s, "
                  "VLRNN_DIST_TIMEOUT_S) behind: ", e.what());
    }
  }
};
#else
struct DataParallel::Group {};
#endif

DataParallel::DataParallel() = default;

const DataParallel& DataParallel::one_process() {
  static const DataParallel single;
  return single;
}
DataParallel::~DataParallel() = default;
DataParallel::DataParallel(DataParallel&&) noexcept = default;
DataParallel& DataParallel::operator=(DataParallel&&) noexcept = default;

DataParallel::DataParallel(const ProcessGroupConfig& config)
    : rank_(config.rank), world_size_(config.world_size) {
  TORCH_CHECK(config.world_size >= 1 && config.rank >= 0 && config.rank < config.world_size,
              "DataParallel: expected 0 <= rank < world_size, got rank ", config.rank,
              " and world_size ", config.world_size);
  if (world_size_ == 1) return;
#ifdef VLRNN_WITH_GLOO
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<std::uint16_t>(config.port);
  store_options.isServer = rank_ == 0;
  store_options.numWorkers = static_cast<std::size_t>(world_size_);
  store_options.timeout = config.timeout;
  without_libuv(store_options, 0);
  group_ = std::make_unique<Group>();
  group_->who = config.describe();
  group_->timeout = config.timeout;
  group_->store = c10::make_intrusive<c10d::TCPStore>(config.master_addr, store_options);
  auto options = c10d::ProcessGroupGloo::Options::create(config.timeout);
  options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  group_->gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(
      group_->store, int(rank_), int(world_size_), options);
#else
  TORCH_CHECK(false, "DataParallel: ", config.describe(), " needs c10d's gloo backend, and "
              "this VLRNN was built without it (LibTorch without USE_DISTRIBUTED, or no gloo "
              "headers: install libgloo-dev and rebuild); run one process (unset WORLD_SIZE)");
#endif
}

std::pair<int64_t, int64_t> DataParallel::rows(int64_t batch) const {
  TORCH_CHECK(batch >= world_size_, "DataParallel: a batch of ", batch, " sequences cannot be "
              "shared by ", world_size_, " ranks (each needs at least one); use a batch of at "
              "least ", world_size_);
  const int64_t base = batch / world_size_, extra = batch % world_size_;
  return {rank_ * base + std::min(rank_, extra), base + (rank_ < extra ? 1 : 0)};
}

SequenceBatch DataParallel::share(const SequenceBatch& batch) const {
  if (world_size_ == 1) return batch;
  const auto [first, count] = rows(batch.batch_size());
  SequenceBatch mine = batch;
  mine.inputs = batch.inputs.narrow(1, first, count);
  mine.targets = batch.targets.narrow(1, first, count);
  if (batch.lengths.defined()) mine.lengths = batch.lengths.narrow(0, first, count);
  if (batch.resets.defined()) mine.resets = batch.resets.narrow(1, first, count);
  return mine;
}

void DataParallel::sum(const std::vector<torch::Tensor>& tensors) const {
  if (world_size_ == 1 || tensors.empty()) return;
  std::vector<torch::Tensor> flat;
  for (const auto& t : tensors) {
    TORCH_CHECK(t.scalar_type() == tensors[0].scalar_type() &&
                t.device() == tensors[0].device(), "DataParallel::sum: expected tensors of "
                "one dtype and device, got ", t.scalar_type(), " on ", t.device(), " beside ",
                tensors[0].scalar_type(), " on ", tensors[0].device());
    flat.push_back(t.detach().reshape(-1));
  }
  auto all = torch::cat(flat);
#ifdef VLRNN_WITH_GLOO
  group_->all_reduce(all, c10d::ReduceOp::SUM);
#endif
  torch::NoGradGuard no_grad;
  int64_t offset = 0;
  for (const auto& t : tensors) {
    t.copy_(all.narrow(0, offset, t.numel()).view_as(t));
    offset += t.numel();
  }
}

double DataParallel::sum(double value) const {
  auto t = torch::tensor({value}, torch::kDouble);
  sum(std::vector<torch::Tensor>{t});
  return t.item<double>();
}

bool DataParallel::any(bool value) const {
  auto t = torch::tensor({int64_t(value ? 1 : 0)}, torch::kLong);
  sum(std::vector<torch::Tensor>{t});
  return t.item<int64_t>() > 0;
}

void DataParallel::check_agree(const std::string& what, const std::string& value) const {
  if (world_size_ == 1) return;
  const int64_t mine = fingerprint(value);
  auto extremes = torch::tensor({mine, -mine}, torch::kLong);  // max of h, and of -h
#ifdef VLRNN_WITH_GLOO
  group_->all_reduce(extremes, c10d::ReduceOp::MAX);
#endif
  const int64_t highest = extremes[0].item<int64_t>(), lowest = -extremes[1].item<int64_t>();
  TORCH_CHECK(highest == lowest, "the ", world_size_, " ranks disagree on ", what, ": rank ",
              rank_, "'s differs from another rank's (", value.substr(0, 200),
              value.size() > 200 ? "..." : "", "); start every rank with the same one");
}

void DataParallel::reduce_gradients(const std::vector<torch::Tensor>& parameters,
                                    int64_t rank_batch, Reduction reduction) const {
  if (world_size_ == 1) return;
  std::vector<torch::Tensor> grads;
  for (const auto& p : parameters) {
    if (!p.requires_grad()) continue;
    // Every rank sends every gradient, zeros where its share gave none.
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    grads.push_back(p.grad());
  }
  if (reduction == Reduction::kMean) {
    const double share = double(rank_batch) / sum(double(rank_batch));
    torch::NoGradGuard no_grad;
    for (auto& g : grads) g.mul_(share);
  }
  sum(grads);
}

}  // namespace vlrnn
