#include "lib/tasks.h"

#include "lib/idx_file.h"
#include "lib/json_fields.h"
#include "lib/problem.h"

#include "vlrnn/core/heads.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>

namespace vlrnn::experiments {
namespace {

using json = nlohmann::json;

// SplitMix64's finaliser: decorrelates the seeds of neighbouring batch indices.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The adding problem (Hochreiter & Schmidhuber 1997, in the form of Le et al. 2015): each
// step carries a value in [0, 1) and a marker; exactly two steps are marked, one in each
// half of the sequence, and the last step's target is the sum of the two marked values.
// Predicting 1 whatever the inputs scores Var(U + U) = 1/6.
class AddingTask : public Task {
 public:
  AddingTask(int64_t steps, double min_length) : steps_(steps), min_length_(min_length) {}
  std::string describe() const override {
    return fmt::format("adding(T={}, min_length={})", steps_, min_length_);
  }
  std::string kind() const override { return "adding"; }
  int64_t input_size() const override { return 2; }
  std::string head_kind() const override { return "mse"; }
  int64_t head_outputs() const override { return 1; }
  int64_t time_steps() const override { return steps_; }
  double chance_loss() const override { return 1.0 / 6.0; }

 protected:
  SequenceBatch draw(Split, int64_t batch, at::Generator& generator) const override {
    SequenceBatch out;
    if (min_length_ < 1.0) out.lengths = random_lengths(min_length_, steps_, batch, 2, generator);
    auto length = out.has_lengths() ? out.lengths : torch::full({batch}, steps_, torch::kLong);
    auto values = torch::rand({steps_, batch}, generator, torch::kFloat);  // [T, B]
    auto half = torch::div(length, 2, "floor");                            // [B]
    auto first = (torch::rand({batch}, generator, torch::kFloat) * half).to(torch::kLong);
    auto second = half + (torch::rand({batch}, generator, torch::kFloat) * (length - half))
                             .to(torch::kLong);
    auto marked = torch::stack({first, second});                          // [2, B]
    auto markers = torch::zeros({steps_, batch}).scatter_(0, marked, 1.0);  // [T, B]
    auto sum = values.gather(0, marked).sum(0, /*keepdim=*/true);          // [1, B]
    auto targets = torch::full({steps_, batch}, std::numeric_limits<float>::quiet_NaN());
    targets.scatter_(0, (length - 1).unsqueeze(0), sum);                   // scored: last step
    out.inputs = torch::stack({values, markers}, -1);                      // [T, B, 2]
    out.targets = targets.unsqueeze(-1);                                   // [T, B, 1]
    return out;
  }

 private:
  int64_t steps_;
  double min_length_;
};

// The copy task (Arjovsky et al. 2016) with a delay of D steps: S symbols from an alphabet
// of A, then D - 1 blanks, a delimiter, and S steps in which the model must repeat the S
// symbols in order. Only those S recall steps are scored, so a model that has not carried
// the symbols across the delay scores log(A). With S = 1 it is delayed recall.
// Inputs are one-hot over blank, the A symbols and the delimiter (A + 2); T = 2S + D.
// With min_length < 1 each sequence's delay is drawn from [min_length * D, D].
class CopyTask : public Task {
 public:
  CopyTask(int64_t delay, int64_t symbols, int64_t alphabet, double min_length)
      : delay_(delay), symbols_(symbols), alphabet_(alphabet), min_length_(min_length) {}
  std::string describe() const override {
    return fmt::format("copy(delay={}, symbols={}, alphabet={}, min_length={})", delay_,
                       symbols_, alphabet_, min_length_);
  }
  std::string kind() const override { return "copy"; }
  int64_t input_size() const override { return alphabet_ + 2; }
  std::string head_kind() const override { return "ce"; }
  int64_t head_outputs() const override { return alphabet_; }
  int64_t time_steps() const override { return 2 * symbols_ + delay_; }
  double chance_loss() const override { return std::log(double(alphabet_)); }
  bool classifies_sequences() const override { return symbols_ == 1; }

