// The compiled half of the Python package `vlrnn` (imported as vlrnn._C): the gradient
// methods on a user's Python modules, the verifier, the hand-written cells over a module's
// tensors, and TorchScript model files. The pure-Python layer (python/vlrnn/) is what users call;
// it validates arguments and adapts layouts before anything reaches here.
// Shapes: T = steps, B = batch, F = input features, H = hidden, Z = model output features.

#include "online_stream.h"
#include "python_modules.h"
#include "python_warnings.h"

#include "vlrnn/cells/gru_block.h"
#include "vlrnn/cells/lstm_block.h"
#include "vlrnn/cells/onednn_lstm.h"
#include "vlrnn/core/bidirectional.h"
#include "vlrnn/core/exact_float32.h"
#include "vlrnn/registry/bidirectional.h"
#include "vlrnn/registry/heads.h"
#include "vlrnn/core/script_model.h"
#include "vlrnn/measure/cpu_memory_tracker.h"
#include "vlrnn/measure/environment.h"
#include "vlrnn/measure/threads.h"
#include "vlrnn/measure/out_of_memory.h"
#include "vlrnn/registry/methods.h"
#include "vlrnn/registry/models.h"
#include "vlrnn/registry/plugins.h"
#include "vlrnn/verify/compare.h"
#include "vlrnn/verify/cut_dependence.h"
#include "vlrnn/verify/report.h"
#include "vlrnn/verify/verify_model.h"

#include <dlfcn.h>

#include <map>
#include <optional>
#include <sstream>

