// Graphs on the emulated device: torch.accelerator.Graph's implementation for PrivateUse1 (a GraphImplInterface).
// Capture records each device op (the op and its arguments, or an own kernel's step) on the capturing thread;
// replay re-runs the recorded steps from C++, on the captured tensors: it reads what the captured inputs hold now
// and writes the captured outputs (an op that allocates its result writes into the result captured for it).
// The graph holds every tensor its steps use, so memory allocated during capture stays valid while it lives.
// What a real device cannot capture fails the capture with the device's error: host-fallback ops, host syncs,
// copies between the host and the device, and the ops the spec's capture_refused names.
#include "graphs.h"
#include "emu_speed.h"

#include <ATen/core/GraphImplInterface.h>
#include <ATen/native/Copy.h>
#include <ATen/ops/copy_native.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace bringup_emu {
namespace {

struct GraphConfig {
  std::vector<bool> enabled;  // per device; a device past the end has graphs on
  std::unordered_set<std::string> capture_refused;
  std::unordered_map<std::string, double> replay_wrong;
};

std::mutex g_graph_config_mutex;
GraphConfig g_graph_config;
std::atomic<uint64_t> g_next_pool{1};

std::string graph_op_key(const c10::OperatorName& name) {
  return name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
}

// the spec's spellings of an aten op: "name" (every overload) and "name.overload" ("name.default" when unnamed)
std::pair<std::string, std::string> graph_spec_names(const c10::OperatorName& name) {
  const std::string prefix = "aten::";
  if (name.name.rfind(prefix, 0) != 0) {
    return {"", ""};
  }
  const std::string bare = name.name.substr(prefix.size());
  return {bare, bare + "." + (name.overload_name.empty() ? "default" : name.overload_name)};
}

bool graph_refuses(const c10::OperatorName& name) {
  const auto [bare, exact] = graph_spec_names(name);
  std::lock_guard<std::mutex> lock(g_graph_config_mutex);
  const auto& refused = g_graph_config.capture_refused;
  return !bare.empty() && (refused.count(bare) > 0 || refused.count(exact) > 0);
}

double graph_replay_factor(const c10::OperatorName& name) {
  const auto [bare, exact] = graph_spec_names(name);
  std::lock_guard<std::mutex> lock(g_graph_config_mutex);
  const auto& wrong = g_graph_config.replay_wrong;
  auto found = wrong.find(exact);
  if (found == wrong.end()) {
    found = wrong.find(bare);
  }
  return found == wrong.end() ? 1.0 : found->second;
}

bool graph_enabled_on(c10::DeviceIndex device) {
  std::lock_guard<std::mutex> lock(g_graph_config_mutex);
  const auto index = static_cast<size_t>(device);
  return index >= g_graph_config.enabled.size() || g_graph_config.enabled[index];
}

bool graph_returns_view(const c10::FunctionSchema& schema) {
  for (const auto& ret : schema.returns()) {
    if (ret.alias_info() != nullptr && !ret.alias_info()->isWrite()) {
      return true;
    }
  }
  return false;
}

bool graph_has_device_work(const c10::FunctionSchema& schema) {
  for (const auto& argument : schema.arguments()) {
    if (argument.alias_info() != nullptr && argument.alias_info()->isWrite()) {
      return true;
    }
  }
  for (const auto& ret : schema.returns()) {
    const auto kind = ret.type()->kind();
    if (kind == c10::TypeKind::TensorType || kind == c10::TypeKind::ListType) {
      return true;
    }
  }
  return false;
}

// a tensor argument as the graph keeps it: its own TensorImpl over the same storage, so later changes to the
// caller's tensor object (sizes, set_) do not move what the graph reads, as a real graph's addresses do not move
c10::IValue graph_pin(const c10::IValue& value) {
  if (value.isTensor()) {
    const auto& t = value.toTensor();
    return is_emu(t) ? c10::IValue(emu_view_of(t.storage(), t)) : value;
  }
  if (value.isTensorList()) {
    c10::List<at::Tensor> pinned;
    for (const auto& t : value.toTensorVector()) {
      pinned.push_back(is_emu(t) ? emu_view_of(t.storage(), t) : t);
    }
    return c10::IValue(pinned);
  }
  if (value.isOptionalTensorList()) {
    c10::List<std::optional<at::Tensor>> pinned;
    for (const auto& t : value.toOptionalTensorVector()) {
      pinned.push_back(t.has_value() && is_emu(*t) ? std::optional<at::Tensor>(emu_view_of(t->storage(), *t)) : t);
    }
    return c10::IValue(pinned);
  }
  return value;
}

void graph_copy_tensor(const at::Tensor& source, const at::Tensor& target) {
  if (source.sizes() == target.sizes() && source.strides() == target.strides() &&
      source.scalar_type() == target.scalar_type() && source.is_non_overlapping_and_dense()) {
    const size_t nbytes = static_cast<size_t>(source.numel()) * source.element_size();
    if (nbytes > 0 && source.const_data_ptr() != target.const_data_ptr()) {
      std::memcpy(target.mutable_data_ptr(), source.const_data_ptr(), nbytes);
    }
    return;
  }
  auto target_alias = cpu_alias_of(target);
  at::native::copy_(target_alias, cpu_alias_of(source), false);
}

void graph_copy_value(const c10::IValue& source, const c10::IValue& target) {
  if (source.isTensor() && target.isTensor()) {
    graph_copy_tensor(source.toTensor(), target.toTensor());
  } else if (source.isTensorList() && target.isTensorList()) {
    const auto sources = source.toTensorVector();
    const auto targets = target.toTensorVector();
    for (size_t i = 0; i < sources.size() && i < targets.size(); ++i) {
      graph_copy_tensor(sources[i], targets[i]);
    }
  }
}

// one recorded op of the boxed kernel: replay runs it on the pinned arguments and puts its results where the
// captured results are
struct BoxedStep {
  c10::OperatorHandle op;
  std::vector<c10::IValue> inputs;
  std::vector<c10::IValue> outputs;
  std::vector<bool> fresh;  // per result: allocated by the op, so replay copies it into the captured result
  OpRule rule;
  double replay_factor;

