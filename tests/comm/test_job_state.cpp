// JobState (cascade/comm/detail/job_state.hpp): what the Communicator's error handling knows
// of this rank's joins and errors.
#include <gtest/gtest.h>

#include "cascade/comm/detail/job_state.hpp"

using cascade::detail::JobState;

TEST(JobState, SettledOnlyAfterAJoinAndWhileNothingMoves) {
    JobState j;
    EXPECT_FALSE(j.settled(0, 0));  // no join() yet
    j.join_polled();
    EXPECT_TRUE(j.joining());
    EXPECT_FALSE(j.settled(0, 0));
    j.join_done(5, 7);
    EXPECT_FALSE(j.joining());
    EXPECT_TRUE(j.settled(5, 7));
    EXPECT_FALSE(j.settled(6, 7));  // a message queued since
    EXPECT_FALSE(j.settled(5, 8));  // one processed since
    j.join_polled();
    EXPECT_FALSE(j.settled(5, 7));
}

TEST(JobState, ErrorToldOncePerEpochUnlessItCameFromAPeer) {
    JobState j;
    EXPECT_TRUE(j.tell_error());
    EXPECT_FALSE(j.tell_error());
    j.epoch_ended();
    j.error_from_peer();
    EXPECT_FALSE(j.tell_error());  // the others know: one of them told this rank
    j.epoch_ended();
    EXPECT_TRUE(j.tell_error());  // a new epoch
}

TEST(JobState, AfterJobErrorWhileSettled) {
    JobState j;
    j.join_polled();
    EXPECT_TRUE(j.tell_error());
    j.epoch_ended();
    j.join_done(3, 3);
    EXPECT_TRUE(j.after_job_error(3, 3));
    EXPECT_FALSE(j.after_job_error(4, 3));
    // The next epoch ends without an error.
    j.join_polled();
    j.epoch_ended();
    j.join_done(4, 4);
    EXPECT_FALSE(j.after_job_error(4, 4));
    // An error that came from another rank counts the same.
    j.join_polled();
    j.error_from_peer();
    j.epoch_ended();
    j.join_done(4, 4);
    EXPECT_TRUE(j.after_job_error(4, 4));
}

TEST(JobState, AbandonAndTraceOnce) {
    JobState j;
    EXPECT_FALSE(j.abandoned());
    j.abandon();
    EXPECT_TRUE(j.abandoned());
    EXPECT_TRUE(j.first_trace_write());
    EXPECT_FALSE(j.first_trace_write());
}
