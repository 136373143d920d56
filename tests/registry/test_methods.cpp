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
  EXPECT_EQ(make_method_from_spec("vlrnn:block=64")->describe(), "vlrnn(K=64)");
  EXPECT_EQ(make_method_from_spec("vlrnn:blocks=8")->describe(), "vlrnn(N=8)");
}

TEST(Registry, UnknownOptionIsNamed) {
  expect_error_mentions([] { make_method_from_spec("vlrnn:blok=64"); },
                        {"vlrnn", "blok", "known options: block, blocks"});
  expect_error_mentions([] { make_method_from_spec("full:block=3"); }, {"full", "block"});
}

TEST(Registry, MalformedSpecIsExplained) {
  expect_error_mentions([] { make_method_from_spec("vlrnn:block"); }, {"key=value", "block"});
  expect_error_mentions([] { make_method_from_spec("vlrnn:block=abc"); }, {"integer", "abc"});
}

}  // namespace
}  // namespace vlrnn