 protected:
  SequenceBatch draw(Split, int64_t batch, at::Generator& generator) const override {
    SequenceBatch out;
    const int64_t steps = time_steps();
    auto delays = torch::full({batch}, delay_, torch::kLong);  // [B]
    if (min_length_ < 1.0) {
      delays = random_lengths(min_length_, delay_, batch, 1, generator);
      out.lengths = 2 * symbols_ + delays;
    }
    auto symbols = torch::randint(1, alphabet_ + 1, {symbols_, batch}, generator,
                                  torch::kLong);                          // [S, B]
    auto codes = torch::zeros({steps, batch}, torch::kLong);               // [T, B], 0 = blank
    codes.slice(0, 0, symbols_).copy_(symbols);
    codes.scatter_(0, (symbols_ + delays - 1).unsqueeze(0), alphabet_ + 1);  // the delimiter
    auto recall = symbols_ + delays.unsqueeze(0) +
                  torch::arange(symbols_, torch::kLong).unsqueeze(1);      // [S, B] steps
    auto targets = torch::full({steps, batch}, kNoTarget, torch::kLong);   // [T, B]
    targets.scatter_(0, recall, symbols - 1);
    out.inputs = torch::one_hot(codes, alphabet_ + 2).to(torch::kFloat);   // [T, B, A + 2]
    out.targets = targets;
    return out;
  }

 private:
  int64_t delay_, symbols_, alphabet_;
  double min_length_;
};

// Character-level language modelling: windows of T + 1 characters of a text file; each
// step reads one character (one-hot over the file's distinct bytes) and predicts the next.
// The first (1 - eval_fraction) of the file trains, the rest evaluates. Chance is the
// unigram entropy of the training part: what a model that ignores its inputs can reach.
class TextTask : public Task {
 public:
  TextTask(std::string path, int64_t steps, double min_length, double eval_fraction)
      : path_(std::move(path)), steps_(steps), min_length_(min_length) {
    load(eval_fraction);
  }
  std::string describe() const override {
    return fmt::format("text({}, T={}, vocabulary={}, min_length={})", path_, steps_,
                       vocabulary_size_, min_length_);
  }
  std::string kind() const override { return "text"; }
  int64_t input_size() const override { return vocabulary_size_; }
  std::string head_kind() const override { return "ce"; }
  int64_t head_outputs() const override { return vocabulary_size_; }
  int64_t time_steps() const override { return steps_; }
  double chance_loss() const override { return unigram_entropy_; }

 protected:
  SequenceBatch draw(Split split, int64_t batch, at::Generator& generator) const override {
    const auto& text = split == Split::kTrain ? train_ : eval_;  // [N] token ids
    SequenceBatch out;
    if (min_length_ < 1.0) out.lengths = random_lengths(min_length_, steps_, batch, 1, generator);
    auto starts = torch::randint(0, text.size(0) - steps_, {1, batch}, generator,
                                 torch::kLong);                                  // [1, B]
    auto window = text.index({starts + torch::arange(steps_ + 1).unsqueeze(1)});  // [T + 1, B]
    out.inputs = torch::one_hot(window.slice(0, 0, steps_), vocabulary_size_)
                     .to(torch::kFloat);  // [T, B, V]
    out.targets = window.slice(0, 1).contiguous();  // [T, B]
    return out;
  }

 private:
  void load(double eval_fraction);

