//! Client APIs besides OpenAI's chat and text completions, each translated to and from a
//! chat completion so it shares the chat path: tokenization and block hashes, tenant
//! limits, routing, retries, accounting.

pub(crate) mod messages;
pub(crate) mod responses;
