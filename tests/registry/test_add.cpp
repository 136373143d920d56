#include "test_util.h"

#include <cstdlib>

namespace vlrnn {
namespace {

using testing::expect_error_mentions;

// add_method / add_model change the process-wide registries, which the verifier and the
// other tests list: each addition runs in a child process (a death test) so none leaks.
TEST(RegistryDeathTest, AddedMethodIsFoundByNameAndSpec) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        add_method("my_full", "full BPTT under another name", [](MethodParams p) {
          p.finish("my_full", {});
          return make_method("full");
        });
        const auto names = method_names();
        const bool listed = names.back() == "my_full" && names.front() == "full";
        std::exit(listed && make_method_from_spec("my_full")->name() == "full" ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(RegistryDeathTest, AddedModelIsBuiltByKind) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        add_model("my_lstm", "an LSTM under another name", [](const ModelConfig& c) {
          return make_model({"lstm", c.input_size, c.hidden_size, c.num_layers});
        });
        const auto model = make_model({"my_lstm", 3, 5});
        std::exit(model_kinds().back() == "my_lstm" && model->output_size() == 5 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(Registry, AddRejectsATakenOrMalformedName) {
  const auto full = [](MethodParams) { return make_method("full"); };
  expect_error_mentions([&] { add_method("vlrnn", "", full); },
                        {"add_method", "vlrnn", "already registered", "full"});
  expect_error_mentions([&] { add_method("a:b", "", full); }, {"add_method name", "a:b"});
  expect_error_mentions(
      [] { add_model("gru", "", [](const ModelConfig& c) { return make_model({"lstm"}); }); },
      {"add_model", "gru", "already registered", "lstm"});
  expect_error_mentions([] { add_model("x", "", nullptr); }, {"add_model make", "x"});
}

}  // namespace
}  // namespace vlrnn
