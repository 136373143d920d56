#pragma once
// Data-parallel training over c10d (PyTorch's torch.distributed, in C++): each process, a
// rank, trains its share of every batch, and the ranks sum their gradients once per
// iteration. A training loop of one's own does what `vlrnn train` does:
//
//   vlrnn::DataParallel ranks(vlrnn::ProcessGroupConfig::from_environment());
//   const auto mine = ranks.share(global_batch);            // this rank's sequences
//   method.compute({model, head, mine, {}, vlrnn::Reduction::kMean});
//   ranks.reduce_gradients(parameters, mine.batch_size(), vlrnn::Reduction::kMean);
//   optimizer.step();                                       // the same step on every rank
//
// NOTE [ The gradient of the global batch ]
// After reduce_gradients every rank holds the gradient one process computes on the whole
// global batch, so the ranks' parameters stay equal step after step. SUM: the global loss
// is the sum of the ranks' losses, so the gradients are summed. MEAN: the mean over every
// sequence of the global batch (each over its own valid steps), so a rank's mean weighs
// B_rank / B_global before the sum; ranks may hold different numbers of sequences. The
// gradients travel as one flattened all-reduce; only the order of the sum's rounding
// differs from one process's.
//
// NOTE [ Ranks never wait forever ]
// Every collective waits at most ProcessGroupConfig::timeout; a rank that died or stopped
// makes the others throw (a c10::Error from gloo, naming the timeout) instead of hanging.
//
// Shapes: T = steps, B = the global batch, B_rank = this rank's share, F = input features.

#include "vlrnn/core/loss.h"
#include "vlrnn/core/sequence.h"

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace vlrnn {

// Whether this build can run several ranks (compiled with c10d's gloo backend).
bool data_parallel_available();

// Where the ranks meet: rank and world size, and the rendezvous, a TCP store that rank 0
// serves on master_addr:port.
struct ProcessGroupConfig {
  int64_t rank = 0;
  int64_t world_size = 1;
  int64_t local_rank = 0;  // this rank's number on its own machine (LOCAL_RANK, SLURM_LOCALID)
  std::string master_addr = "127.0.0.1";
  int port = 29500;
  std::chrono::seconds timeout{300};  // NOTE [ Ranks never wait forever ]

  // torchrun's variables RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT; else, in a
  // task of an srun step, Slurm's SLURM_PROCID, SLURM_STEP_NUM_TASKS and SLURM_LOCALID (LOCAL_RANK
  // unset: the rank; the address and port still
  // from MASTER_ADDR / MASTER_PORT when set, else 127.0.0.1 and 29500 + SLURM_JOB_ID %
  // 10000); else one process. VLRNN_DIST_TIMEOUT_S sets the timeout. Throws, naming the variable, on a value
  // that is not a number or out of range.
  static ProcessGroupConfig from_environment();
  // "rank 1 of 2 (127.0.0.1:29500)", or "1 process".
  std::string describe() const;
  // The device this rank trains on, given the one asked for: with several ranks, "cuda"
  // (no index) becomes cuda:local_rank, one GPU per rank of a machine, as torchrun's
  // ranks take them; a named index or the CPU stays as asked. Throws, naming LOCAL_RANK,
  // when the machine has fewer CUDA devices (`cuda_devices`) than that.
  torch::Device device_of_rank(const torch::Device& asked, int64_t cuda_devices) const;
};

class DataParallel {
 public:
  // One process: every collective returns its argument.
  DataParallel();
  static const DataParallel& one_process();
  // Joins the group (blocks until every rank has joined, at most config.timeout). A world
  // of 1 needs no rendezvous; a larger one throws when !data_parallel_available().
  explicit DataParallel(const ProcessGroupConfig& config);
  ~DataParallel();
  DataParallel(DataParallel&&) noexcept;
  DataParallel& operator=(DataParallel&&) noexcept;

  int64_t rank() const { return rank_; }
  int64_t world_size() const { return world_size_; }
  bool is_root() const { return rank_ == 0; }

  // This rank's sequences of a batch of `batch`: [first, first + count), contiguous, as
  // torch.tensor_split splits (the first batch % world ranks hold one more). Throws when
  // there are fewer sequences than ranks.
  std::pair<int64_t, int64_t> rows(int64_t batch) const;
  // Those sequences of a global batch (inputs [T, B, F] -> [T, B_rank, F], its targets and
  // lengths), with T kept.
  SequenceBatch share(const SequenceBatch& batch) const;

  // Sums every tensor over the ranks, in place, in one all-reduce (flattened together;
  // every tensor of one dtype and device).
  void sum(const std::vector<torch::Tensor>& tensors) const;
  double sum(double value) const;
  bool any(bool value) const;
  // Throws on every rank when the ranks' `value`s differ, naming `what`: a config or model
  // that differs is stopped at the start, not at the first all-reduce.
  void check_agree(const std::string& what, const std::string& value) const;

  // Every parameter's .grad, computed on this rank's share with `reduction`, becomes the
  // global batch's gradient (NOTE [ The gradient of the global batch ]).
  void reduce_gradients(const std::vector<torch::Tensor>& parameters, int64_t rank_batch,
                        Reduction reduction) const;

 private:
  struct Group;  // the c10d process group (gloo), when world_size > 1
  std::unique_ptr<Group> group_;
  int64_t rank_ = 0, world_size_ = 1;
};

}  // namespace vlrnn
