#include "lib/problem.h"

#include "vlrnn/core/script_model.h"
#include "vlrnn/measure/environment.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>

namespace vlrnn::experiments {

std::string ProblemSpec::describe() const {
  // L=0: a model file's layers, unknown unless the file says (make_problem).
  const std::string layers = num_layers > 0 ? fmt::format(" L={}", num_layers) : "";
  std::string text = fmt::format("{}{} F={} H={} {} C={} T={} B={} {} {}", model, layers,
                                 input_size, hidden_size, head, head_outputs, time_steps, batch,
                                 dtype_name(dtype), device.str());
  if (min_length_fraction < 1.0) text += fmt::format(" lengths~U[{}T,T]", min_length_fraction);
  if (mean_segment > 0) text += fmt::format(" segments~{}", mean_segment);
  return text;
}

int64_t Problem::valid_steps() const {
  return batch.has_lengths() ? batch.lengths.sum().item<int64_t>()
                             : spec.time_steps * spec.batch;
}

torch::Tensor random_lengths(double min_fraction, int64_t T, int64_t batch, int64_t at_least,
                             c10::optional<at::Generator> generator) {
  const auto shortest =
      std::max<int64_t>(at_least, int64_t(std::ceil(min_fraction * double(T))));
  auto lengths = torch::randint(shortest, T + 1, {batch}, generator, torch::kLong);  // [B]
  lengths[0] = T;  // the batch spans all T steps
  return lengths;
}

torch::Tensor random_resets(int64_t mean, int64_t T, int64_t batch,
                            c10::optional<at::Generator> generator) {
  TORCH_CHECK(mean >= 1, "mean_segment: expected >= 1 steps, got ", mean);
  // Enough segment lengths to cover T steps even if every one is 1 long.
  const auto lengths = torch::randint(1, 2 * mean, {batch, T}, generator, torch::kLong);  // [B, T]
  const auto starts = lengths.cumsum(1) - lengths;  // [B, T] each segment's first step
  auto resets = torch::zeros({T, batch}, torch::kBool);
  for (int64_t b = 0; b < batch; ++b) {
    const auto inside = starts[b].masked_select(starts[b] < T);
    resets.select(1, b).index_fill_(0, inside, true);
  }
  return resets;
}

namespace {

// MemAvailable of /proc/meminfo in bytes, or -1 where it cannot be read.
int64_t available_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return -1;
}

}  // namespace

// NOTE [ Data that cannot fit ]: a batch, of a benchmark problem or of a training task,
// whose data alone ([T, B, F] inputs and [T, B] targets) exceeds the memory this machine
// has available is refused before anything is allocated, saying what was asked, how much
// that is and what would fit, rather than surfacing the allocator's "[enforce fail at
// alloc_cpu.cpp]" (an iteration needs more than its data, so passing this check is no
// promise that the step fits).
void check_data_fits(int64_t time_steps, int64_t batch, int64_t input_size,
                     torch::ScalarType dtype) {
  const double element = dtype == torch::kFloat64 ? 8.0 : 4.0;
  const double per_sequence = double(time_steps) * (double(input_size) + 1.0) * element;
  const double bytes = per_sequence * double(batch);
  const int64_t available = available_memory_bytes();
  if (available <= 0 || bytes <= double(available)) return;
  const double gib = 1024.0 * 1024.0 * 1024.0;
  TORCH_CHECK(false, "batch: ", batch, " sequences of T = ", time_steps,
              " steps and F = ", input_size, " features need ", fmt::format("{:.1f}", bytes / gib),
              " GiB for their data alone; this machine has ",
              fmt::format("{:.1f}", double(available) / gib), " GiB available, where at most ",
              int64_t(double(available) / per_sequence),
              " such sequences fit (and an iteration needs more than its data)");
}

