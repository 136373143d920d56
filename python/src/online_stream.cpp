#include "online_stream.h"
#include "python_warnings.h"

#include "vlrnn/core/output_module.h"
#include "vlrnn/core/recurrent_module.h"
#include "vlrnn/schedule/online_stream.h"

#include <memory>

namespace vlrnn::python {
namespace {

namespace py = pybind11;

State state_or_empty(const py::object& tensors) {
  if (tensors.is_none()) return {};
  return State(tensors.cast<std::vector<torch::Tensor>>());
}

// The stream with the model and head it runs, kept alive as long as it is.
struct StreamOnModules {
  std::shared_ptr<RecurrentModule> model;
  std::shared_ptr<OutputModule> head;
  std::unique_ptr<OnlineStream> stream;
};

}  // namespace

void bind_online_stream(py::module_& m) {
  py::class_<StreamOnModules>(m, "OnlineStream")
      .def(py::init([](std::shared_ptr<RecurrentModule> model, std::shared_ptr<OutputModule> head,
                       const std::string& reduction, int64_t slots, int64_t budget_bytes,
                       const py::object& h0) {
             auto self = std::make_unique<StreamOnModules>();
             self->model = std::move(model);
             self->head = std::move(head);
             self->stream = std::make_unique<OnlineStream>(
                 *self->model, *self->head,
                 OnlineOptions{}.with_slots(slots).with_budget_bytes(budget_bytes),
                 reduction_from_string(reduction), state_or_empty(h0));
             return self;
           }),
           warnings_in_python, py::arg("model"), py::arg("head"), py::arg("reduction"), py::arg("slots"),
           py::arg("budget_bytes"), py::arg("h0"),
           "A stream of unknown length: push(inputs [n, B, F], targets [n, B, ...]) chunks, "
           "then finish() (vlrnn/schedule/online_stream.h)")
      .def("push",
           [](StreamOnModules& self, const torch::Tensor& inputs, const torch::Tensor& targets) {
             py::gil_scoped_release release;  // the engine runs without it; callbacks take it
             self.stream->push(inputs, targets);
           },
           warnings_in_python, py::arg("inputs"), py::arg("targets"))
      .def("finish",
           [](StreamOnModules& self, const py::object& final_state_grad, double loss_scale) {
             const State seed = state_or_empty(final_state_grad);
             GradientResult result;
             {
               py::gil_scoped_release release;
               result = self.stream->finish(seed, loss_scale);
             }
             py::dict counters;
             counters["forward_with_grad"] = result.counters.forward_with_grad;
             counters["forward_no_grad"] = result.counters.forward_no_grad;
             counters["backward"] = result.counters.backward;
             py::dict out;
             out["loss"] = result.loss;
             out["step_losses"] = result.step_losses;  // [T, B]
             out["final_state"] = result.final_state.tensors();
             out["counters"] = counters;
             return out;
           },
           warnings_in_python, py::arg("final_state_grad") = py::none(),
           py::arg("loss_scale") = 1.0)
      .def_property_readonly("steps",
                             [](const StreamOnModules& self) { return self.stream->steps(); })
      .def_property_readonly("slots",
                             [](const StreamOnModules& self) { return self.stream->slots(); })
      .def_property_readonly("held_states",
                             [](const StreamOnModules& self) { return self.stream->held_states(); })
      .def_property_readonly("peak_held_states", [](const StreamOnModules& self) {
        return self.stream->peak_held_states();
      });
}

}  // namespace vlrnn::python
