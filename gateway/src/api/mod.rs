//! APIs the gateway serves by translating them to and from chat completions, so they take
//! the chat path (tokenization, block hashes, limits, prefix routing) unchanged.

pub(crate) mod responses;
