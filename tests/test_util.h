#pragma once
// Helpers shared by the tests.

#include "vlrnn/registry/bidirectional.h"
#include "vlrnn/schedule/schedule.h"
#include "vlrnn/vlrnn.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <vector>

namespace vlrnn::testing {

// A folder of the system's temporary folder named for `prefix`, this process and the running
// test, so that no two tests nor two test processes share one; removed if it was left over.
inline std::filesystem::path fresh_test_folder(const std::string& prefix) {
  const auto folder = std::filesystem::temp_directory_path() /
                      (prefix + std::to_string(::getpid()) + "_" +
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::remove_all(folder);
  return folder;
}

// A schedule of T steps named "test" from its ops, for the validator, the simulator and
// the executor.
inline schedule::Schedule make_schedule(int64_t T, std::vector<schedule::Op> ops) {
  schedule::Schedule s;
  s.time_steps = T;
  s.name = "test";
  s.ops = std::move(ops);
  return s;
}

// Expects `fn` to throw, with a message holding every one of `fragments` (the argument's
// name, what was expected, what came).
inline void expect_error_mentions(const std::function<void()>& fn,
                                  const std::vector<std::string>& fragments) {
  try {
    fn();
  } catch (const std::exception& e) {
    const std::string message = e.what();
    for (const auto& fragment : fragments) {
      EXPECT_NE(message.find(fragment), std::string::npos)
          << "error message lacks \"" << fragment << "\":\n" << message;
    }
    return;
  }
  ADD_FAILURE() << "expected an error mentioning \"" << fragments.front() << "\", got none";
}

// max |got − ref| / max |ref|, the verifier's per-tensor measure (nan never passes).
inline double rel_diff(const torch::Tensor& got, const torch::Tensor& ref) {
  const double scale = ref.abs().max().item<double>();
  const double diff = (got.to(ref.scalar_type()) - ref).abs().max().item<double>();
  return scale > 0 ? diff / scale : diff;
}

// Fails naming each exact left-to-right method of the registry, full BPTT aside, that no
// spec of `specs` ("name" or "name:options") runs: a test of every exact method keeps up
// with the registry as methods are added.
inline void expect_every_exact_method_in(const std::vector<std::string>& specs,
                                         const std::string& what) {
  for (const auto& name : method_names()) {
    if (name == "full" || !make_method(name)->is_exact() || !handles_left_to_right(name)) continue;
    bool listed = false;
    for (const auto& spec : specs) {
      listed = listed || spec == name || spec.rfind(name + ":", 0) == 0;
    }
    if (!listed) ADD_FAILURE() << "method " << name << " has no " << what << " case here";
  }
}

// Named tensors: outputs and gradients of one run.
using Named = std::map<std::string, torch::Tensor>;

// Checks every tensor of `ref` against `got` and prints the worst relative maxdiff, passing
// or not.
inline void expect_close(const Named& got, const Named& ref, double tol, const std::string& what) {
  double worst = 0.0;
  std::string worst_name;
  for (const auto& [name, r] : ref) {
    ASSERT_TRUE(got.count(name) && got.at(name).defined()) << what << ": " << name << " undefined";
    const double d = rel_diff(got.at(name), r);
    EXPECT_LE(d, tol) << what << ": " << name << " maxdiff (relative) " << d;
    if (!(d <= worst)) worst = d, worst_name = name;
  }
  std::cout << "[ maxdiff  ] " << what << ": " << worst << " (" << worst_name << ", tol " << tol
            << ")\n";
}

// A state shaped as `model`'s for `batch` sequences, drawn from N(0, 1): leaves that require
// grad when `requires_grad`.
inline State random_state(const RecurrentModule& model, int64_t batch,
                          torch::ScalarType dtype = torch::kFloat64, bool requires_grad = false) {
  std::vector<torch::Tensor> tensors;
  for (const auto& spec : model.state_spec()) {
    tensors.push_back(torch::randn(spec.shape_for_batch(batch), torch::dtype(dtype))
                          .requires_grad_(requires_grad));
  }
  return State(std::move(tensors));
}

// Drops the .grad of every parameter of `model` and `head` and of `more` (h0, inputs), so the
// next run's gradients are its own.
inline void clear_grads(const torch::nn::Module& model, const torch::nn::Module& head,
                        std::vector<torch::Tensor> more = {}) {
  for (const auto& p : model.parameters()) more.push_back(p);
  for (const auto& p : head.parameters()) more.push_back(p);
  for (auto& leaf : more) leaf.mutable_grad() = torch::Tensor();
}

// A module's parameters by name.
inline Named parameters_by_name(const torch::nn::Module& module) {
  Named out;
  for (const auto& item : module.named_parameters()) out[item.key()] = item.value();
  return out;
}

// Runs `forward` on fresh leaves of x and of every tensor of h0 and back-propagates
// L = Σ z ⊙ seed_z + Σ_i Σ h_exit[i] ⊙ seed_h[i]. Returns z, every exit state ("h_exit i"),
// and the gradients of x, of every entry state ("grad h0 i") and of `params` by name
// ("grad NAME"), whose .grad() are cleared first.
using ForwardFn = std::function<std::pair<torch::Tensor, State>(const torch::Tensor&, const State&)>;
inline Named run_and_backprop(const ForwardFn& forward, const torch::Tensor& x, const State& h0,
                              const torch::Tensor& seed_z, const std::vector<torch::Tensor>& seed_h,
                              const Named& params) {
  for (auto& [name, p] : params) const_cast<torch::Tensor&>(p).mutable_grad().reset();
  auto xl = x.detach().clone().requires_grad_(true);
  std::vector<torch::Tensor> h0l;
  for (const auto& h : h0) h0l.push_back(h.detach().clone().requires_grad_(true));
  auto [z, h] = forward(xl, State(h0l));
  auto loss = (z * seed_z).sum();
  for (size_t i = 0; i < h.size(); ++i) loss = loss + (h[i] * seed_h[i]).sum();
  loss.backward();
  Named out{{"z", z.detach()}, {"grad x", xl.grad()}};
  for (size_t i = 0; i < h.size(); ++i) {
    out["h_exit " + std::to_string(i)] = h[i].detach();
    out["grad h0 " + std::to_string(i)] = h0l[i].grad();
  }
  for (const auto& [name, p] : params) out["grad " + name] = p.grad().defined() ? p.grad().clone() : p.grad();
  return out;
}

// `inner`, which throws on its `failing`-th call (counting from 1): a model that fails midway.
class ThrowsOnCall : public RecurrentModule {
 public:
  ThrowsOnCall(std::shared_ptr<RecurrentModule> inner, int64_t failing)
      : inner_(register_module("inner", inner)), failing_(failing) {}
  std::pair<torch::Tensor, State> forward(const torch::Tensor& x, const State& h,
                                          const torch::Tensor& lengths) override {
    TORCH_CHECK(++calls_ != failing_, "ThrowsOnCall: call ", calls_);
    return inner_->forward(x, h, lengths);
  }
  int64_t input_size() const override { return inner_->input_size(); }
  int64_t output_size() const override { return inner_->output_size(); }
  std::vector<StateSpec> state_spec() const override { return inner_->state_spec(); }
  int64_t calls_ = 0;

 private:
  std::shared_ptr<RecurrentModule> inner_;
  int64_t failing_;
};

// LibTorch's intra-op pool on `threads` threads while it lives, then back to what it was
// (ctest runs every test on one: NOTE [ One thread per test ] in tests/CMakeLists.txt).
struct IntraOpThreads {
  explicit IntraOpThreads(int threads) : saved(at::get_num_threads()) { at::set_num_threads(threads); }
  ~IntraOpThreads() { at::set_num_threads(saved); }
  IntraOpThreads(const IntraOpThreads&) = delete;
  IntraOpThreads& operator=(const IntraOpThreads&) = delete;
  int saved;
};

// A small model, head and batch for tests: F = 3, H = 4, classes = 3.
struct SmallProblem {
  std::shared_ptr<RecurrentModule> model;
  std::shared_ptr<OutputModule> head;
  SequenceBatch batch;

  explicit SmallProblem(const std::string& kind = "lstm", int64_t steps = 12, int64_t batch_size = 2,
                        torch::ScalarType dtype = torch::kFloat64, int64_t layers = 1) {
    torch::manual_seed(7);
    model = make_model({kind, 3, 4, layers});
    model->to(dtype);
    head = make_head("ce", model->output_size(), 3);
    head->to(dtype);
    batch.inputs = torch::randn({steps, batch_size, 3}, torch::dtype(dtype));
    batch.targets = torch::randint(0, 3, {steps, batch_size}, torch::kLong);
  }
  Workload workload(State h0 = {}, Reduction reduction = Reduction::kMean) const {
    return Workload{*model, *head, batch, std::move(h0), reduction};
  }
};

}  // namespace vlrnn::testing
