// Work a task leaves for its end, run on the task's own thread: the pool runs it after each
// task, and before a waiting task runs another one (run_one_task), so nothing a task holds
// back can make it wait for itself. A layer above sets it while it holds something back
// (the broadcast layer: sends to be merged into one broadcast); otherwise it is null and
// costs a task one thread-local load.
#pragma once

namespace cascade::detail {

class TaskEpilogue {
  public:
    virtual void run_epilogue() noexcept = 0;

  protected:
    ~TaskEpilogue() = default;
};

inline thread_local TaskEpilogue* tls_task_epilogue = nullptr;

inline void run_task_epilogue() noexcept {
    if (TaskEpilogue* e = tls_task_epilogue) [[unlikely]]
        e->run_epilogue();
}

}  // namespace cascade::detail
