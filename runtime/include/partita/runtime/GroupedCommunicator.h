//===- GroupedCommunicator.h - Handles for the plan's groups ----*- C++ -*-===//
//
// What every Communicator backend keeps of the plan's groups: this rank's
// communicator handle, the group's size and the rank's position in it, by
// group name. Backends split their world communicator with `splitGroups`.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_RUNTIME_GROUPEDCOMMUNICATOR_H
#define PARTITA_RUNTIME_GROUPEDCOMMUNICATOR_H

#include "partita/runtime/Communicator.h"
#include "partita/runtime/Plan.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace partita::runtime {

/// The group of `groups` holding world rank `rank` and its position there
/// (colour and key of a communicator split), or none.
inline std::optional<std::pair<int, int>>
membership(const std::vector<std::vector<int64_t>> &groups, int64_t rank) {
  for (size_t g = 0; g < groups.size(); ++g) {
    auto it = std::find(groups[g].begin(), groups[g].end(), rank);
    if (it != groups[g].end())
      return std::make_pair(int(g), int(it - groups[g].begin()));
  }
  return std::nullopt;
}

template <typename Handle> class GroupedCommunicator : public Communicator {
public:
  int64_t groupSize(const std::string &name) const override {
    return group(name).size;
  }
  int64_t groupRank(const std::string &name) const override {
    return group(name).rank;
  }

protected:
  struct Group {
    Handle comm{};
    int size = 1, rank = 0;
  };
  const Group &group(const std::string &name) const {
    auto it = groupsByName.find(name);
    if (it == groupsByName.end())
      const_cast<GroupedCommunicator *>(this)->abort(
          "the plan uses group \"" + name + "\", which has no member here");
    return it->second;
  }
  /// Splits the world communicator once per group name, in the same
  /// (sorted) order on every rank: `split(name, member)` gets this rank's
  /// colour and key, or none, and returns the handle a member keeps.
  template <typename Split>
  void splitGroups(const Plan &plan, int64_t rank, Split split) {
    for (const auto &[name, groups] : plan.groups) {
      std::optional<std::pair<int, int>> member = membership(groups, rank);
      Handle comm = split(name, member);
      if (member)
        groupsByName[name] = {comm, int(groups[member->first].size()),
                              member->second};
    }
  }
  /// Every group this rank belongs to, by name.
  std::map<std::string, Group> groupsByName;
};

} // namespace partita::runtime

#endif // PARTITA_RUNTIME_GROUPEDCOMMUNICATOR_H
