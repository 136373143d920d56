// The IndRNN cell of examples/indrnn.h as a plugin for the stock `vlrnn` tool:
//   build/vlrnn verify --plugin build/examples/indrnn_plugin.so --model indrnn
//   build/vlrnn compare --plugin build/examples/indrnn_plugin.so --model indrnn --T 512
// The tool dlopens the library and calls this one function (NOTE [ Plugins ] in
// vlrnn/registry/plugins.h); it may add models and methods alike.
#include "indrnn.h"

// --- README plugin begin ---
extern "C" void vlrnn_register_plugin() {
  vlrnn::add_model("indrnn", "IndRNN (examples/indrnn.h), from a plugin",
                   [](const vlrnn::ModelConfig& c) {
                     return std::make_shared<IndRnn>(c.input_size, c.hidden_size);
                   });
}
// --- README plugin end ---
