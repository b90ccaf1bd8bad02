// Taskflow<K>: a parametrized task graph (PTG). Tasks are named by keys K and described by
// functions of K: what to run (set_task), what to do after (set_fulfill), how many promises
// a task waits for (set_indegree), where it runs (set_mapping, set_binding), in which order
// (set_priority) and how it is called in diagnostics (set_name). fulfill_promise(k) may be
// called from any thread; the task is queued when its last promise arrives.
// fulfill_promises(keys) does the same for a range of keys (bulk insertion).
#pragma once

#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cascade/core/errors.hpp"
#include "cascade/core/key.hpp"
#include "cascade/core/observer.hpp"
#include "cascade/core/promise_table.hpp"
#include "cascade/core/task.hpp"
#include "cascade/core/threadpool.hpp"

namespace cascade {

/// A parametrized task graph over keys K (see the top of this file).
///
/// ```cpp
/// cascade::Threadpool tp(2);
/// cascade::Taskflow<int> tf(&tp, "chain");
/// tf.set_task([](int k) { std::printf("task %d\n", k); })
///   .set_fulfill([&](int k) { if (k < 9) tf.fulfill_promise(k + 1); })  // k -> k+1
///   .set_name([](int k) { return "step " + std::to_string(k); });
/// tf.fulfill_promise(0);  // seed
/// tp.join();              // ran 0, 1, ..., 9 in order
/// ```
template <class K>
class Taskflow : public detail::TaskflowBase {
    static_assert(sizeof(K) <= Task::payload_size - sizeof(void*) && alignof(K) <= 8 &&
                      std::is_trivially_destructible_v<K> && std::is_copy_constructible_v<K>,
                  "Taskflow<K>: K must be a small trivially destructible key (an integer, a "
                  "pointer, or a std::tuple/std::array of at most 40 bytes)");

  public:
    /// A task graph run by `tp`, named "tf" in diagnostics.
    explicit Taskflow(Threadpool* tp, int verb = 0) : Taskflow(tp, "tf", verb) {}
    /// A task graph run by `tp`, named `name` in diagnostics and traces. `verb` is accepted
    /// for TaskTorrent compatibility; diagnostics go through checked mode.
    Taskflow(Threadpool* tp, std::string name, [[maybe_unused]] int verb = 0)
        : tp_(tp), name_(std::move(name)), checked_(tp->checked()), table_(checked_) {
        tp_->attach(this);
        setup_observer();
        if (Observer* o = observer()) o->on_taskflow_created(&vtable_, &name_parts);
    }
    ~Taskflow() override {
        tp_->detach(this);
        // An observer names its recorded tasks through this Taskflow: now, while it lives.
        if (Observer* o = observer()) o->on_taskflow_destroyed(&vtable_, this);
    }
    Taskflow(const Taskflow&) = delete;
    Taskflow& operator=(const Taskflow&) = delete;

    /// The work of task k (required).
    Taskflow& set_task(std::function<void(K)> f) { return set(task_, std::move(f)); }
    /// Runs right after task k; fulfills the promises of its successors.
    Taskflow& set_fulfill(std::function<void(K)> f) { return set(fulfill_, std::move(f)); }
    /// How many fulfill_promise(k) calls make k ready (>= 1; default 1).
    Taskflow& set_indegree(std::function<int(K)> f) { return set(indegree_, std::move(f)); }
    /// The worker that runs k, in [0, tp.workers()) (default: the calling worker, else
    /// round-robin).
    Taskflow& set_mapping(std::function<int(K)> f) { return set(mapping_, std::move(f)); }
    /// true: only the mapped worker may run k (no stealing; default false).
    Taskflow& set_binding(std::function<bool(K)> f) { return set(binding_, std::move(f)); }
    /// Among a worker's ready tasks, higher runs first (default 0).
    Taskflow& set_priority(std::function<double(K)> f) { return set(priority_, std::move(f)); }
    /// The name of k in errors and traces (default "<taskflow>(<key>)").
    Taskflow& set_name(std::function<std::string(K)> f) { return set(task_name_, std::move(f)); }

    /// The name given to the constructor (errors, traces).
    const std::string& name() const noexcept { return name_; }
    /// The pool its tasks run on.
    Threadpool* threadpool() const noexcept { return tp_; }

    /// One promise of task k is fulfilled (any thread); when all indegree(k) are, k is
    /// queued. In checked mode a promise too many throws UsageError naming the task.
    void fulfill_promise(const K& k) { fulfill(k, false); }

