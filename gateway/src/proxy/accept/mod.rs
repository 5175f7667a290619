//! Accept: each client connection from the accept to its last request. The per-IP cap
//! comes first ([`conn_cap`]), then a deadline on each whole request header
//! ([`deadline`]), then Pingora's HTTP/1.1 keep-alive loop over the proxy
//! ([`connection`], which Pingora hands every connection to).

pub mod conn_cap;
pub mod connection;
pub mod deadline;
