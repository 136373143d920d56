#include "vlrnn/schedule/online_stream.h"

#include "vlrnn/core/bidirectional.h"
#include "vlrnn/methods/block.h"
#include "vlrnn/schedule/schedule_method.h"
#include "vlrnn/schedule/schedulers.h"

#include <algorithm>
#include <functional>

namespace vlrnn {
namespace {

// The caller's head with its losses scaled by one weight: a MEAN stream's 1 / (T·B)
// (NOTE [ The reversal, interval by interval ]).
class WeightedStreamHead : public OutputModule {
 public:
  WeightedStreamHead(OutputModule& head, double weight) : head_(head), weight_(weight) {}
  torch::Tensor forward(const torch::Tensor& z_block, const torch::Tensor& y_block) override {
    return head_.forward(z_block, y_block) * weight_;
  }
  int64_t input_size() const override { return head_.input_size(); }
  void check_targets(const torch::Tensor& targets, const std::string& argument) const override {
    head_.check_targets(targets, argument);
  }
  std::optional<HeadTargets> targets() const override { return head_.targets(); }

 private:
  OutputModule& head_;
  double weight_;
};

// A chunk's steps as a batch of sequences that run all of them (no lengths).
SequenceBatch full_length_batch(torch::Tensor inputs, torch::Tensor targets) {
  SequenceBatch batch;
  batch.inputs = std::move(inputs);    // [n, B, F]
  batch.targets = std::move(targets);  // [n, B(, O)]
  return batch;
}

void add_counters(StepCounters& into, const StepCounters& more) {
  into.forward_with_grad += more.forward_with_grad;
  into.forward_no_grad += more.forward_no_grad;
  into.backward += more.backward;
}

}  // namespace

OnlineStream::OnlineStream(RecurrentModule& model, OutputModule& head, OnlineOptions budget,
                           Reduction reduction, State h0)
    : model_(model), head_(head), budget_(checked_online_options(budget)),
      reduction_(reduction), h0_(std::move(h0)) {
  TORCH_CHECK(!as_bidirectional(model), "OnlineStream model: a bidirectional model's output at "
              "a step depends on steps the stream has not seen yet; stream a left-to-right model");
}

int64_t OnlineStream::held_states() const {
  // The working state is held on its own unless it is h0 or was just kept (the same tensors).
  const bool working_apart = working_at_ > 0 && !kept_.count(working_at_);
  return int64_t(kept_.size()) - (kept_.count(0) ? 1 : 0) + (working_apart ? 1 : 0);
}

void OnlineStream::note_held() { peak_held_ = std::max(peak_held_, held_states()); }

void OnlineStream::check_usable(const char* call) const {
  TORCH_CHECK(!failed_, call, ": an earlier call on this stream failed midway, and the states "
              "it held are gone; start a new OnlineStream");
  TORCH_CHECK(!finished_, call, ": the stream has finished already; start a new OnlineStream");
}

void OnlineStream::check_chunk(const torch::Tensor& inputs, const torch::Tensor& targets) const {
  TORCH_CHECK(inputs.defined() && inputs.dim() == 3,
              "push inputs: expected a time-major chunk [n, B, F], got ",
              inputs.defined() ? "shape " + std::string(c10::str(inputs.sizes())) : "none");
  TORCH_CHECK(inputs.size(0) >= 1, "push inputs: expected at least one step, got shape ",
              inputs.sizes());
  if (!chunks_.empty()) {
    const auto& first = chunks_.front().inputs;  // [n, B, F]
    TORCH_CHECK(inputs.size(1) == first.size(1) && inputs.size(2) == first.size(2),
                "push inputs: expected [n, B, F] with the stream's B = ", first.size(1),
                " and F = ", first.size(2), ", got shape ", inputs.sizes());
    TORCH_CHECK(inputs.scalar_type() == first.scalar_type() && inputs.device() == first.device(),
                "push inputs: expected the stream's dtype ", first.scalar_type(), " on ",
                first.device(), ", got ", inputs.scalar_type(), " on ", inputs.device());
  }
  TORCH_CHECK(targets.defined() && targets.dim() >= 2 && targets.size(0) == inputs.size(0) &&
                  targets.size(1) == inputs.size(1),
              "push targets: expected leading dimensions [n, B] = [", inputs.size(0), ", ",
              inputs.size(1), "] matching the inputs, got ",
              targets.defined() ? "shape " + std::string(c10::str(targets.sizes())) : "none");
}

void OnlineStream::start(const torch::Tensor& inputs, const torch::Tensor& targets) {
  // The first chunk's workload checks the rest once: the model's F, the dtypes and devices
  // of the parameters, the head against the targets, h0 against the model.
  const Workload first =
      validated(Workload{model_, head_, full_length_batch(inputs, targets), h0_, reduction_});
  h0_ = first.h0;
  checkpointer_.emplace(online_slots(budget_, h0_));
  const auto device = inputs.device();
  kept_[0] = {h0_, RngState::capture(device)};
  working_ = h0_;
  generators_after_ = kept_[0].rng;
}

void OnlineStream::check_generators(const char* call) const {
  if (!model_draws_) return;
  const RngState now = RngState::capture(chunks_.front().inputs.device());
  TORCH_CHECK(now.shares_storage_with(generators_after_), call,
              ": the random-number generators moved since the last push while the model draws "
              "random numbers (dropout): recomputing a step would draw other numbers than its "
              "first run and the gradient would not be exact; draw numbers of your own between "
              "pushes from a generator of your own (NOTE [ The stream's random numbers ])");
}

void OnlineStream::push(const torch::Tensor& inputs, const torch::Tensor& targets) {
  check_usable("push");
  check_chunk(inputs, targets);
  if (chunks_.empty()) {
    start(inputs, targets);
  } else {
    check_generators("push");
    // Checked for the head's own demands, as the first chunk's were (h0 already is).
    validated(Workload{model_, head_, full_length_batch(inputs, targets), h0_, reduction_});
  }
  chunks_.push_back({steps_, inputs, targets});
  steps_ += inputs.size(0);
  failing_midway([&] {
    // NOTE [ A stream runs one step behind ]: the working state moves to the newest step
    // pushed; a state the rule keeps is stored when the working state passes it.
    const RngState before = RngState::capture(inputs.device());
    auto& rule = *checkpointer_;
    while (rule.position() + 1 < steps_) {
      const int64_t w = rule.position();
      const schedule::OnlineMove move = rule.advance();
      if (move.keeps_previous && w > 0) {
        run_until(w);
        kept_[w] = {working_, RngState::capture(inputs.device())};
      }
      if (move.dropped >= 0) kept_.erase(move.dropped);
      note_held();
    }
    run_until(rule.position());
    generators_after_ = RngState::capture(inputs.device());
    if (!generators_after_.shares_storage_with(before)) model_draws_ = true;
  });
}

void OnlineStream::failing_midway(const std::function<void()>& run) {
  // NOTE [ Generators on failure ] (gradient_method.cpp): a model that throws midway leaves
  // the generators where the caller found them; the stream itself cannot go on.
  const RngCopy on_entry = RngCopy::take(chunks_.front().inputs.device());
  try {
    run();
  } catch (...) {
    on_entry.restore();
    failed_ = true;
    throw;
  }
}

const OnlineStream::Chunk& OnlineStream::chunk_at(int64_t step) const {
  // The last chunk that begins at or before `step`.
  auto it = std::upper_bound(chunks_.begin(), chunks_.end(), step,
                             [](int64_t s, const Chunk& c) { return s < c.begin; });
  return *std::prev(it);
}

void OnlineStream::run_until(int64_t position) {
  while (working_at_ < position) {
    const Chunk& chunk = chunk_at(working_at_);
    const int64_t local = working_at_ - chunk.begin;
    // NOTE [ Chunked advance ]: at most kAdvanceChunk steps per call, as the executor runs.
    const int64_t n = std::min({position - working_at_, chunk.inputs.size(0) - local,
                                schedule::kAdvanceChunk});
    const Workload piece{model_, head_, full_length_batch(chunk.inputs, chunk.targets), h0_,
                         Reduction::kSum};
    working_ = forward_no_grad(piece, local, n, working_);
    working_at_ += n;
    counters_.forward_no_grad += n;
    note_held();
  }
}

SequenceBatch OnlineStream::batch_of(int64_t begin, int64_t end) const {
  std::vector<torch::Tensor> inputs, targets;
  for (int64_t step = begin; step < end;) {
    const Chunk& chunk = chunk_at(step);
    const int64_t local = step - chunk.begin;
    const int64_t n = std::min(end - step, chunk.inputs.size(0) - local);
    inputs.push_back(chunk.inputs.narrow(0, local, n));
    targets.push_back(chunk.targets.narrow(0, local, n));
    step += n;
  }
  if (inputs.size() == 1) return full_length_batch(inputs[0], targets[0]);
  return full_length_batch(torch::cat(inputs), torch::cat(targets));
}

GradientResult OnlineStream::finish(const State& final_state_grad, double loss_scale) {
  check_usable("finish");
  TORCH_CHECK(steps_ >= 1, "finish: no step was pushed; push at least one chunk first");
  check_generators("finish");
  // The last step's workload checks final_state_grad and loss_scale as compute() checks them.
  if (!final_state_grad.empty() || loss_scale != 1.0) {
    Workload last{model_, head_, batch_of(steps_ - 1, steps_), h0_, reduction_};
    last.final_state_grad = final_state_grad;
    last.loss_scale = loss_scale;
    validated(last);
  }
  finished_ = true;
  GradientResult result;
  failing_midway([&] { result = reverse_stream(final_state_grad, loss_scale); });
  chunks_.clear();
  kept_.clear();
  return result;
}

GradientResult OnlineStream::reverse_stream(const State& final_state_grad, double loss_scale) {
  const int64_t T = steps_, B = chunks_.front().inputs.size(1);
  const auto device = chunks_.front().inputs.device();
  WeightedStreamHead weighted(head_, 1.0 / double(T * B));
  OutputModule& head =
      reduction_ == Reduction::kMean ? static_cast<OutputModule&>(weighted) : head_;

  GradientResult result;
  result.step_losses = torch::zeros({T, B}, chunks_.front().inputs.options().requires_grad(false));
  result.counters = counters_;
  torch::Tensor loss = torch::zeros({}, result.step_losses.options());
  // One call of the executor on steps [begin, end) from the kept state `from`, seeded with
  // δh at `end`; returns δh at `begin` (NOTE [ The reversal, interval by interval ]).
  auto reverse = [&](int64_t begin, int64_t end, int64_t slots, const Kept& from,
                     const State& delta) {
    const State entry = begin == 0 ? h0_ : from.state.detached_leaves();
    Workload interval{model_, head, batch_of(begin, end), entry, Reduction::kSum};
    interval.final_state_grad = delta;
    interval.loss_scale = loss_scale;
    from.rng.restore();
    GradientResult part =
        schedule::execute_schedule(schedule::revolve_schedule(end - begin, slots), interval);
    loss += part.loss;
    result.step_losses.narrow(0, begin, end - begin).copy_(part.step_losses);
    add_counters(result.counters, part.counters);
    if (end == T) result.final_state = part.final_state;
    std::vector<torch::Tensor> grads;
    if (begin > 0) {
      for (const auto& h : entry) grads.push_back(h.grad());
    }
    return State(std::move(grads));
  };
  // The last step, from the working state.
  State delta = reverse(T - 1, T, 1, Kept{working_, generators_after_}, final_state_grad);
  const RngState after_forward = RngState::capture(device);  // one forward pass's end
  working_ = {};
  for (const auto& interval : schedule::online_intervals(*checkpointer_)) {
    delta = reverse(interval.begin, interval.end, interval.slots, kept_.at(interval.begin), delta);
    if (interval.begin > 0) kept_.erase(interval.begin);
  }
  after_forward.restore();
  if (reduction_ == Reduction::kMean) result.step_losses.mul_(double(T * B));  // unweighted
  result.loss = loss;
  return result;
}

}  // namespace vlrnn
