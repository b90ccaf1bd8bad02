// Which pool worker the calling thread is: set by the worker for its whole life, empty on
// every other thread. Inline, so that a layer above (broadcast detection, which holds sends
// back only on workers and in handlers) tells the threads apart with one thread-local load.
#pragma once

namespace cascade {
class Threadpool;
}

namespace cascade::detail {

struct WorkerContext {
    const Threadpool* pool = nullptr;  // null: not a worker
    int index = -1;
    const char* stack_low = nullptr;  // lowest address of this worker's stack
};

inline thread_local WorkerContext tls_worker;

// The pool whose Threadpool::ExternalScope the calling thread is in (null: none).
inline thread_local const Threadpool* tls_external_scope = nullptr;

}  // namespace cascade::detail
