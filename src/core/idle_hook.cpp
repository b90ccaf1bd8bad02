// Threadpool's idle hook (idle_hook.hpp): called by workers that found nothing to do.
#include <thread>

#include "cascade/core/detail/task_epilogue.hpp"
#include "cascade/core/threadpool.hpp"

namespace cascade {

long Threadpool::call_idle_hook(int me) noexcept {
    idle_.calls.fetch_add(1, std::memory_order_seq_cst);
    long again = 0;
    if (IdleHook* h = idle_.hook.load(std::memory_order_seq_cst)) {
        try {
            again = h->on_idle(*this, me);
            detail::run_task_epilogue();  // e.g. messages held back like a task's
        } catch (...) {
            fail(std::current_exception());
            again = 0;
        }
    }
    idle_.calls.fetch_sub(1, std::memory_order_seq_cst);
    return again;
}

void Threadpool::owe_hook_call(int w) noexcept {
    std::atomic<bool>& due = stats_[w].hook_due;
    if (!due.load(std::memory_order_relaxed) && !due.exchange(true, std::memory_order_seq_cst))
        idle_.dues.fetch_add(1, std::memory_order_seq_cst);
}

void Threadpool::paid_hook_call(int w) noexcept {
    if (stats_[w].hook_due.exchange(false, std::memory_order_seq_cst))
        idle_.dues.fetch_sub(1, std::memory_order_seq_cst);
}

void Threadpool::set_idle_hook(IdleHook* hook) noexcept {
    idle_.hook.store(hook, std::memory_order_seq_cst);
    if (hook) {
        // Every worker owes the new hook a call, and the pool is busy until they made it
        // (a worker woken now must not send after its rank was reported idle).
        for (int w = 0; w < n_; ++w)
            owe_hook_call(w);
        wake_workers();  // sleeping workers call it at once
        return;
    }
    while (idle_.calls.load(std::memory_order_seq_cst) > 0)
        std::this_thread::yield();
}

}  // namespace cascade
