//! Stateful externs: registers, counters, meters, hashes and random numbers.
