#pragma once
// NOTE [ C++ warnings in Python ]: the library warns with TORCH_WARN (e.g. that oneDNN goes off
// for the process: NOTE [ oneDNN's LSTM inference, checked ]). Outside torch's own bindings
// that prints on stderr, where a Python user can neither filter it nor catch it with
// pytest.warns. A call that can warn runs under py::call_guard<PythonWarnings>: torch's own
// PyWarningHandler collects the call's warnings on this thread and issues each as a Python
// warning (UserWarning, "Triggered internally at ...") when the call returns, as torch's
// functions do. Under `-W error` the first becomes the exception the call raises. A call that
// throws keeps its exception; its warnings are issued beside it, never in its place.

#include <torch/csrc/Exceptions.h>
#include <torch/extension.h>

#include <exception>
#include <optional>

namespace vlrnn::python {

class PythonWarnings {
 public:
  PythonWarnings() = default;
  PythonWarnings(const PythonWarnings&) = delete;
  PythonWarnings& operator=(const PythonWarnings&) = delete;
  ~PythonWarnings() noexcept(false) {
    if (std::uncaught_exceptions() > 0) {
      handler_->set_in_exception();
      handler_.reset();
      return;
    }
    try {
      handler_.reset();  // issues the warnings; throws where a filter makes one an error
    } catch (const python_error&) {
      // Python's error is set: raise the warning's own exception, not a RuntimeError.
      throw pybind11::error_already_set();
    }
  }

 private:
  std::optional<torch::PyWarningHandler> handler_{std::in_place};
};

// The guard as a binding's extra argument: m.def("name", &f, warnings_in_python, ...).
inline const pybind11::call_guard<PythonWarnings> warnings_in_python{};

}  // namespace vlrnn::python
