//! Serving: radix cache, scheduler, HTTP API, KV events. (owner: serving)