namespace vlrnn::python {
namespace {

// NOTE [ Errors from C++ in Python ]: the library throws c10::Error (TORCH_CHECK) with a
// C++ backtrace in what(). Before the engine runs, everything the library rejects is the
// caller's input: those errors become ValueError (input_error). Anything later is a
// RuntimeError, as PyTorch raises it, but without the backtrace.
struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <typename F>
auto input_error(F&& check) -> decltype(check()) {
  try {
    return check();
  } catch (const py::error_already_set&) {
    throw;
  } catch (const std::exception& e) {
    throw InputError(measure::short_message(e));
  }
}

State state_from(const py::object& tensors) {
  if (tensors.is_none()) return {};
  return State(tensors.cast<std::vector<torch::Tensor>>());
}

Workload workload_from(RecurrentModule& model, OutputModule& head, const torch::Tensor& inputs,
                       const torch::Tensor& targets, const py::object& lengths,
                       const py::object& h0, const std::string& reduction,
                       const py::object& final_state_grad = py::none(),
                       const py::object& resets = py::none(), double loss_scale = 1.0) {
  SequenceBatch batch;
  batch.inputs = inputs;
  batch.targets = targets;
  if (!lengths.is_none()) batch.lengths = lengths.cast<torch::Tensor>();
  if (!resets.is_none()) batch.resets = resets.cast<torch::Tensor>();
  Workload workload{model, head, batch, state_from(h0), Reduction::kMean};
  workload.final_state_grad = state_from(final_state_grad);
  workload.loss_scale = loss_scale;
  workload.reduction = input_error([&] { return reduction_from_string(reduction); });
  input_error([&] { return validated(workload); });
  return workload;
}

std::shared_ptr<GradientMethod> method_from_spec(const std::string& spec) {
  return input_error([&] { return std::shared_ptr<GradientMethod>(make_method_from_spec(spec)); });
}

// `method` is kept by the caller across calls: what a method learns about a workload (the
// planner's cost model and plan) is then learned once, as in `vlrnn compare`.
py::dict compute(GradientMethod& method, RecurrentModule& model, OutputModule& head,
                 const torch::Tensor& inputs, const torch::Tensor& targets,
                 const py::object& lengths, const py::object& h0, const std::string& reduction,
                 const py::object& progress, double progress_interval,
                 const py::object& final_state_grad, const py::object& resets,
                 double loss_scale) {
  const Workload workload = workload_from(model, head, inputs, targets, lengths, h0, reduction,
                                          final_state_grad, resets, loss_scale);
  GradientResult result;
  {
    std::optional<PythonProgress> sink;
    if (!progress.is_none()) sink.emplace(progress.cast<py::function>(), progress_interval);
    const ScopedProgressSink reporting(sink ? &*sink : nullptr);
    py::gil_scoped_release release;  // the engine runs without it; callbacks take it
    result = method.compute(workload);
  }
  py::dict out;
  out["loss"] = result.loss;
  out["step_losses"] = result.step_losses;  // [T, B]
  out["final_state"] = result.final_state.tensors();
  py::dict counters;
  counters["forward_with_grad"] = result.counters.forward_with_grad;
  counters["forward_no_grad"] = result.counters.forward_no_grad;
  counters["backward"] = result.counters.backward;
  out["counters"] = counters;
  out["method"] = method.describe();
  return out;
}

py::dict outcome_dict(const verify::VerifyOutcome& outcome) {
  py::dict row;
  row["case"] = outcome.spec.name();
  row["method"] = outcome.spec.method;
  row["max_abs"] = outcome.diff.max_abs;
  row["max_rel"] = outcome.diff.max_rel;
  row["worst"] = outcome.diff.worst;
  row["tolerance"] = outcome.tolerance;
  row["exact"] = outcome.exact;
  row["passed"] = outcome.passed;
  row["error"] = outcome.error;
  row["diagnosis"] = outcome.diagnosis;
  row["grad_rel_error"] = outcome.diff.grad_rel_error;
  row["grad_cosine"] = outcome.diff.grad_cosine;
  return row;
}

// The verifier turns a method's exception into an error row; a Ctrl-C in a callback must
// stop the whole call instead, so each method runs on its own and the flag is checked.
py::dict verify_methods(RecurrentModule& model, OutputModule& head, const torch::Tensor& inputs,
                        const torch::Tensor& targets, const py::object& lengths,
                        const py::object& h0, const std::string& reduction,
                        const std::vector<std::string>& specs, uint64_t seed,
                        const std::string& label, const std::string& head_label,
                        const py::object& resets) {
  for (const auto& spec : specs) input_error([&] { return make_method_from_spec(spec); });
  const Workload workload =
      workload_from(model, head, inputs, targets, lengths, h0, reduction, py::none(), resets);
  interrupted() = false;
  verify::VerifyModelOptions options;
  options.h0 = workload.h0;
  options.reduction = workload.reduction;
  options.seed = seed;
  options.label = label;
  std::vector<verify::VerifyOutcome> outcomes;
  for (const auto& spec : specs) {
    std::vector<verify::VerifyOutcome> one;
    {
      py::gil_scoped_release release;
      one = verify::verify_model(model, head, workload.batch, {spec}, options);
    }
    if (interrupted().exchange(false)) {
      PyErr_SetNone(PyExc_KeyboardInterrupt);
      throw py::error_already_set();
    }
    for (auto& outcome : one) outcome.spec.head = head_label;  // not the C++ wrapper's name
    outcomes.insert(outcomes.end(), one.begin(), one.end());
  }
  // Once per module, as `vlrnn verify --model-file` does: does it draw its random numbers per
  // call, which passes on this CPU build but not on a GPU (NOTE [ Cut dependence, whatever
  // the generator's layout ])? A module that raises shows in its rows instead.
  std::string warning;
  try {
    py::gil_scoped_release release;
    warning = verify::per_call_draws_warning(verify::measure_cut_dependence(workload, seed),
                                             verify::tolerance_for(inputs.scalar_type()));
  } catch (const std::exception&) {
  }
  if (interrupted().exchange(false)) {
    PyErr_SetNone(PyExc_KeyboardInterrupt);
    throw py::error_already_set();
  }
  py::list rows;
  for (const auto& outcome : outcomes) rows.append(outcome_dict(outcome));
  std::ostringstream table;
  verify::print_table(table, outcomes);
  py::dict out;
  out["rows"] = rows;
  out["table"] = table.str();
  out["summary"] = verify::summary_line(outcomes);
  out["warning"] = warning;
  return out;
}

// The cut-dependence check of `vlrnn verify` (NOTE [ Cut dependence, whatever the
// generator's layout ]) on its own: VLRNN's first-call check runs it on a short prefix.
py::dict cut_dependence(RecurrentModule& model, OutputModule& head, const torch::Tensor& inputs,
                        const torch::Tensor& targets, const py::object& lengths,
                        const py::object& h0, uint64_t seed) {
  const Workload workload = workload_from(model, head, inputs, targets, lengths, h0, "sum");
  verify::CutDependence cut;
  {
    py::gil_scoped_release release;
    cut = verify::measure_cut_dependence(workload, seed);
  }
  const double tolerance = verify::tolerance_for(inputs.scalar_type());
  py::dict out;
  out["cut"] = cut.cut;
  out["here"] = cut.here;
  out["any_layout"] = cut.any_layout;
  out["random_ops"] = cut.random_ops;
  out["diagnosis"] = verify::cut_dependence_diagnosis(cut, inputs.size(0), tolerance);
  out["warning"] = verify::per_call_draws_warning(cut, tolerance);
  return out;
}

py::list named_parameters(const torch::nn::Module& module) {
  py::list out;
  for (const auto& p : module.named_parameters()) out.append(py::make_tuple(p.key(), p.value()));
  return out;
}

// NOTE [ Plugins from Python ]: a plugin's vlrnn_register_plugin() calls add_model /
// add_method, which it leaves for the host to define (NOTE [ Plugins ] in
// vlrnn/registry/plugins.h). Python loads this extension with RTLD_LOCAL, so its
// symbols are first made global; then the plugin's calls reach this extension's registries.
void load_plugin_globally(const std::string& path) {
  Dl_info self;
  if (dladdr(reinterpret_cast<void*>(&load_plugin_globally), &self) != 0 && self.dli_fname) {
    dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
  }
  input_error([&] { vlrnn::load_plugin(path, "path"); return 0; });
}

torch::Tensor optional_tensor(const py::object& tensor) {
  return tensor.is_none() ? torch::Tensor() : tensor.cast<torch::Tensor>();
}

}  // namespace
}  // namespace vlrnn::python

