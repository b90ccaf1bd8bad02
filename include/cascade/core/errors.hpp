// Errors Cascade reports to users. Every message names the task involved. They live in one
// header, like <stdexcept>: one family, each a few lines.
//
//   try {
//       tp.join();
//   } catch (const cascade::TaskError& e) {       // a task threw
//       std::cerr << e.what() << '\n';            // "task 'square(7)' on thread 1 threw: ..."
//       std::rethrow_exception(e.original());    // the task's own exception
//   } catch (const cascade::IncompleteGraphError& e) {  // checked mode: promises missing
//       std::cerr << e.count() << " tasks never ran\n";
//   }
#pragma once

#include <exception>
#include <stdexcept>
#include <string>

namespace cascade {

/// Misuse of the API detected at run time (wrong indegree, mapping out of range, ...).
class UsageError : public std::logic_error {
  public:
    using std::logic_error::logic_error;
};

/// A task threw. Rethrown from Threadpool::join() on the thread that called it.
class TaskError : public std::runtime_error {
  public:
    /// thread: the worker, or -1 for the communication thread. rank: the MPI rank when the pool
    /// has a communicator, else -1 (not shown).
    TaskError(std::string task, int thread, std::exception_ptr original, const std::string& what,
              int rank = -1)
        : std::runtime_error((rank >= 0 ? "rank " + std::to_string(rank) + ": " : std::string()) +
                             "task " + task +
                             (thread >= 0 ? " on thread " + std::to_string(thread)
                                          : std::string(" on the communication thread")) +
                             " threw: " + what),
          task_(std::move(task)),
          thread_(thread),
          rank_(rank),
          original_(std::move(original)) {}
    /// The same error as reported by the rank where it happened: `what` is its whole message
    /// (every rank's join() throws it with the same text), `original` what this rank knows of
    /// the exception (the failing rank's own, or a std::runtime_error with its message).
    static TaskError reported(std::string what, std::string task, int thread, int rank,
                              std::exception_ptr original) {
        return TaskError(Reported{}, std::move(what), std::move(task), thread, rank,
                         std::move(original));
    }
    /// The task's name (or the handler's description: "'name' (handler, from rank 2)").
    const std::string& task() const noexcept { return task_; }
    /// The worker it ran on (-1: the communication thread, outside any handler).
    int thread() const noexcept { return thread_; }
    /// The rank it ran on (-1: no communicator).
    int rank() const noexcept { return rank_; }
    /// The exception the task threw, to rethrow or inspect.
    std::exception_ptr original() const noexcept { return original_; }

  private:
    struct Reported {};
    TaskError(Reported, std::string what, std::string task, int thread, int rank,
              std::exception_ptr original)
        : std::runtime_error(std::move(what)),
          task_(std::move(task)),
          thread_(thread),
          rank_(rank),
          original_(std::move(original)) {}

    std::string task_;
    int thread_;
    int rank_;
    std::exception_ptr original_;
};

/// join() ended while some tasks still waited for promises that never came (checked mode).
class IncompleteGraphError : public std::runtime_error {
  public:
    /// `count` tasks left waiting; `what` is the message.
    IncompleteGraphError(std::size_t count, const std::string& what)
        : std::runtime_error(what), count_(count) {}
    /// How many tasks were left waiting (the message names the first ten).
    std::size_t count() const noexcept { return count_; }

  private:
    std::size_t count_;
};

namespace detail {
// The message of an exception held in an exception_ptr ("no error" for a null one).
inline std::string describe_error(const std::exception_ptr& e) {
    try {
        if (e) std::rethrow_exception(e);
    } catch (const std::exception& x) {
        return x.what();
    } catch (...) {
        return "unknown exception";
    }
    return "no error";
}
}  // namespace detail

}  // namespace cascade
