//! Devices the VMM emulates for its guests.

pub mod hypercall;