PYBIND11_MODULE(_C, m) {
  namespace py = pybind11;
  using namespace vlrnn;
  using namespace vlrnn::python;
  m.doc() = "VLRNN's engine (the compiled half of the `vlrnn` package; call `vlrnn`, not this)";

  // NOTE [ Errors from C++ in Python ]
  py::register_exception_translator([](std::exception_ptr error) {
    try {
      if (error) std::rethrow_exception(error);
    } catch (const InputError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const c10::ValueError& e) {
      PyErr_SetString(PyExc_ValueError, e.what_without_backtrace());
    } catch (const c10::TypeError& e) {
      PyErr_SetString(PyExc_TypeError, e.what_without_backtrace());
    } catch (const c10::IndexError& e) {
      PyErr_SetString(PyExc_IndexError, e.what_without_backtrace());
    } catch (const c10::Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what_without_backtrace());
    }
  });

  py::class_<RecurrentModule, std::shared_ptr<RecurrentModule>>(m, "RecurrentModule")
      .def_property_readonly("input_size", &RecurrentModule::input_size)
      .def_property_readonly("output_size", &RecurrentModule::output_size)
      .def("describe", &RecurrentModule::describe)
      .def("named_parameters", [](const RecurrentModule& self) { return named_parameters(self); })
      .def("train", [](RecurrentModule& self, bool on) { self.train(on); }, py::arg("mode") = true)
      .def("state_shapes", [](const RecurrentModule& self, int64_t batch) {
        std::vector<std::vector<int64_t>> shapes;
        for (const auto& spec : self.state_spec()) shapes.push_back(spec.shape_for_batch(batch));
        return shapes;
      })
      .def("state_batch_dims", [](const RecurrentModule& self) {
        std::vector<int64_t> dims;
        for (const auto& spec : self.state_spec()) dims.push_back(spec.batch_dim);
        return dims;
      })
      // torch::nn::Module::to replaces each tensor's data in place (set_data), so the
      // Python objects of named_parameters() follow the move.
      .def("to_like", [](RecurrentModule& self, const torch::Tensor& like) {
        self.to(like.device(), like.scalar_type());
      }, py::arg("like"), "moves the module's own tensors to like's device and dtype, in place")
      .def("forward",
           [](RecurrentModule& self, const torch::Tensor& x, const std::vector<torch::Tensor>& state,
              const py::object& lengths) {
             auto [z, exit] = self.forward(x, State(state), optional_tensor(lengths));
             return std::make_pair(z, exit.tensors());
           },
           py::arg("x"), py::arg("state"), py::arg("lengths") = py::none(),
           "x [T, B, F], the state in the model's layout, lengths [B] or None -> (z, state)")
      .def("initial_state", [](const RecurrentModule& self, int64_t batch, const torch::Tensor& like) {
        return self.initial_state(batch, like.options().requires_grad(false)).tensors();
      }, py::arg("batch"), py::arg("like"), "zeros for `batch` sequences, with `like`'s dtype");
  py::class_<PythonModel, RecurrentModule, std::shared_ptr<PythonModel>>(m, "PythonModel")
      .def(py::init<py::function, int64_t, int64_t, const std::vector<std::vector<int64_t>>&,
                    int64_t, const NamedTensors&, std::string>(),
           py::arg("block"), py::arg("input_size"), py::arg("output_size"),
           py::arg("state_shapes"), py::arg("batch_dim"), py::arg("parameters"),
           py::arg("description"));
  // A C++ model of a bidirectional kind comes to Python as this class (pybind11 finds the
  // most derived registered type), so the Python layer can tell it apart from a left-to-right
  // model; built from Python, its directions are usually PythonModels (vlrnn/_bidirectional.py).
  py::class_<Bidirectional, RecurrentModule, std::shared_ptr<Bidirectional>>(m, "Bidirectional")
      .def(py::init([](const std::vector<Bidirectional::Directions>& layers, double dropout) {
             return input_error([&] { return std::make_shared<Bidirectional>(layers, dropout); });
           }),
           py::arg("layers"), py::arg("dropout") = 0.0,
           "One (forward, backward) pair of left-to-right models per layer, dropout between "
           "layers (vlrnn/core/bidirectional.h)")
      .def_property_readonly("num_layers", &Bidirectional::num_layers);
  py::class_<OutputModule, std::shared_ptr<OutputModule>>(m, "OutputModule")
      .def("named_parameters", [](const OutputModule& self) { return named_parameters(self); });
  py::class_<PythonHead, OutputModule, std::shared_ptr<PythonHead>>(m, "PythonHead")
      .def(py::init<py::function, int64_t, const NamedTensors&>(), py::arg("head"),
           py::arg("input_size"), py::arg("parameters"));

  py::class_<GradientMethod, std::shared_ptr<GradientMethod>>(m, "GradientMethod")
      .def_property_readonly("name", &GradientMethod::name)
      .def("describe", &GradientMethod::describe)
      .def("is_exact", &GradientMethod::is_exact);
  m.def("set_interrupt_lost", [](bool lost) { return interrupt_lost().exchange(lost); },
        py::arg("lost"),
        "Sets whether a Ctrl-C was lost in a finalizer (the next callback then raises "
        "KeyboardInterrupt); returns what it was");
  m.def("handles_bidirectional", &handles_bidirectional, py::arg("name"),
        "Whether the method `name` computes gradients for a bidirectional model");
  m.def("handles_left_to_right", &handles_left_to_right, py::arg("name"),
        "Whether the method `name` computes gradients for a left-to-right model");
  m.def("make_method", &method_from_spec, py::arg("spec"), warnings_in_python,
        "A gradient method from a registry spec ('vlrnn:block_length=64'); ValueError if unknown.");
  m.def("compute", &compute, warnings_in_python, py::arg("method"), py::arg("model"),
        py::arg("head"),
        py::arg("inputs"), py::arg("targets"), py::arg("lengths"), py::arg("h0"),
        py::arg("reduction"), py::arg("progress") = py::none(),
        py::arg("progress_interval") = 0.25, py::arg("final_state_grad") = py::none(),
        py::arg("resets") = py::none(), py::arg("loss_scale") = 1.0,
        "Runs a gradient method (a registry spec) on time-major inputs [T, B, F]; "
        "accumulates .grad and returns the detached loss, per-step losses [T, B], the final "
        "state and the step counters. progress: None, or a callable told the schedule's "
        "size and then its advance, at most every progress_interval seconds (NOTE "
        "[ Progress of a long call ]). final_state_grad: None, or dL/d(final state) from a "
        "later consumer, in the engine's state layout, back-propagated with the loss. resets: "
        "None, or a [T, B] bool mask, true where a sequence starts a new segment from its "
        "initial state (NOTE [ Resets ]). loss_scale: the gradients are loss_scale times "
        "the loss's, the loss returned unscaled (NOTE [ Loss scale ]).");
  m.def("tolerance_for",
        [](const torch::Tensor& like) { return verify::tolerance_for(like.scalar_type()); },
        py::arg("like"),
        "The relative tolerance vlrnn verify holds a result of `like`'s dtype to (1e-10 in "
        "float64, 1e-5 in float32, 4 eps in bfloat16 and float16)");
  m.def("verify", &verify_methods, warnings_in_python, py::arg("model"), py::arg("head"),
        py::arg("inputs"),
        py::arg("targets"), py::arg("lengths"), py::arg("h0"), py::arg("reduction"),
        py::arg("methods"), py::arg("seed"), py::arg("label"), py::arg("head_label"),
        py::arg("resets") = py::none());
  m.def("cut_dependence", &cut_dependence, warnings_in_python, py::arg("model"), py::arg("head"),
        py::arg("inputs"), py::arg("targets"), py::arg("lengths"), py::arg("h0"),
        py::arg("seed"),
        "Whether the model's outputs depend on where the sequence is cut: {cut, here, "
        "any_layout, random_ops, diagnosis, warning} (vlrnn/verify/cut_dependence.h)");
  bind_online_stream(m);
  m.def("methods", [] {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& entry : method_registry()) out.emplace_back(entry.name, entry.summary);
    return out;
  });
  // The built-in C++ models and heads, for measuring the same method from C++ beside a
  // Python module (scripts/bench_python.py) and for verifying them from Python.
  m.def("make_model", [](const std::string& kind, int64_t input_size, int64_t hidden_size,
                         int64_t num_layers, double dropout) {
    return input_error([&] {
      return make_model({kind, input_size, hidden_size, num_layers, dropout});
    });
  }, warnings_in_python, py::arg("kind"), py::arg("input_size"), py::arg("hidden_size"),
     py::arg("num_layers") = 1, py::arg("dropout") = 0.0);
  m.def("model_kinds", &model_kinds);
  m.def("thread_pools_warning", &measure::thread_pools_warning, "One line when LibTorch's intra-op threads and the BLAS's own threads together exceed the "
     "cores (NOTE [ Two pools never share the cores ] in vlrnn/measure/threads.h); \"\" if not");
  m.def("blas_info", [] {
    const auto blas = measure::detect_blas();
    return std::map<std::string, std::string>{
        {"vendor", blas.vendor}, {"loaded", blas.loaded}, {"core", blas.core},
        {"faster_core", blas.faster_core}, {"warning", measure::blas_warning(blas)}};
  }, "The BLAS LibTorch calls in this process: vendor, loaded (its file), core (OpenBLAS's "
     "kernel), faster_core (a faster kernel OpenBLAS has for this processor, to set in "
     "OPENBLAS_CORETYPE before torch loads; \"\" if none) and warning (\"\" if none)");
  m.def("onednn_lstm_inference_agrees", &onednn_lstm_inference_agrees, warnings_in_python,
        "Whether oneDNN's LSTM computes under no-grad what it computes training, on this "
        "processor (NOTE [ oneDNN's LSTM inference, checked ]); where not, VLRNN's gradient "
        "methods and vlrnn.nn.LSTM run LSTMs without oneDNN");
  // NOTE [ Float32 without TF32 ]: `with _C.ExactFloat32():` around what checks exactness.
  struct ExactFloat32Scope {
    std::optional<ExactFloat32> guard;
  };
  py::class_<ExactFloat32Scope>(m, "ExactFloat32",
                                "TF32 off for cuDNN and cuBLAS inside `with`, as before after")
      .def(py::init<>())
      .def("__enter__", [](ExactFloat32Scope& self) { self.guard.emplace(); })
      .def("__exit__", [](ExactFloat32Scope& self, const py::args&) { self.guard.reset(); });
  m.def("load_plugin", &load_plugin_globally, py::arg("path"),
        "dlopens a plugin and runs its vlrnn_register_plugin() (NOTE [ Plugins from Python ])");
  m.def("make_head", [](const std::string& kind, int64_t input_size, int64_t outputs) {
    return input_error([&] { return make_head(kind, input_size, outputs); });
  }, py::arg("kind"), py::arg("input_size"), py::arg("outputs"));
  m.def("load_model_file", [](const std::string& path) -> std::shared_ptr<RecurrentModule> {
    return input_error([&] { return ScriptModel::load(path); });
  }, py::arg("path"));

  // Exact bytes of live CPU tensors (the tracking allocator `vlrnn compare` measures with),
  // for Python peers measured side by side with the engine (scripts/bench_python.py).
  auto memory = m.def_submodule("memory", "Exact bytes of live CPU tensors");
  memory.def("install", [] { measure::CpuMemoryTracker::instance().install(); });
  memory.def("current_bytes", [] { return measure::CpuMemoryTracker::instance().current_bytes(); });
  memory.def("peak_bytes", [] { return measure::CpuMemoryTracker::instance().peak_bytes(); });
  memory.def("reset_peak", [] { return measure::CpuMemoryTracker::instance().reset_peak(); });

  // The hand-written cells over a Python module's own tensors (vlrnn/nn.py): the tensors are
  // shared, so gradients reach the module's parameters.
  py::class_<BlockRnn, RecurrentModule, std::shared_ptr<BlockRnn>>(m, "BlockRnn")
      .def("forward_with_masks",
           [](BlockRnn& self, const torch::Tensor& x, const std::vector<torch::Tensor>& state,
              const py::object& lengths, const py::object& masks) {
             const auto lengths_tensor = optional_tensor(lengths);
             const auto masks_tensor = optional_tensor(masks);
             py::gil_scoped_release release;
             auto [z, exit] =
                 self.forward_with_masks(x, State(state), lengths_tensor, masks_tensor);
             return std::make_pair(z, exit.tensors());
           },
           py::arg("x"), py::arg("state"), py::arg("lengths") = py::none(),
           py::arg("masks") = py::none(),
           "forward with the dropout masks between layers given: [T, L-1, B, H], scaled, "
           "or None");
  m.def("block_rnn",
        [](const std::string& cell, const std::vector<std::vector<torch::Tensor>>& layers,
           double dropout) -> std::shared_ptr<BlockRnn> {
          return input_error([&]() -> std::shared_ptr<BlockRnn> {
            if (cell == "lstm") return std::make_shared<LstmBlock>(layers, dropout);
            return std::make_shared<GruBlock>(gru_variant_from_string(cell), layers, dropout);
          });
        },
        warnings_in_python, py::arg("cell"), py::arg("layers"), py::arg("dropout") = 0.0,
        "The hand-written cell 'lstm' or a GRU variant 'v1'..'v4' over layers[l] = (w_ih, "
        "w_hh, b_ih, b_hh) or (w_ih, w_hh), shared: a model of state S x [L, B, H].");
}
