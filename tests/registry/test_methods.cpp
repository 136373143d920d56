#include "test_util.h"

namespace vlrnn {
namespace {

using testing::expect_error_mentions;

TEST(Registry, KnowsFullAndVlrnn) {
  auto names = method_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "full"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "vlrnn"), names.end());
  EXPECT_EQ(make_method("full")->name(), "full");
}

TEST(Registry, UnknownNameListsTheKnownOnes) {
  expect_error_mentions([] { make_method("magic"); }, {"method", "magic", "full", "vlrnn"});
}

TEST(Registry, SpecCarriesOptions) {
  EXPECT_EQ(make_method_from_spec("vlrnn:block_length=64")->describe(), "vlrnn(K=64)");
  EXPECT_EQ(make_method_from_spec("vlrnn:num_blocks=8")->describe(), "vlrnn(N=8)");
}

TEST(Registry, UnknownOptionIsNamed) {
  expect_error_mentions([] { make_method_from_spec("vlrnn:blok=64"); },
                        {"vlrnn", "blok", "known options: block_length, num_blocks"});
  expect_error_mentions([] { make_method_from_spec("full:block_length=3"); }, {"full", "block"});
}

// "block" and "blocks" said neither whether K was a length or a count: each is refused naming
// its new spelling, for both methods that take them.
TEST(Registry, OldBlockOptionsNameTheNewOnes) {
  for (const std::string method : {"vlrnn", "bivlrnn"}) {
    expect_error_mentions([&] { make_method_from_spec(method + ":block=64"); },
                          {method + ": option 'block' is now 'block_length' (a length in steps)"});
    expect_error_mentions([&] { make_method_from_spec(method + ":blocks=8"); },
                          {method + ": option 'blocks' is now 'num_blocks' (a count of blocks)"});
  }
  expect_error_mentions([] { make_method("vlrnn", {{"block", 16}}); }, {"'block_length'"});
}

TEST(Registry, MalformedSpecIsExplained) {
  expect_error_mentions([] { make_method_from_spec("vlrnn:block"); }, {"key=value", "block"});
  expect_error_mentions([] { make_method_from_spec("vlrnn:block_length=abc"); }, {"integer", "abc"});
}

}  // namespace
}  // namespace vlrnn
