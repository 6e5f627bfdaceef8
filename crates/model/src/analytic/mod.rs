//! Closed-form queueing results (placeholder; written by the analytic helper).
