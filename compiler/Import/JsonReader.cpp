//===- JsonReader.cpp - Reading JSON documents with located errors --------===//

#include "compiler/Import/JsonReader.h"

#include "support/Format.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/ConvertUTF.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>
#include <cstdio>
#include <optional>
#include <set>
#include <vector>

using json = nlohmann::json;
using llvm::StringRef;

namespace partita {

void ErrorList::add(const std::string &where, const llvm::Twine &message) {
  messages.push_back(where + ": " + message.str());
}

llvm::Error ErrorList::takeError() {
  if (messages.empty())
    return llvm::Error::success();
  std::string joined = llvm::join(messages, "\n");
  messages.clear();
  return llvm::createStringError(llvm::inconvertibleErrorCode(), joined);
}

std::string escapeJsonPointerToken(StringRef key) {
  std::string out;
  for (char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

std::string describeJsonValue(const json &value) {
  switch (value.type()) {
  case json::value_t::null:
    return "null";
  case json::value_t::boolean:
    return value.get<bool>() ? "true" : "false";
  case json::value_t::string: {
    std::string s = value.get<std::string>();
    if (s.size() > 40)
      s = s.substr(0, 40) + "...";
    return "string \"" + s + "\"";
  }
  case json::value_t::number_integer:
  case json::value_t::number_unsigned:
  case json::value_t::number_float:
    return "number " + value.dump();
  case json::value_t::object:
    return "an object";
  case json::value_t::array:
    return "an array";
  default:
    return "an unsupported value";
  }
}

std::optional<std::string> readFileText(StringRef path, ErrorList &errors) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer) {
    errors.add(path.str(), "cannot read file: " + buffer.getError().message());
    return std::nullopt;
  }
  return (*buffer)->getBuffer().str();
}

std::optional<json> parseJsonDocument(StringRef text, StringRef fileName,
                                      ErrorList &errors) {
  std::string file = fileName.str();
  if (text.trim().empty()) {
    errors.add(file, "the file is empty; expected a JSON object");
    return std::nullopt;
  }
  if (size_t nul = text.find('\0'); nul != StringRef::npos) {
    errors.add(file, "not a text file (NUL byte at offset " + llvm::Twine(nul) +
                         "); expected a JSON object");
    return std::nullopt;
  }
  const auto *utf8 = reinterpret_cast<const llvm::UTF8 *>(text.begin());
  if (!llvm::isLegalUTF8String(
          &utf8, reinterpret_cast<const llvm::UTF8 *>(text.end()))) {
    errors.add(file, "not valid UTF-8 text; expected a JSON object");
    return std::nullopt;
  }
  // JSON leaves a repeated key to the parser, which keeps the last: one
  // of two settings would be dropped unseen. Track where the parser is,
  // as a JSON pointer, to name the first repeat.
  struct Level {
    bool array = false;
    int64_t index = -1;
    std::string key;
    std::set<std::string> keys;
  };
  std::vector<Level> levels;
  std::optional<std::string> repeated;
  auto pointer = [&](StringRef last) {
    std::string p;
    for (size_t i = 0; i + 1 < levels.size(); ++i)
      p += "/" + (levels[i].array ? std::to_string(levels[i].index)
                                  : escapeJsonPointerToken(levels[i].key));
    return p + "/" + escapeJsonPointerToken(last);
  };
  auto track = [&](int, json::parse_event_t event, json &parsed) {
    using E = json::parse_event_t;
    bool opens = event == E::object_start || event == E::array_start;
    if ((opens || event == E::value) && !levels.empty() && levels.back().array)
      ++levels.back().index;
    if (opens)
      levels.push_back({event == E::array_start});
    else if (event == E::object_end || event == E::array_end)
      levels.pop_back();
    else if (event == E::key) {
      Level &top = levels.back();
      top.key = parsed.get<std::string>();
      if (!top.keys.insert(top.key).second && !repeated)
        repeated = pointer(top.key);
    }
    return true;
  };
  try {
    json doc = json::parse(text.begin(), text.end(), track);
    if (repeated) {
      errors.add(file + ": " + *repeated,
                 "the key appears twice in its object; JSON keeps only the "
                 "last, so give it once");
      return std::nullopt;
    }
    return doc;
  } catch (const json::exception &e) {
    // nlohmann's messages read "[json.exception.parse_error.101] parse error
    // at line 3, column 5: ..."; keep the part a user needs.
    StringRef message(e.what());
    if (size_t close = message.find("] "); close != StringRef::npos)
      message = message.drop_front(close + 2);
    errors.add(file, "invalid JSON: " + message);
    return std::nullopt;
  }
}

std::optional<json> parseJsonObject(StringRef text, StringRef fileName,
                                    ErrorList &errors) {
  std::optional<json> doc = parseJsonDocument(text, fileName, errors);
  if (doc && !doc->is_object()) {
    errors.add(fileName.str() + ": /",
               "expected a JSON object, got " + describeJsonValue(*doc));
    return std::nullopt;
  }
  return doc;
}

ObjectReader::ObjectReader(const json &object, std::string fileName,
                           std::string pointer, ErrorList &errors)
    : obj(&object), file(std::move(fileName)), pointer(std::move(pointer)),
      errorList(&errors) {}

std::string ObjectReader::where() const {
  return file + ": " + (pointer.empty() ? std::string("/") : pointer);
}

std::string ObjectReader::where(StringRef key) const {
  return file + ": " + pointer + "/" + escapeJsonPointerToken(key);
}

bool ObjectReader::has(StringRef key) {
  asked.insert(key);
  auto it = obj->find(key.str());
  return it != obj->end() && !it->is_null();
}

bool ObjectReader::isNull(StringRef key) {
  asked.insert(key);
  auto it = obj->find(key.str());
  return it != obj->end() && it->is_null();
}

const json *ObjectReader::lookup(StringRef key, Need need) {
  asked.insert(key);
  auto it = obj->find(key.str());
  if (it == obj->end() || it->is_null()) {
    if (need == Required)
      errorList->add(where(key), "required field is missing");
    return nullptr;
  }
  return &*it;
}

void ObjectReader::typeError(StringRef key, StringRef expected,
                             const json &value) {
  errorList->add(where(key),
                 "expected " + expected + ", got " + describeJsonValue(value));
}

std::optional<int64_t> ObjectReader::integer(StringRef key, Need need,
                                             int64_t min, int64_t max) {
  const json *value = lookup(key, need);
  if (!value)
    return std::nullopt;
  // Accept 4096 and 4096.0, but not 4096.5 or 1e300.
  std::optional<int64_t> result;
  if (value->is_number_integer() && !value->is_number_unsigned()) {
    result = value->get<int64_t>();
  } else if (value->is_number_unsigned()) {
    uint64_t u = value->get<uint64_t>();
    if (u <= static_cast<uint64_t>(INT64_MAX))
      result = static_cast<int64_t>(u);
  } else if (value->is_number_float()) {
    double d = value->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15)
      result = static_cast<int64_t>(d);
  }
  if (!result) {
    typeError(key, "an integer", *value);
    return std::nullopt;
  }
  if (*result < min || *result > max) {
    std::string range = max == INT64_MAX ? "at least " + std::to_string(min)
                                         : "between " + std::to_string(min) +
                                               " and " + std::to_string(max);
    errorList->add(where(key),
                   "must be " + range + ", got " + std::to_string(*result));
    return std::nullopt;
  }
  return result;
}

