#include "test_util.h"

#include "vlrnn/registry/registry.h"

namespace vlrnn {
namespace {

using testing::expect_error_mentions;

// An entry whose key is named neither `kind` nor `name`: the template reads whichever
// member it is given.
struct GreetingEntry {
  std::string word;
  std::string summary;
  std::function<std::string(const std::string&)> make;
};
using GreetingRegistry = Registry<GreetingEntry, &GreetingEntry::word>;

int greeting_builtins_calls = 0;  // how often builtin_greetings ran; each test resets it

std::vector<GreetingEntry> builtin_greetings() {
  ++greeting_builtins_calls;
  return {
      {"hello", "hello, someone", [](const std::string& who) { return "hello, " + who; }},
      {"hi", "hi, someone", [](const std::string& who) { return "hi, " + who; }},
  };
}

constexpr RegistryWords kGreetingWords{"greeting", "word", "greeting"};

TEST(RegistryTemplate, BuiltInsComeOnFirstUseOnceAndFirst) {
  greeting_builtins_calls = 0;
  GreetingRegistry greetings(kGreetingWords, builtin_greetings);
  EXPECT_EQ(greeting_builtins_calls, 0);  // not when made
  greetings.add({"hey", "hey, someone", [](const std::string& who) { return "hey, " + who; }});
  EXPECT_EQ(greeting_builtins_calls, 1);  // an add comes after them
  EXPECT_EQ(greetings.keys(), (std::vector<std::string>{"hello", "hi", "hey"}));
  EXPECT_EQ(greetings.entries().size(), 3u);
  EXPECT_EQ(greetings.entries()[2].summary, "hey, someone");
  EXPECT_EQ(greeting_builtins_calls, 1);
}

TEST(RegistryTemplate, FindsAndBuildsByKey) {
  GreetingRegistry greetings(kGreetingWords, builtin_greetings);
  EXPECT_EQ(greetings.at("hi").make("you"), "hi, you");
  ASSERT_NE(greetings.find("hello"), nullptr);
  EXPECT_EQ(greetings.find("hello")->make("world"), "hello, world");
  EXPECT_EQ(greetings.find("howdy"), nullptr);
}

TEST(RegistryTemplate, UnknownKeyListsTheKnownOnesInItsWords) {
  GreetingRegistry greetings(kGreetingWords, builtin_greetings);
  expect_error_mentions([&] { greetings.at("howdy"); },
                        {"greeting: unknown word \"howdy\"; known greetings: hello, hi"});
}

TEST(RegistryTemplate, AddRejectsATakenEmptyOrFactorylessKey) {
  GreetingRegistry greetings(kGreetingWords, builtin_greetings);
  const auto echo = [](const std::string& who) { return who; };
  expect_error_mentions([&] { greetings.add({"hi", "", echo}); },
                        {"add_greeting word: \"hi\" is already registered; known greetings: "
                         "hello, hi"});
  expect_error_mentions([&] { greetings.add({"", "", echo}); },
                        {"add_greeting word: expected a non-empty name, got \"\""});
  expect_error_mentions([&] { greetings.add({"yo", "", nullptr}); },
                        {"add_greeting make: expected a factory for greeting \"yo\", got none"});
  EXPECT_EQ(greetings.keys(), (std::vector<std::string>{"hello", "hi"}));  // none was added
}

}  // namespace
}  // namespace vlrnn
