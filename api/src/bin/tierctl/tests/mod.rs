//! tierctl's commands end to end: the real client over a real unix (or
//! TCP) socket to a small HTTP server that records each request and
//! answers from a route table.

mod fixture;
mod frames_and_stats;
mod lifecycle;
mod samples;