  std::string path_;
  int64_t steps_;
  double min_length_;
  int64_t vocabulary_size_ = 0;
  double unigram_entropy_ = 0.0;
  torch::Tensor train_, eval_;  // [N] int64 token ids
};

void TextTask::load(double eval_fraction) {
  std::ifstream file(path_, std::ios::binary);
  TORCH_CHECK(file, "config task.path: cannot read the text file \"", path_, "\"");
  const std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  auto raw = torch::from_blob(const_cast<char*>(bytes.data()), {int64_t(bytes.size())},
                              torch::kUInt8).to(torch::kLong);  // [N] bytes
  auto [vocabulary, ids] = torch::_unique(raw, /*sorted=*/true, /*return_inverse=*/true);
  vocabulary_size_ = vocabulary.size(0);
  TORCH_CHECK(vocabulary_size_ >= 2, "config task.path: \"", path_, "\" has ",
              vocabulary_size_, " distinct characters; a language model needs at least 2");
  const auto eval_size = int64_t(double(ids.size(0)) * eval_fraction);
  train_ = ids.slice(0, 0, ids.size(0) - eval_size);
  eval_ = ids.slice(0, ids.size(0) - eval_size);
  TORCH_CHECK(eval_.size(0) > steps_ + 1 && train_.size(0) > steps_ + 1, "config task: \"",
              path_, "\" has ", ids.size(0), " characters, too few for windows of time_steps "
              "+ 1 = ", steps_ + 1, " in both its training part (", train_.size(0), ") and its "
              "evaluation part (", eval_.size(0), "); lower time_steps or use a longer text");
  auto p = torch::bincount(train_, {}, vocabulary_size_).to(torch::kDouble) / double(train_.size(0));
  unigram_entropy_ = -(p * torch::log(p.clamp_min(1e-300))).sum().item<double>();
}

// Fashion-MNIST (Xiao et al. 2017) read one pixel per step, as sequential MNIST (Le et al.
// 2015): each 28 x 28 image is a sequence of T = 784 grey values in row-major order (F = 1),
// and its class (10 kinds of clothing) is scored at the last step alone. "permuted" reorders
// the pixels of every image by one fixed permutation (pixel_permutation), which scatters
// neighbouring pixels across the whole sequence. The training split is the data set's own
// training file (60,000 images), evaluation its test file (10,000); a batch draws its
// images uniformly, with replacement, from its split. Pixels are standardised with the mean
// and standard deviation of the training images (about 0.286 and 0.353 of full scale).
// Chance is the entropy of the training labels (log 10: the classes are balanced).
class FashionMnistTask : public Task {
 public:
  FashionMnistTask(std::string folder, bool permuted)
      : folder_(std::move(folder)), permuted_(permuted) {
    load();
  }
  std::string describe() const override {
    return fmt::format("fashion_mnist(T={}, {}, {})", steps_,
                       permuted_ ? "permuted" : "sequential", folder_);
  }
  std::string kind() const override { return "fashion_mnist"; }
  int64_t input_size() const override { return 1; }
  std::string head_kind() const override { return "ce"; }
  int64_t head_outputs() const override { return kFashionMnistClasses; }
  int64_t time_steps() const override { return steps_; }
  double chance_loss() const override { return label_entropy_; }
  bool classifies_sequences() const override { return true; }

 protected:
  SequenceBatch draw(Split split, int64_t batch, at::Generator& generator) const override {
    const auto& images = split == Split::kTrain ? train_images_ : test_images_;  // [N, T] uint8
    const auto& labels = split == Split::kTrain ? train_labels_ : test_labels_;  // [N] int64
    auto picked = torch::randint(0, images.size(0), {batch}, generator, torch::kLong);  // [B]
    auto pixels = images.index_select(0, picked).t().to(torch::kFloat);  // [T, B] in 0..255
    SequenceBatch out;
    out.inputs = ((pixels / 255.0 - mean_) / std_).unsqueeze(-1);  // [T, B, 1]
    out.targets = torch::full({steps_, batch}, kNoTarget, torch::kLong);  // [T, B]
    out.targets.select(0, steps_ - 1).copy_(labels.index_select(0, picked));  // the last step
    return out;
  }

 private:
  void load();
  // The folder's file NAME.gz (as Debian ships it) or NAME; "" when neither is there.
  std::string find(const std::string& name) const;

