//===- JsonReaderTest.cpp - Located JSON errors ---------------------------===//

#include "compiler/Import/JsonReader.h"

#include <gtest/gtest.h>

using namespace partita;
using json = nlohmann::json;

namespace {

std::string messages(ErrorList &errors) {
  std::string text;
  llvm::handleAllErrors(errors.takeError(), [&](const llvm::ErrorInfoBase &e) {
    text = e.message();
  });
  return text;
}

TEST(JsonReader, PointsAtTheField) {
  json doc = json::parse(R"({"model": {"hidden_size": "4096"}})");
  ErrorList errors;
  ObjectReader root(doc, "spec.json", "", errors);
  std::optional<ObjectReader> model =
      root.object("model", ObjectReader::Required);
  ASSERT_TRUE(model);
  EXPECT_FALSE(model->integer("hidden_size", ObjectReader::Required));
  EXPECT_EQ(messages(errors), "spec.json: /model/hidden_size: expected an "
                              "integer, got string \"4096\"");
}

TEST(JsonReader, EscapesPointerTokens) {
  EXPECT_EQ(escapeJsonPointerToken("a/b~c"), "a~1b~0c");
}

TEST(JsonReader, IntegerRangesAndWholeFloats) {
  json doc = json::parse(R"({"a": 8.0, "b": 8.5, "c": 0, "d": 1e300})");
  ErrorList errors;
  ObjectReader r(doc, "f.json", "", errors);
  EXPECT_EQ(r.integer("a", ObjectReader::Required), 8);
  EXPECT_FALSE(r.integer("b", ObjectReader::Required));
  EXPECT_FALSE(r.integer("c", ObjectReader::Required));
  EXPECT_FALSE(r.integer("d", ObjectReader::Required));
  std::string text = messages(errors);
  EXPECT_NE(text.find("f.json: /b: expected an integer, got number 8.5"),
            std::string::npos);
  EXPECT_NE(text.find("f.json: /c: must be at least 1, got 0"),
            std::string::npos);
  EXPECT_NE(text.find("f.json: /d: expected an integer"), std::string::npos);
}

TEST(JsonReader, NullCountsAsAbsent) {
  json doc = json::parse(R"({"n_inner": null})");
  ErrorList errors;
  ObjectReader r(doc, "config.json", "", errors);
  EXPECT_FALSE(r.integer("n_inner", ObjectReader::Optional));
  EXPECT_TRUE(errors.empty());
  EXPECT_FALSE(r.integer("n_inner", ObjectReader::Required));
  EXPECT_EQ(messages(errors),
            "config.json: /n_inner: required field is missing");
}

TEST(JsonReader, SuggestsTheKeyMeant) {
  json doc = json::parse(R"({"hiden_size": 64, "zzz": 1})");
  ErrorList errors;
  ObjectReader r(doc, "spec.json", "", errors);
  r.integer("hidden_size", ObjectReader::Optional);
  r.rejectUnknownKeys();
  std::string text = messages(errors);
  EXPECT_NE(text.find("spec.json: /hiden_size: unknown field; did you mean "
                      "\"hidden_size\"?"),
            std::string::npos);
  // A key far from every known one gets no suggestion.
  EXPECT_TRUE(llvm::StringRef(text).ends_with("spec.json: /zzz: unknown field"))
      << text;
}

TEST(JsonReader, RejectsEmptyBinaryAndMalformedText) {
  ErrorList errors;
  EXPECT_FALSE(parseJsonDocument("  \n", "e.json", errors));
  EXPECT_EQ(messages(errors),
            "e.json: the file is empty; expected a JSON object");
  EXPECT_FALSE(parseJsonDocument(llvm::StringRef("{\0}", 3), "b.json", errors));
  EXPECT_NE(messages(errors).find("b.json: not a text file (NUL byte at "
                                  "offset 1)"),
            std::string::npos);
  EXPECT_FALSE(parseJsonDocument("{\"a\": 1,,}", "m.json", errors));
  EXPECT_NE(messages(errors).find("m.json: invalid JSON: parse error at line "
                                  "1, column 9"),
            std::string::npos);
}

} // namespace
