//! Dafka nodes.
pub mod store_logic;