  std::string folder_;
  bool permuted_;
  int64_t steps_ = 0;
  double mean_ = 0.0, std_ = 1.0, label_entropy_ = 0.0;
  torch::Tensor train_images_, test_images_;  // [N, T] uint8, pixels in reading order
  torch::Tensor train_labels_, test_labels_;  // [N] int64
};

std::string FashionMnistTask::find(const std::string& name) const {
  for (const auto& file : {name + ".gz", name}) {
    const auto path = (std::filesystem::path(folder_) / file).string();
    if (std::filesystem::exists(path)) return path;
  }
  return "";
}

void FashionMnistTask::load() {
  TORCH_CHECK(!find(kFashionMnistFiles[0]).empty(), "config task.path: no Fashion-MNIST in \"",
              folder_, "\" (looked for ", kFashionMnistFiles[0], ".gz there); install Debian's "
              "package: apt-get install dataset-fashion-mnist (scripts/install_deps.sh does), or "
              "set task.path to a folder that holds the four IDX files");
  auto read = [&](const std::string& name) {
    const auto path = find(name);
    TORCH_CHECK(!path.empty(), "config task.path: \"", folder_, "\" lacks ", name, ".gz (or ",
                name, "), one of Fashion-MNIST's four IDX files; reinstall dataset-fashion-mnist");
    return read_idx_file(path);
  };
  auto images = [&](const std::string& name) {
    auto values = read(name);  // [N, R, C] uint8
    TORCH_CHECK(values.dim() == 3 && values.size(0) >= 1 && values.size(1) * values.size(2) >= 1,
                "config task.path: ", name, " in \"", folder_, "\" holds sizes ", values.sizes(),
                ", expected images [N, rows, columns]");
    return values.reshape({values.size(0), -1});  // [N, T]
  };
  auto labels = [&](const std::string& name, int64_t count) {
    auto values = read(name);  // [N] uint8
    TORCH_CHECK(values.dim() == 1 && values.size(0) == count, "config task.path: ", name,
                " in \"", folder_, "\" holds sizes ", values.sizes(), ", expected [", count,
                "] (one label per image)");
    TORCH_CHECK(values.max().item<int64_t>() < kFashionMnistClasses, "config task.path: ", name,
                " in \"", folder_, "\" holds label ", values.max().item<int64_t>(),
                ", expected classes 0..", kFashionMnistClasses - 1);
    return values.to(torch::kLong);
  };
  train_images_ = images(kFashionMnistFiles[0]);
  train_labels_ = labels(kFashionMnistFiles[1], train_images_.size(0));
  test_images_ = images(kFashionMnistFiles[2]);
  test_labels_ = labels(kFashionMnistFiles[3], test_images_.size(0));
  steps_ = train_images_.size(1);
  TORCH_CHECK(test_images_.size(1) == steps_, "config task.path: the test images in \"", folder_,
              "\" have ", test_images_.size(1), " pixels, the training images ", steps_);
  if (permuted_) {
    const auto order = torch::tensor(pixel_permutation(steps_), torch::kLong);  // [T]
    train_images_ = train_images_.index_select(1, order).contiguous();
    test_images_ = test_images_.index_select(1, order).contiguous();
  }
  const auto scaled = train_images_.to(torch::kFloat) / 255.0;  // [N, T]
  mean_ = scaled.mean().item<double>();
  std_ = std::max(scaled.std().item<double>(), 1e-6);  // a blank data set stays finite
  auto p = torch::bincount(train_labels_, {}, kFashionMnistClasses).to(torch::kDouble) /
           double(train_labels_.size(0));
  label_entropy_ = -(p * torch::log(p.clamp_min(1e-300))).sum().item<double>();
}

const std::vector<std::string> kAddingKeys = {"kind", "time_steps", "min_length"};
const std::vector<std::string> kCopyKeys = {"kind", "delay", "symbols", "alphabet", "min_length"};
const std::vector<std::string> kTextKeys = {"kind", "path", "time_steps", "min_length",
                                            "eval_fraction"};
const std::vector<std::string> kFashionMnistKeys = {"kind", "path", "permuted"};
// "steps" was the length of the tasks that take one (adding, text), and also the top level's
// optimizer steps: one word for two ideas, so both were renamed, and the old spelling names
// the new one rather than failing as an unknown key. (copy and fashion_mnist never had it.)
const std::vector<json_fields::RenamedKey> kRenamedLengthKeys = {
    {"steps", "renamed to \"task.time_steps\" (the sequence length T)"}};

double min_length_of(const json& config) {
  // In the function, not the file: this file shares a unity-build unit with others (NOTE [
  // Unity builds ]), which a file-scope directive would reach too.
  using namespace json_fields;
  return config.contains("min_length")
             ? read_number(config["min_length"], "task.min_length", 1e-9, 1.0)
             : 1.0;
}

}  // namespace

// `episodes` of a task's sequences packed back to back into each sequence, as an RL buffer
// or a corpus packs episodes or documents: sequence b's episodes follow one another by their
// own lengths, a reset at each one's start, and the padding gathers at the end.
class EpisodesTask : public Task {
 public:
  EpisodesTask(std::unique_ptr<Task> inner, int64_t episodes)
      : inner_(std::move(inner)), episodes_(episodes) {}
  std::string describe() const override {
    return fmt::format("{}, {} episodes packed", inner_->describe(), episodes_);
  }
  std::string kind() const override { return inner_->kind(); }
  int64_t input_size() const override { return inner_->input_size(); }
  std::string head_kind() const override { return inner_->head_kind(); }
  int64_t head_outputs() const override { return inner_->head_outputs(); }
  int64_t time_steps() const override { return episodes_ * inner_->time_steps(); }
  double chance_loss() const override { return inner_->chance_loss(); }
  bool classifies_sequences() const override { return inner_->classifies_sequences(); }

