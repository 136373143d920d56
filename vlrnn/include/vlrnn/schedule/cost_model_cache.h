#pragma once
// Measured cost models kept on disk, so that a second process planning the same workload on
// the same machine reads its costs in milliseconds instead of measuring them again.
//
// NOTE [ Cost models on disk ]
// A cost model depends on what the workload is (the cost-model signature: sizes, dtype,
// device, whether it has lengths, which tensors want gradients, the model's and the head's
// structure; not the lengths nor T: NOTE [ Other batches of the workload ] in cost_model.cpp;
// nor the reduction) and on where it runs (host, CPU, LibTorch's threads and version): both are the key. A file
// per key holds the model as text, field by field, the whole key on its second line (the file
// name is a hash of the key, and two keys may share one). A file that is not exactly such a
// model for this key, or fails CostModel::check(), is measured again and rewritten: never an
// error. Files are written to a temporary name and renamed, so a reader in another process
// sees a whole file or none. Where, and how many (least recently used go first):
// docs/architecture.md. Raise kCostModelFormat, part of the key, when what is measured, or
// how, changes.

#include "vlrnn/methods/gradient_method.h"
#include "vlrnn/schedule/cost_model.h"

#include <filesystem>
#include <optional>
#include <string>

namespace vlrnn::schedule {

constexpr int64_t kCostModelFormat = 13;
// About 4 KB a file: 4 MB at most. A process that cycles through more workloads than this
// (the verification matrix plans 184) would find none of them again: least recently
// used evicts each one before its next use.
constexpr size_t kMaxCostModelFiles = 1024;

// What the cost model of `workload` depends on, the machine aside (NOTE [ Cost models on
// disk ]): equal signatures, equal costs once priced for the batch's steps and lengths.
std::string cost_model_signature(const Workload& workload);

// The workload itself: cost_model_signature(), the batch's steps and its lengths. Equal signatures, an
// equal plan (the planner prepares again when it changes).
std::string workload_signature(const Workload& workload);

// The machine part of the key: the host's name, `device` described (its CPU model, cores
// and LibTorch's threads; a GPU's name and memory) and LibTorch's version.
std::string machine_description(const torch::Device& device);

// The whole key of `workload`'s cost model on this machine: machine_description() and
// cost_model_signature().
std::string cost_model_key(const Workload& workload);

// The folder cost models are kept in; nullopt when VLRNN_CACHE_DIR=off or no home is known.
std::optional<std::filesystem::path> cost_model_cache_dir();

// The file that holds the model of `key` in `dir`.
std::filesystem::path cost_model_file(const std::filesystem::path& dir, const std::string& key);

// The model stored for `key` in `dir`; nullopt when there is none, or none readable.
std::optional<CostModel> load_cost_model(const std::filesystem::path& dir, const std::string& key);

// Stores `model` for `key` in `dir`, creating the folder, and then removes the least
// recently used files beyond `max_files`; false when it could not store it (the cache is
// an optimisation: a failure is not an error).
bool store_cost_model(const std::filesystem::path& dir, const std::string& key,
                      const CostModel& model, size_t max_files = kMaxCostModelFiles);

}  // namespace vlrnn::schedule
