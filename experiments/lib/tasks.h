#pragma once
// Training tasks that need no download: two long-range synthetic problems, character-level
// language modelling on any text file, and sequential / permuted Fashion-MNIST from Debian's
// dataset-fashion-mnist package.
// Shapes: inputs [T, B, F]; targets [T, B] class indices (kNoTarget where a step is not
// scored) or [T, B, 1] values (NaN where not scored); lengths [B] when lengths vary.
//
// NOTE [ Batches are a function of their index ]: batch i of a split is drawn from a
// generator seeded with (seed, split, i) alone. A run resumed from a checkpoint therefore
// draws exactly the batches a run that never stopped would have drawn (the data position
// is just the step count), and every method trained from one config sees the same data in
// the same order.

#include "vlrnn/core/sequence.h"

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

namespace vlrnn::experiments {

enum class Split { kTrain, kEval };

class Task {
 public:
  virtual ~Task() = default;

  // "copy(alphabet=8, symbols=1, delay=100)"
  virtual std::string describe() const = 0;
  virtual std::string kind() const = 0;   // "adding" | "copy" | "text" | "fashion_mnist"
  virtual int64_t input_size() const = 0;     // F
  virtual std::string head_kind() const = 0;  // "ce" | "mse" (built with sparse targets)
  virtual int64_t head_outputs() const = 0;   // C | O
  virtual int64_t time_steps() const = 0;     // T
  // The loss of the best predictor that ignores what must be remembered: what a model that
  // has not learned the long-range dependency scores (per scored step).
  virtual double chance_loss() const = 0;
  // True when each sequence has one scored step and its target is a class (a sequence
  // classification: Fashion-MNIST, delayed recall of one symbol): evaluation then reports
  // the accuracy too.
  virtual bool classifies_sequences() const { return false; }

  // Batch `index` of `split` (NOTE [ Batches are a function of their index ]).
  SequenceBatch batch(Split split, int64_t index, int64_t batch_size, uint64_t seed) const;

 protected:
  friend class EpisodesTask;  // draws its inner task's episodes
  // Draws one batch from `generator`; float tensors in float32 (converted by the caller).
  virtual SequenceBatch draw(Split split, int64_t batch_size, at::Generator& generator) const = 0;
};

// [T, B] bool: the steps that carry a loss (targets other than kNoTarget / NaN, within each
// sequence's length), on the targets' device.
torch::Tensor scored_mask(const SequenceBatch& batch);
int64_t scored_steps(const SequenceBatch& batch);  // how many

// Builds a task from its config object, e.g. {"kind": "copy", "delay": 100}; throws naming
// the key when a value is missing, of the wrong type or out of range. Keys by kind:
//   adding: time_steps (T), min_length (fraction of T, default 1: every sequence has T steps)
//   copy:   delay (D), symbols (S, default 10), alphabet (A, default 8), min_length (of D)
//   text:   path, time_steps (T), min_length, eval_fraction (default 0.1)
//   ("steps", these tasks' older name for time_steps, is refused naming "time_steps".)
//   any kind: episodes (default 1): each sequence is that many of the task's sequences
//           packed back to back, by their own lengths, the state reset at each one's start
//           (NOTE [ Resets ] in vlrnn/core/sequence.h); T becomes episodes times the task's.
//   fashion_mnist: permuted (default false), path (default kFashionMnistFolder: a folder
//           with the four files of kFashionMnistFiles, each gzip-compressed or not; the
//           original MNIST's files, renamed so, work too). T = 784, F = 1, 10 classes.
std::unique_ptr<Task> make_task(const nlohmann::json& config);
std::vector<std::string> task_kinds();

// Where Debian's dataset-fashion-mnist package puts the data set, and its files (training
// images and labels, test images and labels; each also read as NAME.gz).
inline constexpr const char* kFashionMnistFolder = "/usr/share/datasets/fashion-mnist";
inline const std::string kFashionMnistFiles[4] = {
    "train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte"};
inline constexpr int64_t kFashionMnistClasses = 10;

// The order in which the permuted task reads an image's `size` pixels: step t reads pixel
// order[t]. A Fisher-Yates shuffle from the fixed seed kPixelPermutationSeed, computed with
// integer arithmetic alone, so it is the same in every run, on every machine and LibTorch.
inline constexpr uint64_t kPixelPermutationSeed = 784;
std::vector<int64_t> pixel_permutation(int64_t size);

}  // namespace vlrnn::experiments