std::optional<double> ObjectReader::number(StringRef key, Need need, double min,
                                           double max, bool minExclusive,
                                           bool maxExclusive) {
  const json *value = lookup(key, need);
  if (!value)
    return std::nullopt;
  if (!value->is_number()) {
    typeError(key, "a number", *value);
    return std::nullopt;
  }
  double d = value->get<double>();
  bool belowMin = minExclusive ? !(d > min) : !(d >= min);
  bool aboveMax = maxExclusive ? !(d < max) : !(d <= max);
  if (!std::isfinite(d) || belowMin || aboveMax) {
    errorList->add(where(key),
                   "must be " + llvm::Twine(minExclusive ? "> " : ">= ") +
                       formatNumber(min) + " and " +
                       (maxExclusive ? "< " : "<= ") + formatNumber(max) +
                       ", got " + value->dump());
    return std::nullopt;
  }
  return d;
}

std::optional<bool> ObjectReader::boolean(StringRef key, Need need) {
  const json *value = lookup(key, need);
  if (!value)
    return std::nullopt;
  if (!value->is_boolean()) {
    typeError(key, "true or false", *value);
    return std::nullopt;
  }
  return value->get<bool>();
}

std::optional<std::string> ObjectReader::string(StringRef key, Need need) {
  const json *value = lookup(key, need);
  if (!value)
    return std::nullopt;
  if (!value->is_string()) {
    typeError(key, "a string", *value);
    return std::nullopt;
  }
  return value->get<std::string>();
}