Problem make_problem(const ProblemSpec& spec) {
  TORCH_CHECK(spec.time_steps >= 1, "T: expected >= 1 time steps, got ", spec.time_steps);
  TORCH_CHECK(spec.batch >= 1, "batch: expected >= 1 sequences, got ", spec.batch);
  TORCH_CHECK(spec.min_length_fraction > 0.0 && spec.min_length_fraction <= 1.0,
              "min_length_fraction: expected a fraction of T in (0, 1], got ",
              spec.min_length_fraction);
  TORCH_CHECK(spec.mean_segment >= 0, "mean_segment: expected >= 1 steps (0: no resets), got ",
              spec.mean_segment);
  Problem p;
  p.spec = spec;
  torch::manual_seed(spec.seed);
  ModelConfig config;
  config.kind = spec.model;
  config.input_size = spec.input_size;
  config.hidden_size = spec.hidden_size;
  config.num_layers = spec.num_layers;
  p.model = make_model(config);
  // A TorchScript model file fixes its own sizes (lib/user_models.h): the data follows it.
  if (const auto* script_model = dynamic_cast<const ScriptModel*>(p.model.get())) {
    config.input_size = p.spec.input_size = p.model->input_size();
    config.hidden_size = p.spec.hidden_size = p.model->output_size();
    // Its layers too: the script's own `num_layers: int` where it has one, else 0 (unknown,
    // left out of describe()), never the command line's default of 1.
    const auto& script = script_model->script();
    p.spec.num_layers = script.hasattr("num_layers") && script.attr("num_layers").isInt()
                            ? script.attr("num_layers").toInt()
                            : 0;
  }
  p.head = make_head(spec.head, p.model->output_size(), spec.head_outputs);
  const bool builtin_head = spec.head == "ce" || spec.head == "mse";
  if (!builtin_head) {
    // A head of the user's (a head file) fixes its own Z and C (lib/user_models.h).
    TORCH_CHECK(p.head->input_size() == p.model->output_size(), "head \"", spec.head,
                "\": expected it to read the model's H = ", p.model->output_size(),
                " features per step (", spec.model, "), found input_size Z = ",
                p.head->input_size(), " (give the model H = Z, or export the head for H)");
    if (const auto targets = p.head->targets()) p.spec.head_outputs = targets->size;
  }
  p.model->to(spec.device, spec.dtype);
  p.head->to(spec.device, spec.dtype);
  if (spec.device.is_cpu()) check_data_fits(spec.time_steps, spec.batch, p.spec.input_size, spec.dtype);
  // The data is drawn where it is used, from that device's generator (seeded above with the
  // CPU's): at the lengths a GPU is for, the inputs are tens of GB (68.7 GB at T = 2^20,
  // B = 64, F = 256, float32), which the host would draw on one thread for a minute and hold
  // in its own memory first. The weights stay drawn on the CPU, the same on every device.
  const auto options = torch::TensorOptions().dtype(spec.dtype).device(spec.device);
  p.batch.inputs = torch::randn({spec.time_steps, spec.batch, p.spec.input_size}, options);
  // [T, B, F]
  p.batch.targets = random_targets(*p.head, spec.time_steps, spec.batch, options);
  // [T, B] or [T, B, C]
  if (spec.min_length_fraction < 1.0) {
    p.batch.lengths = random_lengths(spec.min_length_fraction, spec.time_steps, spec.batch);
  }
  if (spec.mean_segment > 0) {
    p.batch.resets = random_resets(spec.mean_segment, spec.time_steps, spec.batch);
  }
  // A user's head: its weights' GEMMs, and the elementwise work of the built-in head that
  // reads the same targets.
  const auto targets = p.head->targets();
  const std::string flops_head =
      builtin_head ? spec.head
                   : (targets && targets->kind == HeadTargets::Kind::kValues ? "mse" : "ce");
  p.flops = measure::has_flop_model(spec.model) && builtin_head
                ? measure::flops_per_step(config, spec.head, spec.head_outputs)
                : measure::flops_from_weights(*p.model, *p.head, flops_head, p.spec.head_outputs);
  return p;
}

torch::ScalarType parse_dtype(const std::string& name) {
  if (name == "float32") return torch::kFloat32;
  if (name == "float64") return torch::kFloat64;
  TORCH_CHECK(false, "dtype: expected \"float32\" or \"float64\", got \"", name, "\"");
}

torch::Device parse_device(const std::string& name, const std::string& argument) {
  c10::optional<torch::Device> parsed;
  try {
    parsed = torch::Device(name);
  } catch (const c10::Error&) {  // not a device name at all: the one message below
  }
  TORCH_CHECK(parsed && (name == "cpu" || parsed->is_cuda()), argument,
              ": expected \"cpu\", \"cuda\" or \"cuda:N\", got \"", name, "\"");
  const torch::Device device = *parsed;
  TORCH_CHECK(device.is_cpu() || measure::built_with_cuda(), argument, ": \"", name,
              "\" needs a CUDA build (configure with -DVLRNN_WITH_CUDA=ON against a LibTorch "
              "with CUDA); this one runs on cpu only");
  TORCH_CHECK(device.is_cpu() || torch::cuda::is_available(), argument, ": \"", name,
              "\" requested but no CUDA device is visible");
  TORCH_CHECK(device.is_cpu() || !device.has_index() ||
                  device.index() < c10::DeviceIndex(torch::cuda::device_count()),
              argument, ": \"", name, "\" requested but this machine has ",
              torch::cuda::device_count(), " CUDA device(s), cuda:0 to cuda:",
              int(torch::cuda::device_count()) - 1);
  return device;
}

namespace {

// Copies `from`'s parameters into `to`'s of the same names and shapes.
void copy_parameters(const torch::nn::Module& from, torch::nn::Module& to, const std::string& what) {
  const auto source = from.named_parameters();
  auto target = to.named_parameters();
  TORCH_CHECK(source.size() == target.size(), what, ": expected the same parameters, got ",
              source.size(), " and ", target.size());
  torch::NoGradGuard no_grad;
  for (const auto& item : source) {
    TORCH_CHECK(target.contains(item.key()), what, ": the second lacks parameter ", item.key());
    TORCH_CHECK(target[item.key()].sizes() == item.value().sizes(), what, ": parameter ",
                item.key(), " has shape ", item.value().sizes(), " and ", target[item.key()].sizes());
    target[item.key()].copy_(item.value());
  }
}

}  // namespace

Problem make_problem_of_kind(const Problem& base, const std::string& kind) {
  auto spec = base.spec;
  spec.model = kind;
  auto problem = make_problem(spec);
  problem.batch = base.batch;
  copy_parameters(*base.model, *problem.model,
                  fmt::format("models {} and {}", base.spec.model, kind));
  copy_parameters(*base.head, *problem.head, fmt::format("the heads of {} and {}", base.spec.model, kind));
  return problem;
}

}  // namespace vlrnn::experiments
