#include "stepscope/runtime/device_set.h"

#include <algorithm>
#include <string>

#include "stepscope/base/error.h"
#include "stepscope/graph/kernel_context.h"

namespace stepscope {

namespace {

// "<type>:<index>" of a canonical name, or an empty type when it is not one.
struct ParsedName {
  std::string_view type;
  int index = -1;
};

ParsedName parse(std::string_view name) {
  constexpr std::string_view kPrefix = "/job:localhost/replica:0/task:0/device:";
  if (!name.starts_with(kPrefix)) return {};
  name.remove_prefix(kPrefix.size());
  const size_t colon = name.find(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == name.size() || name.size() - colon > 10) return {};
  int index = 0;
  for (char c : name.substr(colon + 1)) {
    if (c < '0' || c > '9') return {};
    index = index * 10 + (c - '0');
  }
  return {name.substr(0, colon), index};
}

}  // namespace

DeviceSet::DeviceSet() { host_ = add(std::make_unique<CpuDevice>(0)); }

DeviceSet::~DeviceSet() = default;

Device* DeviceSet::add(std::unique_ptr<Device> device) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& d : devices_)
    if (d->name() == device->name()) throw InvalidArgumentError("device " + device->name() + " is already registered");
  return devices_.emplace_back(std::move(device)).get();
}

Device* DeviceSet::find(std::string_view canonical_name) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& d : devices_)
    if (d->name() == canonical_name) return d.get();
  const ParsedName parsed = parse(canonical_name);
  if (parsed.type != "CPU") return nullptr;
  return devices_.emplace_back(std::make_unique<CpuDevice>(parsed.index)).get();
}

Device* DeviceSet::device_for(const Node& node, std::string_view canonical_name) {
  if (Device* d = find(canonical_name)) return d;
  const ParsedName parsed = parse(canonical_name);
  std::string registered;
  for (const Device* d : devices()) registered += (registered.empty() ? "" : ", ") + d->name();
  const std::string what = parsed.type.empty() ? std::string("device") : std::string(parsed.type) + " device";
  throw InvalidArgumentError(node_error_message(node, "cannot place the node on " + std::string(canonical_name) +
                                                          ": no " + what +
                                                          " is registered (registered devices: " + registered + ")"));
}

std::vector<const Device*> DeviceSet::devices() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<const Device*> out;
  for (const auto& d : devices_) out.push_back(d.get());
  return out;
}

}  // namespace stepscope
