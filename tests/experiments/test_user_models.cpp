// Models the tool did not ship with: plugins (load errors; the working plugin runs in ctest
// examples.plugin) and TorchScript model files registered as kinds.
#include "test_util.h"

#include "lib/problem.h"
#include "lib/user_models.h"

#include "vlrnn/core/script_model.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace vlrnn::experiments {
namespace {

using testing::expect_error_mentions;

TEST(LoadPlugin, NamesAMissingFile) {
  expect_error_mentions([] { load_plugin("/nonexistent/plugin.so"); },
                        {"--plugin", "/nonexistent/plugin.so", "does not exist",
                         "vlrnn_register_plugin"});
}

TEST(LoadPlugin, NamesAFileThatIsNoSharedLibrary) {
  const std::string path = VLRNN_SOURCE_DIR "/README.md";
  expect_error_mentions([&] { load_plugin(path, "VLRNN_PLUGINS"); },
                        {"VLRNN_PLUGINS", "cannot load plugin", "README.md"});
}

TEST(LoadPlugin, NamesAMissingEntryPoint) {
  Dl_info info{};  // libc: a shared library without the entry point
  ASSERT_NE(dladdr(reinterpret_cast<void*>(&std::printf), &info), 0);
  expect_error_mentions([&] { load_plugin(info.dli_fname); },
                        {"--plugin", "has no symbol vlrnn_register_plugin",
                         "extern \"C\" void vlrnn_register_plugin()"});
}

// A one-tensor tanh cell, F = H = 3, saved as a TorchScript file.
std::string save_cell(const std::string& name) {
  torch::jit::Module m("Cell");
  m.register_parameter("w", torch::randn({3, 3}).requires_grad_(true), false);
  m.register_attribute("input_size", c10::IntType::get(), int64_t(3));
  m.define(R"(
def initial_state(self, batch: int) -> Tuple[Tensor]:
    return (torch.zeros(batch, 3),)

def forward(self, x: Tensor, state: Tuple[Tensor], lengths: Tensor) -> Tuple[Tensor, Tuple[Tensor]]:
    h = state[0]
    zs = []
    for t in range(x.size(0)):
        valid = (lengths > t).unsqueeze(1)
        h_new = torch.tanh(torch.matmul(torch.where(valid, x[t], torch.zeros_like(x[t])), self.w) + h)
        h = torch.where(valid, h_new, h)
        zs.append(torch.where(valid, h_new, torch.zeros_like(h_new)))
    return torch.stack(zs), (h,)
)");
  const auto path = (std::filesystem::temp_directory_path() / name).string();
  m.save(path);
  return path;
}

// What the registration must do, checked in the child process of the test below.
void check_registration(const std::string& path) {
  const auto kind = add_model_file(path);
  EXPECT_EQ(kind, path);
  EXPECT_EQ(add_model_file(path), kind);  // a second call: the same kind, no error
  // The file fixes its sizes: the config's are ignored, and a problem takes the model's.
  ProblemSpec spec;
  spec.model = kind;
  spec.time_steps = 6;
  spec.batch = 2;
  const auto problem = make_problem(spec);
  EXPECT_EQ(problem.spec.input_size, 3);
  EXPECT_EQ(problem.spec.hidden_size, 3);
  EXPECT_EQ(problem.batch.inputs.size(2), 3);
  EXPECT_NE(dynamic_cast<ScriptModel*>(problem.model.get()), nullptr);
}

// A registration is global and cannot be undone, and the random verification cases draw
// from every registered kind: it runs in a child process (a death test re-running this
// binary), so the kind does not leak into the tests that follow.
TEST(AddModelFileDeathTest, RegistersTheFileAsAKindOnce) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto path = save_cell("vlrnn_test_user_models_cell.pt");
  EXPECT_EXIT(
      {
        check_registration(path);
        std::exit(::testing::Test::HasFailure() ? 1 : 0);
      },
      ::testing::ExitedWithCode(0), "");
  std::filesystem::remove(path);
}

TEST(AddModelFile, NamesTheArgumentAndTheFile) {
  expect_error_mentions([] { add_model_file("/nonexistent/cell.pt", "--model-file"); },
                        {"--model-file: model file \"/nonexistent/cell.pt\"", "cannot read"});
  expect_error_mentions([] { add_model_file(VLRNN_SOURCE_DIR "/README.md"); },
                        {"--model-file", "README.md", "torch::jit::load failed"});
}

}  // namespace
}  // namespace vlrnn::experiments
