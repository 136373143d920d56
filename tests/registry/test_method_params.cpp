#include "test_util.h"

#include "vlrnn/registry/method_params.h"

namespace vlrnn {
namespace {

using testing::expect_error_mentions;

TEST(MethodParams, ParsesANameAndIntegerOptions) {
  const auto bare = parse_method_spec("full");
  EXPECT_EQ(bare.name, "full");
  EXPECT_TRUE(bare.params.values().empty());
  const auto spec = parse_method_spec("tbptt:k1=8,k2=-16");
  EXPECT_EQ(spec.name, "tbptt");
  EXPECT_EQ(spec.params.values(), (std::map<std::string, int64_t>{{"k1", 8}, {"k2", -16}}));
}

TEST(MethodParams, BadOptionsNameTheSpecWhatWasExpectedAndWhatCame) {
  expect_error_mentions([] { parse_method_spec("vlrnn:"); }, {"vlrnn:", "key=value"});
  expect_error_mentions([] { parse_method_spec("vlrnn:=3"); }, {"key=value", "=3"});
  expect_error_mentions([] { parse_method_spec("vlrnn:block_length=3,"); }, {"key=value"});
  expect_error_mentions([] { parse_method_spec("vlrnn:block_length=3x"); }, {"block", "integer", "3x"});
  expect_error_mentions([] { parse_method_spec("vlrnn:block_length=99999999999999999999"); },
                        {"block", "integer", "99999999999999999999"});
}

TEST(MethodParams, FinishRejectsOptionsNoFactoryRead) {
  auto params = parse_method_spec("vlrnn:block_length=4,blok=5").params;
  EXPECT_EQ(params.take("block_length", 0), 4);
  EXPECT_EQ(params.take("num_blocks", 7), 7);
  expect_error_mentions([&] { params.finish("vlrnn", {"block_length", "num_blocks"}); },
                        {"vlrnn", "blok", "block_length, num_blocks"});
}

}  // namespace
}  // namespace vlrnn
