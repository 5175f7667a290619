//! Support code for Warmpath's end-to-end tests.