 protected:
  SequenceBatch draw(Split split, int64_t batch_size, at::Generator& generator) const override {
    std::vector<SequenceBatch> parts;
    for (int64_t e = 0; e < episodes_; ++e) parts.push_back(inner_->draw(split, batch_size, generator));
    const int64_t steps = time_steps();
    SequenceBatch out;
    auto input_shape = parts[0].inputs.sizes().vec();
    auto target_shape = parts[0].targets.sizes().vec();
    input_shape[0] = target_shape[0] = steps;
    out.inputs = torch::zeros(input_shape, parts[0].inputs.options());     // [T, B, F]
    out.targets = torch::zeros(target_shape, parts[0].targets.options());  // [T, B(, O)]
    out.resets = torch::zeros({steps, batch_size}, torch::kBool);          // [T, B]
    auto lengths = torch::zeros({batch_size}, torch::kLong);               // [B]
    for (int64_t b = 0; b < batch_size; ++b) {
      int64_t at = 0;
      for (const auto& part : parts) {
        const int64_t n = part.has_lengths() ? part.lengths[b].item<int64_t>() : part.time_steps();
        out.inputs.narrow(0, at, n).select(1, b).copy_(part.inputs.narrow(0, 0, n).select(1, b));
        out.targets.narrow(0, at, n).select(1, b).copy_(part.targets.narrow(0, 0, n).select(1, b));
        out.resets[at][b] = true;
        at += n;
      }
      lengths[b] = at;
    }
    if (lengths.min().item<int64_t>() < steps) out.lengths = lengths;
    return out;
  }

