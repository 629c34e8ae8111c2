//===- JsonReader.h - JSON documents with located errors --------*- C++ -*-===//
//
// Every problem found in a user's JSON file is reported as
// "FILE: /json/pointer: what is wrong". The readers here check types and
// ranges field by field, collect every problem rather than stopping at the
// first, and catch misspelt keys.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_COMPILER_IMPORT_JSONREADER_H
#define PARTITA_COMPILER_IMPORT_JSONREADER_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace partita {

/// Collects located error messages.
class ErrorList {
public:
  /// `where` is "FILE: /pointer" (or a flag name) as made by ObjectReader.
  void add(const std::string &where, const llvm::Twine &message);
  bool empty() const { return messages.empty(); }
  /// All messages, one per line, as an llvm::Error (success if none).
  llvm::Error takeError();

private:
  std::vector<std::string> messages;
};

/// The contents of a file; a failure is reported against `path`.
std::optional<std::string> readFileText(llvm::StringRef path,
                                        ErrorList &errors);

/// Parses `text` as one JSON document. Empty, binary and malformed input are
/// reported against `fileName`; returns nullopt then.
std::optional<nlohmann::json> parseJsonDocument(llvm::StringRef text,
                                                llvm::StringRef fileName,
                                                ErrorList &errors);

/// As parseJsonDocument, and the document must be an object.
std::optional<nlohmann::json> parseJsonObject(llvm::StringRef text,
                                              llvm::StringRef fileName,
                                              ErrorList &errors);

/// Escapes a key for use in a JSON pointer (RFC 6901).
std::string escapeJsonPointerToken(llvm::StringRef key);

/// Reads the fields of one JSON object.
class ObjectReader {
public:
  enum Need { Required, Optional };

  ObjectReader(const nlohmann::json &object, std::string fileName,
               std::string pointer, ErrorList &errors);

  /// "FILE: /pointer/key", the location of a field in messages.
  std::string where(llvm::StringRef key) const;
  std::string where() const;

  /// True when the key is present and not null (null counts as absent, as
  /// in Hugging Face configs).
  bool has(llvm::StringRef key);
  /// True when the key is present with the value null.
  bool isNull(llvm::StringRef key);

  /// The typed accessors return nullopt when the field is absent (an error
  /// if Required) or invalid (always an error).
  std::optional<int64_t> integer(llvm::StringRef key, Need need,
                                 int64_t min = 1, int64_t max = INT64_MAX);
  std::optional<double> number(llvm::StringRef key, Need need,
                               double min = -1e308, double max = 1e308,
                               bool minExclusive = false,
                               bool maxExclusive = false);
  std::optional<bool> boolean(llvm::StringRef key, Need need);
  std::optional<std::string> string(llvm::StringRef key, Need need);
  /// A string that must be one of `choices`.
  std::optional<std::string> oneOf(llvm::StringRef key, Need need,
                                   llvm::ArrayRef<llvm::StringRef> choices);
  std::optional<ObjectReader> object(llvm::StringRef key, Need need);
  /// An array each of whose elements is one of `choices` (HF
  /// "layer_types"); each wrong element is reported at its index.
  std::optional<std::vector<std::string>>
  eachOneOf(llvm::StringRef key, Need need,
            llvm::ArrayRef<llvm::StringRef> choices);
  /// A non-empty array of finite numbers above 0 (LongRoPE's factors);
  /// each wrong element is reported at its index.
  std::optional<std::vector<double>> positiveNumbers(llvm::StringRef key,
                                                     Need need);
  /// The first element of an array of strings (HF "architectures").
  std::optional<std::string> firstString(llvm::StringRef key, Need need);

  /// Reports every key that no accessor asked for, suggesting the closest
  /// known key when one is near.
  void rejectUnknownKeys(llvm::ArrayRef<llvm::StringRef> alsoKnown = {});

  ErrorList &errors() { return *errorList; }
  const std::string &fileName() const { return file; }

private:
  const nlohmann::json *lookup(llvm::StringRef key, Need need);
  void typeError(llvm::StringRef key, llvm::StringRef expected,
                 const nlohmann::json &value);
  /// The array at `key` (`arrayOf` names what it must be in messages),
  /// each element read by `element(value, location)`, which reports its own
  /// problem and returns nullopt; nullopt if anything was wrong.
  template <typename T, typename ElementFn>
  std::optional<std::vector<T>> eachElement(llvm::StringRef key, Need need,
                                            llvm::StringRef arrayOf,
                                            bool nonEmpty, ElementFn element);

  const nlohmann::json *obj; // a pointer so that readers can be reassigned
  std::string file;
  std::string pointer;
  ErrorList *errorList;
  llvm::StringSet<> asked;
};

/// A short description of a JSON value for messages: `string "abc"`,
/// `number 1.5`, `object`, ...
std::string describeJsonValue(const nlohmann::json &value);

} // namespace partita

#endif // PARTITA_COMPILER_IMPORT_JSONREADER_H
