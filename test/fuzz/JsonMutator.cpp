//===- JsonMutator.cpp - Structure-aware mutations of JSON inputs --------===//
//
// LLVMFuzzerCustomMutator for the libFuzzer builds of the fuzz targets whose
// inputs are JSON documents (plans, topologies): byte-level mutations of
// such a document almost never parse, so this mutator edits one JSON value
// at a time (a number, a name, an array's elements, an object's keys).
//
//===----------------------------------------------------------------------===//

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t maxSize);

namespace {

/// Every value of a document, the root first, with the containers' values
/// after the container.
void collectValues(nlohmann::json &value, std::vector<nlohmann::json *> &out) {
  out.push_back(&value);
  if (value.is_structured())
    for (nlohmann::json &child : value)
      collectValues(child, out);
}

/// Replaces `target` by a value chosen to cross a check's boundary: one
/// already in the document (a name used elsewhere, another size), a
/// neighbour of it, an extreme, or a value of another type.
void mutateValue(nlohmann::json &target,
                 const std::vector<nlohmann::json *> &values,
                 std::minstd_rand &rng) {
  using json = nlohmann::json;
  auto pick = [&](size_t n) { return size_t(rng() % n); };
  auto sameKind = [&](auto predicate) -> const json * {
    for (int tries = 0; tries < 16; ++tries) {
      const json *other = values[pick(values.size())];
      if (predicate(*other))
        return other;
    }
    return nullptr;
  };
  switch (pick(8)) {
  case 0: // a number: a neighbour, an extreme or another of the document's
    if (target.is_number_integer()) {
      int64_t v = target.get<int64_t>();
      // Wrapping, as an extreme may be the value mutated next.
      auto wrapped = [](uint64_t w) { return int64_t(w); };
      const int64_t choices[] = {0,
                                 1,
                                 -1,
                                 wrapped(uint64_t(v) + 1),
                                 wrapped(uint64_t(v) - 1),
                                 wrapped(uint64_t(v) * 2),
                                 v / 2,
                                 int64_t(1) << 31,
                                 (int64_t(1) << 31) - 1,
                                 int64_t(1) << 32,
                                 int64_t(1) << 53,
                                 std::numeric_limits<int64_t>::max(),
                                 std::numeric_limits<int64_t>::min()};
      target = choices[pick(std::size(choices))];
      return;
    }
    if (target.is_number_float()) {
      const double choices[] = {0.0, -1.0, 1e-300, 1e-6,
                                0.5, 1e9,  1e300,  target.get<double>() * 2};
      target = choices[pick(std::size(choices))];
      return;
    }
    [[fallthrough]];
  case 1: // another value of the same type from the document
    if (const json *other = sameKind(
            [&](const json &v) { return v.type() == target.type(); })) {
      target = json(*other);
      return;
    }
    [[fallthrough]];
  case 2: // an array loses, repeats or swaps elements
    if (target.is_array() && !target.empty()) {
      size_t i = pick(target.size()), j = pick(target.size());
      switch (pick(3)) {
      case 0:
        target.erase(target.begin() + i);
        break;
      case 1:
        target.insert(target.begin() + i, json(target[j]));
        break;
      default:
        std::swap(target[i], target[j]);
      }
      return;
    }
    [[fallthrough]];
  case 3: // an object loses a key
    if (target.is_object() && !target.empty()) {
      auto it = target.begin();
      std::advance(it, pick(target.size()));
      target.erase(it);
      return;
    }
    [[fallthrough]];
  case 4: // a string grows or is emptied
    if (target.is_string()) {
      std::string s = target.get<std::string>();
      target = pick(2) ? s + "x" : std::string();
      return;
    }
    [[fallthrough]];
  case 5: // a copy of any other value of the document
    target = json(*values[pick(values.size())]);
    return;
  default: { // a value of another type
    const json choices[] = {nullptr,       true,           "x",
                            json::array(), json::object(), -1};
    target = choices[pick(std::size(choices))];
  }
  }
}

} // namespace

/// Edits one value of the JSON document in `data`, or its bytes now and
/// then and when it is not JSON.
extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size,
                                          size_t maxSize, unsigned seed) {
  using json = nlohmann::json;
  std::minstd_rand rng(seed);
  json doc = json::parse(data, data + size, nullptr,
                         /*allow_exceptions=*/false);
  // Now and then, and for inputs that are not JSON, bytes as libFuzzer
  // mutates them: the reader's JSON errors need inputs too.
  if (doc.is_discarded() || rng() % 32 == 0)
    return LLVMFuzzerMutate(data, size, maxSize);
  std::vector<json *> values;
  collectValues(doc, values);
  // Copies alias nothing: mutate a value the collection does not hold.
  json &target = *values[rng() % values.size()];
  json replacement = target;
  mutateValue(replacement, values, rng);
  target = std::move(replacement);
  std::string out = doc.dump();
  if (out.size() > maxSize)
    return LLVMFuzzerMutate(data, size, maxSize);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}
