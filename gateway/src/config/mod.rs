//! The one configuration model, read from YAML, overridden by the command line, checked by
//! [`Config::validate`], whose errors name the offending key.
//!
//! # Layout
//! - [`model`]: the model, its defaults and its validation; [`error`]: its error type.
//! - [`pools`]: upstream pools of other engines (vLLM, SGLang, llama.cpp, OpenAI).
//! - [`env`]: `${NAME}` in string values, from the environment (secrets).
//! - [`overrides`]: the command line on top of the file; [`load`].

pub mod env;
pub mod error;
pub mod model;
pub mod overrides;
pub mod pools;

pub use model::*;
pub use overrides::{load, Overrides};
pub use pools::{Engine, KvEventsEndpoint, PoolConfig, Target, TokenizerSource};
