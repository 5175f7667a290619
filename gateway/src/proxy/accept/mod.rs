//! Accept: each client connection from the accept to its last request. The connection
//! caps come first ([`conn_cap`]: in all and per IP), then a deadline and size bounds on
//! each whole request header ([`deadline`], [`head`]), then Pingora's HTTP/1.1 keep-alive
//! loop over the proxy ([`connection`], which Pingora hands every connection to). What the
//! guards answer themselves is written by [`answer`].

pub(crate) mod answer;
pub(crate) mod conn_cap;
pub(crate) mod connection;
pub(crate) mod deadline;
pub(crate) mod head;