    /// fulfill_promise for every key of a range (e.g. the sources of a graph), with one
    /// wake-up of sleeping workers at the end instead of one check per task.
    template <class Range>
    void fulfill_promises(const Range& keys) {
        struct Wake {
            Threadpool* tp;
            ~Wake() { tp->wake_workers(); }
        } wake{tp_};
        for (const auto& k : keys)
            fulfill(K(k), true);
    }

    /// The diagnostic name of task k, quoted: set_name(k) if given, else "<taskflow>(<key>)".
    std::string task_name(const K& k) const {
        // Built with append: GCC 12 warns falsely (-Wrestrict) on "'" + std::string chains.
        std::string s(1, '\'');
        if (task_name_) {
            s.append(task_name_(k));
        } else {
            std::string key = key_to_string(k);
            s.append(name_);
            if (key.empty() || key.front() != '(') {
                s.push_back('(');
                s.append(key).push_back(')');
            } else {
                s.append(key);
            }
        }
        s.push_back('\'');
        return s;
    }

    /// Tasks with some but not all promises fulfilled; up to `max_names` of them named.
    std::size_t pending(std::size_t max_names, std::vector<std::string>& names) const override {
        std::vector<std::pair<K, int>> keys;
        std::size_t n = table_.pending(max_names, keys);
        for (auto& [k, left] : keys)
            names.push_back(task_name(k) + " (" + std::to_string(left) + " of " +
                            std::to_string(indegree_ ? indegree_(k) : 1) + " missing)");
        return n;
    }

  private:
    void fulfill(const K& k, bool quiet) {
        if (!task_) throw UsageError("Taskflow '" + name_ + "': set_task was not called");
        Observer* const o = observer();
        if (o && o->wants_promises()) [[unlikely]] {  // an edge of the task graph (CASCADE_DAG)
            const Payload p{this, k};
            o->on_promise(&vtable_, &p, sizeof p);
        }
        const int deg = indegree_ ? indegree_(k) : 1;
        if (deg < 1)
            throw UsageError("task " + task_name(k) + ": indegree is " + std::to_string(deg) +
                             " (must be >= 1)");
        if (deg > 1 || checked_) {
            int left = 0;
            switch (table_.fulfill(k, deg, &left)) {
                case PromiseTable<K>::Outcome::waiting:
                    return;
                case PromiseTable<K>::Outcome::ready:
                    break;
                case PromiseTable<K>::Outcome::already_done:
                    throw UsageError("task " + task_name(k) +
                                     ": promise fulfilled more times than its indegree (" +
                                     std::to_string(deg) + ")");
            }
        }
        make_ready(k, quiet);
    }

    struct Payload {
        Taskflow* tf;
        K key;
    };

    static void run_task(Task& t) {
        Payload& p = t.as<Payload>();
        p.tf->task_(p.key);
        if (p.tf->fulfill_) p.tf->fulfill_(p.key);
    }
    static std::string describe_task(const Task& t) {
        const Payload& p = t.as<Payload>();
        return p.tf->task_name(p.key);
    }
    static constexpr TaskVTable vtable_{&run_task, &describe_task, nullptr};
    static void name_parts(const unsigned char* payload, std::string& flow, std::string& key) {
        const Payload* p = std::launder(reinterpret_cast<const Payload*>(payload));
        flow = p->tf->name_;
        key = key_to_string(p->key);
    }

    void make_ready(const K& k, bool quiet) {
        Task t;
        t.vt = &vtable_;
        t.priority = priority_ ? priority_(k) : 0.0;
        t.emplace<Payload>(Payload{this, k});
        const int thread = mapping_ ? mapping_(k) : tp_->pick_thread();
        if (thread < 0 || thread >= tp_->workers())
            throw UsageError("task " + task_name(k) + ": mapping returned thread " +
                             std::to_string(thread) + ", outside [0, " +
                             std::to_string(tp_->workers()) + ")");
        if (quiet)
            tp_->push_quiet(t, thread, binding_ ? binding_(k) : false);
        else
            tp_->push(t, thread, binding_ ? binding_(k) : false);
    }

    template <class F>
    Taskflow& set(F& slot, F f) {
        slot = std::move(f);
        return *this;
    }

    Threadpool* tp_;
    std::string name_;
    bool checked_;
    PromiseTable<K> table_;
    std::function<void(K)> task_, fulfill_;
    std::function<int(K)> indegree_, mapping_;
    std::function<bool(K)> binding_;
    std::function<double(K)> priority_;
    std::function<std::string(K)> task_name_;
};

}  // namespace cascade