  void operator()() const {
    const PacedOp paced(current_device());  // a slow device replays as slowly as it runs eagerly
    torch::jit::Stack stack(inputs.begin(), inputs.end());
    run_on_host_aliases(op, &stack);
    if (rule.scaled) {
      scale_floating_returns(op, &stack, rule.scale);
    }
    const size_t begin = stack.size() - outputs.size();
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (fresh[i]) {
        graph_copy_value(stack[begin + i], outputs[i]);
      }
    }
    if (replay_factor != 1.0) {
      torch::jit::Stack captured(outputs.begin(), outputs.end());
      scale_floating_returns(op, &captured, replay_factor);
    }
  }
};

struct Step {
  std::string op;
  std::function<void()> run;
};

class EmuGraph;
thread_local EmuGraph* t_capturing = nullptr;

class EmuGraph final : public at::GraphImplInterface {
 public:
  explicit EmuGraph(const at::GraphImplArgs& /*args*/) {}

  ~EmuGraph() override {
    if (t_capturing == this) {
      t_capturing = nullptr;
    }
  }

  void capture_begin(c10::MempoolId_t pool, at::GraphCaptureMode /*mode*/) override {
    const auto device = current_device();
    TORCH_CHECK(t_capturing == nullptr, "emu: a graph capture is already open on this thread (end it first)");
    TORCH_CHECK(!captured_, "emu: this graph is already captured; reset() it before capturing again");
    TORCH_CHECK(graph_enabled_on(device), "emu: graphs are not supported on emu:", static_cast<int>(device),
                " (devices[", static_cast<int>(device), "].graphs is false in the spec)");
    pool_ = (pool.first == 0 && pool.second == 0) ? c10::MempoolId_t{g_next_pool++, 0} : pool;
    device_ = device;
    failure_.clear();
    steps_.clear();
    t_capturing = this;
  }

  void capture_end() override {
    TORCH_CHECK(t_capturing == this, "emu: capture_end without capture_begin on this thread");
    t_capturing = nullptr;
    if (!failure_.empty()) {
      steps_.clear();
      TORCH_CHECK(false, "emu: the graph capture was invalidated: ", failure_);
    }
    captured_ = true;
  }

  void instantiate() override {
    TORCH_CHECK(captured_, "emu: instantiate before the graph was captured");
  }

  void replay() override {
    TORCH_CHECK(captured_, "emu: replay before the graph was captured (capture_begin ... capture_end first)");
    TORCH_CHECK(t_capturing == nullptr, "emu: a graph cannot be replayed while this thread captures one");
    struct Restore {
      c10::DeviceIndex previous = current_device();
      ~Restore() {
        set_current_device(previous);
      }
    } restore;
    set_current_device(device_);
    for (const auto& step : steps_) {
      step.run();
    }
  }

