#pragma once
// A benchmark problem: a built-in model and head, random data and its FLOP model, made
// reproducibly from a plain spec. Shapes: inputs [T, B, F], targets [T, B] (ce) or
// [T, B, C] (mse).

#include "vlrnn/measure/flops.h"
#include "vlrnn/verify/compare.h"
#include "vlrnn/vlrnn.h"

#include <memory>
#include <string>

namespace vlrnn::experiments {

struct ProblemSpec {
  std::string model = "lstm";  // a model kind (vlrnn/core/models.h)
  int64_t input_size = 64;     // F
  int64_t hidden_size = 256;   // H
  int64_t num_layers = 1;      // L (0: unknown, a model file's that does not say)
  // "ce" (classes), "mse" (regression outputs) or any head kind (registry/heads.h); a head
  // file's kind is its path, and it fixes its own Z (= the model's H) and C
  std::string head = "ce";
  int64_t head_outputs = 16;   // C
  int64_t time_steps = 4096;   // T
  int64_t batch = 32;          // B
  // < 1: a variable-length batch, lengths drawn uniformly from [ceil(f * T), T] (one of
  // them T); 1: every sequence has all T steps.
  double min_length_fraction = 1.0;
  // > 0: resets (NOTE [ Resets ] in vlrnn/core/sequence.h): each sequence a stream of
  // segments whose lengths are drawn uniformly from [1, 2 * mean_segment - 1]; 0: none.
  int64_t mean_segment = 0;
  torch::ScalarType dtype = torch::kFloat32;
  torch::Device device = torch::kCPU;
  uint64_t seed = 1;

  // "lstm L=1 F=64 H=256 ce C=16 T=4096 B=32 float32 cpu" (no L= when num_layers is 0)
  std::string describe() const;
  bool operator==(const ProblemSpec& other) const { return describe() == other.describe() && seed == other.seed; }
};

struct Problem {
  ProblemSpec spec;
  std::shared_ptr<RecurrentModule> model;
  std::shared_ptr<OutputModule> head;
  SequenceBatch batch;
  measure::FlopsPerStep flops;  // one step of one sequence, forward

  Workload workload() const { return Workload{*model, *head, batch}; }
  // Steps that exist: T * B, or the sum of the lengths of a variable-length batch.
  int64_t valid_steps() const;
};

// [B] lengths drawn uniformly from [max(at_least, ceil(min_fraction * T)), T], from
// `generator` (default: the global one); the first is set to T so the batch spans all T steps.
torch::Tensor random_lengths(double min_fraction, int64_t T, int64_t batch, int64_t at_least = 1,
                             c10::optional<at::Generator> generator = c10::nullopt);

// [T, B] resets of streams of segments whose lengths are uniform in [1, 2 * mean - 1],
// from `generator` (default: the global one).
torch::Tensor random_resets(int64_t mean, int64_t T, int64_t batch,
                            c10::optional<at::Generator> generator = c10::nullopt);

// NOTE [ Data that cannot fit ] (problem.cpp): throws, naming the batch, what its data
// needs and how many sequences fit, when a batch's data alone ([T, B, F] inputs and [T, B]
// targets of `dtype`) exceeds the memory this machine has available.
void check_data_fits(int64_t time_steps, int64_t batch, int64_t input_size,
                     torch::ScalarType dtype);

// Weights drawn on the CPU from `spec.seed` (the same on every device), then moved; the data
// drawn on `spec.device`, from its generator seeded with `spec.seed`.
Problem make_problem(const ProblemSpec& spec);

// `base`'s problem run by model kind `kind` instead: `base`'s batch and, by name, its model's
// and head's parameters, so both compute one function of the same data (lstm and
// lstm_block, gru and gru_v3 share names). Throws naming the kinds when a parameter has no
// counterpart or another shape.
Problem make_problem_of_kind(const Problem& base, const std::string& kind);

torch::ScalarType parse_dtype(const std::string& name);  // "float32" | "float64"
using verify::dtype_name;  // "float32" | "float64" | ...
// "cpu" | "cuda" | "cuda:N"; throws, naming `argument` (a flag or a config key), when the
// name is none of those or this build or machine cannot run it.
torch::Device parse_device(const std::string& name, const std::string& argument = "device");

}  // namespace vlrnn::experiments
