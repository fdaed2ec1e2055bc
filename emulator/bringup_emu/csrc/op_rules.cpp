// Which ops run natively, abort or compute wrong numbers (from the spec), and how often each op ran natively or
// went through the CPU fallback. Rules name aten ops as "name" (every overload) or "name.overload"
// ("name.default" for the overload without a name).
#include "emu_ops.h"

#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace bringup_emu {
namespace {

struct Rules {
  std::unordered_set<std::string> native;
  std::unordered_set<std::string> abort;
  std::unordered_map<std::string, double> wrong;
};

std::mutex g_rules_mutex;
Rules g_rules;
std::unordered_map<c10::OperatorName, OpRule> g_cache;
std::map<std::string, int64_t> g_fallback_counts;
std::map<std::string, int64_t> g_native_counts;

bool matches(const std::unordered_set<std::string>& names, const std::string& bare, const std::string& exact) {
  return names.count(bare) > 0 || names.count(exact) > 0;
}

bool is_view_op(const c10::FunctionSchema& schema) {
  for (const auto& ret : schema.returns()) {
    if (ret.alias_info() != nullptr && !ret.alias_info()->isWrite()) {
      return true;
    }
  }
  return false;
}

OpRule compute_rule(const c10::OperatorHandle& op) {
  OpRule rule;
  const auto& name = op.schema().operator_name();
  // a view must share the device memory, which the CPU fallback cannot do: views always run on aliases
  rule.native = is_view_op(op.schema());
  const std::string prefix = "aten::";
  if (name.name.rfind(prefix, 0) != 0) {
    return rule;
  }
  const std::string bare = name.name.substr(prefix.size());
  const std::string exact = bare + "." + (name.overload_name.empty() ? "default" : name.overload_name);
  rule.native = rule.native || matches(g_rules.native, bare, exact);
  rule.abort = matches(g_rules.abort, bare, exact);
  auto found = g_rules.wrong.find(exact);
  if (found == g_rules.wrong.end()) {
    found = g_rules.wrong.find(bare);
  }
  if (found != g_rules.wrong.end()) {
    rule.scaled = true;
    rule.scale = found->second;
  }
  return rule;
}

std::string key_of(const c10::OperatorName& name) {
  return name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
}

} // namespace

void configure_op_rules(
    const std::vector<std::string>& native,
    const std::vector<std::string>& abort,
    const std::map<std::string, double>& wrong) {
  std::lock_guard<std::mutex> lock(g_rules_mutex);
  g_rules.native = {native.begin(), native.end()};
  g_rules.abort = {abort.begin(), abort.end()};
  g_rules.wrong = {wrong.begin(), wrong.end()};
  g_cache.clear();
}

OpRule rule_for(const c10::OperatorHandle& op) {
  std::lock_guard<std::mutex> lock(g_rules_mutex);
  const auto& name = op.schema().operator_name();
  auto found = g_cache.find(name);
  if (found == g_cache.end()) {
    found = g_cache.emplace(name, compute_rule(op)).first;
  }
  return found->second;
}

void count_fallback(const c10::OperatorName& name) {
  std::lock_guard<std::mutex> lock(g_rules_mutex);
  g_fallback_counts[key_of(name)]++;
}

void count_native(const c10::OperatorName& name) {
  std::lock_guard<std::mutex> lock(g_rules_mutex);
  g_native_counts[key_of(name)]++;
}

std::map<std::string, int64_t> fallback_counts() {
  std::lock_guard<std::mutex> lock(g_rules_mutex);
  return g_fallback_counts;
}

std::map<std::string, int64_t> native_counts() {
  std::lock_guard<std::mutex> lock(g_rules_mutex);
  return g_native_counts;
}

void reset_counts() {
  std::lock_guard<std::mutex> lock(g_rules_mutex);
  g_fallback_counts.clear();
  g_native_counts.clear();
}

} // namespace bringup_emu