  void reset() override {
    TORCH_CHECK(t_capturing != this, "emu: reset during capture (end the capture first)");
    steps_.clear();
    captured_ = false;
    failure_.clear();
  }

  c10::MempoolId_t pool() const override {
    return pool_;
  }

  void enable_debug_mode() override {
    debug_ = true;
  }

  void debug_dump(const std::string& path) override {
    TORCH_CHECK(debug_, "emu: call enable_debug_mode() before capture to dump the graph");
    std::ofstream out(path);
    TORCH_CHECK(out.good(), "emu: cannot write the graph dump to ", path);
    for (const auto& step : steps_) {
      out << step.op << "\n";
    }
  }

  [[noreturn]] void fail(const std::string& reason) {
    if (failure_.empty()) {
      failure_ = reason;
    }
    TORCH_CHECK(false, "emu: ", reason);
  }

  void record(std::string op, std::function<void()> run) {
    steps_.push_back({std::move(op), std::move(run)});
  }

 private:
  std::vector<Step> steps_;
  c10::MempoolId_t pool_{0, 0};
  c10::DeviceIndex device_ = 0;
  std::string failure_;
  bool captured_ = false;
  bool debug_ = false;
};

std::unique_ptr<at::GraphImplInterface> make_emu_graph(const at::GraphImplArgs& args) {
  return std::make_unique<EmuGraph>(args);
}

} // namespace

bool graph_capturing() {
  return t_capturing != nullptr;
}

void refuse_capture(const std::string& op, const std::string& why) {
  TORCH_CHECK(t_capturing != nullptr, "emu: refuse_capture outside a capture");
  t_capturing->fail("graph capture refused " + op + ": " + why);
}

void record_graph_step(const std::string& op, std::function<void()> step) {
  t_capturing->record(op, std::move(step));
}

void capture_boxed_op(const c10::OperatorHandle& op, torch::jit::Stack* stack, const OpRule& rule) {
  const auto& name = op.schema().operator_name();
  if (!rule.native) {
    refuse_capture(graph_op_key(name),
                   "the op runs through the host fallback on this device (not in the spec's native list), and a "
                   "graph cannot capture host work");
  }
  if (graph_refuses(name)) {
    refuse_capture(graph_op_key(name), "capture_refused in the spec names it");
  }
  count_native(name);
  const auto& schema = op.schema();
  if (graph_returns_view(schema) || !graph_has_device_work(schema)) {
    run_on_host_aliases(op, stack);  // a view or a metadata query: nothing for the device to redo
    return;
  }
  const size_t arguments = schema.arguments().size();
  std::vector<c10::IValue> held(stack->end() - static_cast<std::ptrdiff_t>(arguments), stack->end());
  run_on_host_aliases(op, stack);
  if (rule.scaled) {
    scale_floating_returns(op, stack, rule.scale);
  }
  BoxedStep step{op, {}, {}, {}, rule, graph_replay_factor(name)};
  for (const auto& value : held) {
    step.inputs.push_back(graph_pin(value));  // after the op ran: a resized out= argument is pinned at its size
  }
  const size_t returns = schema.returns().size();
  for (size_t i = 0; i < returns; ++i) {
    const auto& ret = schema.returns()[i];
    step.outputs.push_back((*stack)[stack->size() - returns + i]);
    step.fresh.push_back(ret.alias_info() == nullptr);
  }
  record_graph_step(graph_op_key(name), std::move(step));
}

void configure_graphs(
    const std::vector<bool>& enabled_per_device,
    const std::vector<std::string>& capture_refused,
    const std::map<std::string, double>& replay_wrong) {
  std::lock_guard<std::mutex> lock(g_graph_config_mutex);
  g_graph_config.enabled = enabled_per_device;
  g_graph_config.capture_refused = {capture_refused.begin(), capture_refused.end()};
  g_graph_config.replay_wrong = {replay_wrong.begin(), replay_wrong.end()};
}

void register_graph_impl() {
  const auto key = c10::DeviceTypeName(kEmu, /*lower_case=*/false);
  if (!at::GraphImplRegistry()->Has(key)) {
    at::GraphImplRegistry()->Register(key, &make_emu_graph);
  }
}

} // namespace bringup_emu