/// What a message says of `value`, which is none of `choices`.
static std::string unknownValue(StringRef value,
                                llvm::ArrayRef<StringRef> choices) {
  std::string list;
  for (StringRef choice : choices)
    list += (list.empty() ? "\"" : ", \"") + choice.str() + "\"";
  return "unknown value \"" + value.str() + "\"; expected one of " + list;
}

std::optional<std::string>
ObjectReader::oneOf(StringRef key, Need need,
                    llvm::ArrayRef<StringRef> choices) {
  std::optional<std::string> value = string(key, need);
  if (!value)
    return std::nullopt;
  if (llvm::is_contained(choices, StringRef(*value)))
    return value;
  errorList->add(where(key), unknownValue(*value, choices));
  return std::nullopt;
}

template <typename T, typename ElementFn>
std::optional<std::vector<T>>
ObjectReader::eachElement(StringRef key, Need need, StringRef arrayOf,
                          bool nonEmpty, ElementFn element) {
  const json *value = lookup(key, need);
  if (!value)
    return std::nullopt;
  if (!value->is_array()) {
    typeError(key, arrayOf, *value);
    return std::nullopt;
  }
  if (nonEmpty && value->empty()) {
    errorList->add(where(key), "must not be empty");
    return std::nullopt;
  }
  std::vector<T> result;
  bool ok = true;
  for (size_t i = 0; i < value->size(); ++i) {
    std::optional<T> v =
        element((*value)[i], where(key) + "/" + std::to_string(i));
    ok &= v.has_value();
    if (v)
      result.push_back(std::move(*v));
  }
  if (!ok)
    return std::nullopt;
  return result;
}

std::optional<std::vector<std::string>>
ObjectReader::eachOneOf(StringRef key, Need need,
                        llvm::ArrayRef<StringRef> choices) {
  return eachElement<std::string>(
      key, need, "an array of strings", /*nonEmpty=*/false,
      [&](const json &element,
          const std::string &at) -> std::optional<std::string> {
        if (!element.is_string()) {
          errorList->add(at, "expected a string, got " +
                                 describeJsonValue(element));
          return std::nullopt;
        }
        std::string s = element.get<std::string>();
        if (!llvm::is_contained(choices, StringRef(s))) {
          errorList->add(at, unknownValue(s, choices));
          return std::nullopt;
        }
        return s;
      });
}

std::optional<std::vector<double>> ObjectReader::positiveNumbers(StringRef key,
                                                                 Need need) {
  return eachElement<double>(
      key, need, "an array of numbers", /*nonEmpty=*/true,
      [&](const json &element, const std::string &at) -> std::optional<double> {
        if (!element.is_number()) {
          errorList->add(at, "expected a number, got " +
                                 describeJsonValue(element));
          return std::nullopt;
        }
        double d = element.get<double>();
        if (!std::isfinite(d) || !(d > 0)) {
          errorList->add(at, "must be > 0, got " + element.dump());
          return std::nullopt;
        }
        return d;
      });
}

std::optional<ObjectReader> ObjectReader::object(StringRef key, Need need) {
  const json *value = lookup(key, need);
  if (!value)
    return std::nullopt;
  if (!value->is_object()) {
    typeError(key, "an object", *value);
    return std::nullopt;
  }
  return ObjectReader(*value, file, pointer + "/" + escapeJsonPointerToken(key),
                      *errorList);
}

std::optional<std::string> ObjectReader::firstString(StringRef key, Need need) {
  const json *value = lookup(key, need);
  if (!value)
    return std::nullopt;
  if (!value->is_array() || value->empty() || !(*value)[0].is_string()) {
    typeError(key, "a non-empty array of strings", *value);
    return std::nullopt;
  }
  return (*value)[0].get<std::string>();
}

void ObjectReader::rejectUnknownKeys(llvm::ArrayRef<StringRef> alsoKnown) {
  for (auto it = obj->begin(); it != obj->end(); ++it) {
    StringRef key = it.key();
    if (asked.contains(key) || llvm::is_contained(alsoKnown, key))
      continue;
    std::string message = "unknown field";
    StringRef best;
    unsigned bestDistance = 3; // suggest only near misses
    for (const auto &known : asked) {
      unsigned distance = key.edit_distance(known.getKey(), true, bestDistance);
      if (distance < bestDistance) {
        bestDistance = distance;
        best = known.getKey();
      }
    }
    if (!best.empty())
      message += "; did you mean \"" + best.str() + "\"?";
    errorList->add(where(key), message);
  }
}

} // namespace partita