 private:
  std::unique_ptr<Task> inner_;
  int64_t episodes_;
};

SequenceBatch Task::batch(Split split, int64_t index, int64_t batch_size, uint64_t seed) const {
  TORCH_CHECK(batch_size >= 1, "batch: expected >= 1 sequences, got ", batch_size);
  check_data_fits(time_steps(), batch_size, input_size(), torch::kFloat32);  // drawn in float32
  auto generator = at::detail::createCPUGenerator(
      mix(mix(seed) ^ mix(uint64_t(index) * 2 + (split == Split::kEval ? 1 : 0))));
  return draw(split, batch_size, generator);
}

torch::Tensor scored_mask(const SequenceBatch& batch) {
  const auto& y = batch.targets;  // [T, B] or [T, B, O]
  auto scored = y.is_floating_point() ? ~torch::isnan(y).any(-1) : y != kNoTarget;  // [T, B]
  if (batch.has_lengths()) {
    auto steps = torch::arange(y.size(0), torch::dtype(torch::kLong).device(y.device()));
    scored &= steps.unsqueeze(1) < batch.lengths.to(y.device()).unsqueeze(0);
  }
  return scored;
}

int64_t scored_steps(const SequenceBatch& batch) {
  return scored_mask(batch).sum().item<int64_t>();
}

std::vector<std::string> task_kinds() { return {"adding", "copy", "text", "fashion_mnist"}; }

std::vector<int64_t> pixel_permutation(int64_t size) {
  std::vector<int64_t> order(size_t(std::max<int64_t>(size, 0)));
  for (size_t i = 0; i < order.size(); ++i) order[i] = int64_t(i);
  // Fisher-Yates driven by SplitMix64 (mix() at state, state + golden ratio, ...): plain
  // integer arithmetic, so every LibTorch version and machine draws the same order.
  uint64_t state = kPixelPermutationSeed;
  for (size_t i = order.size(); i > 1; --i) {
    const uint64_t random = mix(state);
    state += 0x9e3779b97f4a7c15ULL;
    std::swap(order[i - 1], order[random % i]);
  }
  return order;
}

std::unique_ptr<Task> make_task(const json& config) {
  using namespace json_fields;  // as in min_length_of
  if (!config.is_object()) fail("task", "expected an object with a \"kind\", got " + type_of(config));
  if (config.contains("episodes")) {
    const int64_t episodes = read_int(config["episodes"], "task.episodes", 1);
    json inner = config;
    inner.erase("episodes");
    if (episodes == 1) return make_task(inner);
    return std::make_unique<EpisodesTask>(make_task(inner), episodes);
  }
  TORCH_CHECK(config.contains("kind"), "config task.kind: missing; known kinds: ",
              fmt::format("{}", fmt::join(task_kinds(), ", ")));
  const auto kind = read_string(config["kind"], "task.kind", task_kinds());
  auto required = [&](const char* key) -> const json& {
    TORCH_CHECK(config.contains(key), "config task.", key, ": missing (the ", kind,
                " task needs it)");
    return config[key];
  };
  if (kind == "adding") {
    check_keys(config, "task", kAddingKeys, kRenamedLengthKeys);
    return std::make_unique<AddingTask>(read_int(required("time_steps"), "task.time_steps", 2),
                                        min_length_of(config));
  }
  if (kind == "copy") {
    check_keys(config, "task", kCopyKeys);
    auto optional_int = [&](const char* key, int64_t fallback, int64_t min) {
      return config.contains(key) ? read_int(config[key], std::string("task.") + key, min)
                                  : fallback;
    };
    return std::make_unique<CopyTask>(read_int(required("delay"), "task.delay", 1),
                                      optional_int("symbols", 10, 1),
                                      optional_int("alphabet", 8, 2), min_length_of(config));
  }
  if (kind == "fashion_mnist") {
    check_keys(config, "task", kFashionMnistKeys);
    return std::make_unique<FashionMnistTask>(
        config.contains("path") ? read_string(config["path"], "task.path")
                                : std::string(kFashionMnistFolder),
        config.contains("permuted") && read_bool(config["permuted"], "task.permuted"));
  }
  check_keys(config, "task", kTextKeys, kRenamedLengthKeys);
  const double eval_fraction = config.contains("eval_fraction")
      ? read_number(config["eval_fraction"], "task.eval_fraction", 0.01, 0.5)
      : 0.1;
  return std::make_unique<TextTask>(read_string(required("path"), "task.path"),
                                    read_int(required("time_steps"), "task.time_steps", 1),
                                    min_length_of(config), eval_fraction);
}

}  // namespace vlrnn::experiments
