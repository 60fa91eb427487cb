//! Human output: pure functions from the API's typed values to text.

pub mod api_error;
pub mod frames;
pub mod policy;
pub mod stats;
pub mod table;
pub mod units;
pub mod vm;
