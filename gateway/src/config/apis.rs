//! Which pass-through APIs a pool's upstreams serve besides chat and completions
//! (`apis:` in a pool): `/v1/embeddings`, `/tokenize` and `/detokenize`. The gateway
//! routes a request for one of them only to replicas whose pool lists it, and answers a
//! clear error when no replica of the model does (never the engine's own 404).
//!
//! ```yaml
//! pools:
//!   - name: embed
//!     engine: llamacpp            # llama-server started with --embeddings
//!     upstreams: [http://127.0.0.1:8001]
//!     apis: [embeddings]
//! ```
//!
//! Left out, the list is the engine's default ([`PassthroughApi::defaults`]): what the
//! engine serves for any model without extra flags. Embeddings need an embedding model
//! (vLLM, SGLang) or a flag (llama.cpp's `--embeddings`), so they are never a default.

use super::error::ConfigError;
use super::pools::EngineKind;
use serde::{Deserialize, Serialize};

/// A pass-through API an upstream may serve.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PassthroughApi {
    /// `POST /v1/embeddings` (OpenAI's shape).
    Embeddings,
    /// `POST /tokenize` (vLLM's shape: `{"model","prompt"}` or `{"model","messages"}`).
    Tokenize,
    /// `POST /detokenize` (vLLM's shape: `{"model","tokens"}`).
    Detokenize,
}

impl PassthroughApi {
    /// The name used in the config, errors and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            PassthroughApi::Embeddings => "embeddings",
            PassthroughApi::Tokenize => "tokenize",
            PassthroughApi::Detokenize => "detokenize",
        }
    }

    /// The path the upstream serves it on.
    pub fn upstream_path(self) -> &'static str {
        match self {
            PassthroughApi::Embeddings => "/v1/embeddings",
            PassthroughApi::Tokenize => "/tokenize",
            PassthroughApi::Detokenize => "/detokenize",
        }
    }

    /// What `engine` serves without extra flags, in the shape the gateway passes through.
    /// llama.cpp's `/tokenize` takes `{"content"}`, not vLLM's shape, so it is not listed.
    pub fn defaults(engine: EngineKind) -> &'static [PassthroughApi] {
        match engine {
            EngineKind::Warmpath | EngineKind::Vllm => {
                &[PassthroughApi::Tokenize, PassthroughApi::Detokenize]
            }
            EngineKind::Sglang | EngineKind::Llamacpp | EngineKind::Openai => &[],
        }
    }

    /// Why `engine` cannot serve this API in the shape the gateway passes through, if it
    /// cannot.
    fn refused_by(self, engine: EngineKind) -> Option<&'static str> {
        match (engine, self) {
            (EngineKind::Warmpath, PassthroughApi::Embeddings) => {
                Some("Warmpath's replica serves no /v1/embeddings")
            }
            (EngineKind::Llamacpp, PassthroughApi::Tokenize | PassthroughApi::Detokenize) => Some(
                "llama-server's /tokenize and /detokenize take {\"content\"} and {\"tokens\"}, \
                 not vLLM's shape the gateway passes through",
            ),
            _ => None,
        }
    }
}

/// The APIs a pool of `engine` serves: `configured`, or the engine's defaults.
pub(crate) fn served(
    engine: EngineKind,
    configured: Option<&[PassthroughApi]>,
) -> &[PassthroughApi] {
    configured.unwrap_or(PassthroughApi::defaults(engine))
}

/// Checks a pool's `apis` list (`key` is `pools[i].apis`): no duplicate, and only APIs the
/// engine serves in the shape the gateway passes through.
pub(crate) fn validate(
    key: &str,
    engine: EngineKind,
    apis: &[PassthroughApi],
) -> Result<(), ConfigError> {
    for (i, api) in apis.iter().enumerate() {
        if apis[..i].contains(api) {
            return Err(ConfigError::Invalid {
                key: key.to_string(),
                reason: format!("lists `{}` twice", api.as_str()),
            });
        }
        if let Some(why) = api.refused_by(engine) {
            return Err(ConfigError::Invalid {
                key: key.to_string(),
                reason: format!(
                    "engine `{}` cannot serve `{}`: {why}",
                    engine.as_str(),
                    api.as_str()
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_unknown_ones_are_refused() {
        let apis: Vec<PassthroughApi> =
            serde_yaml::from_str("[embeddings, tokenize, detokenize]").unwrap();
        assert_eq!(
            apis,
            [
                PassthroughApi::Embeddings,
                PassthroughApi::Tokenize,
                PassthroughApi::Detokenize
            ]
        );
        let err = serde_yaml::from_str::<Vec<PassthroughApi>>("[embedding]").unwrap_err();
        assert!(err.to_string().contains("unknown variant"), "{err}");
    }

    #[test]
    fn defaults_follow_the_engine_and_a_list_replaces_them() {
        assert_eq!(
            served(EngineKind::Warmpath, None),
            [PassthroughApi::Tokenize, PassthroughApi::Detokenize]
        );
        assert!(served(EngineKind::Llamacpp, None).is_empty());
        assert_eq!(
            served(EngineKind::Llamacpp, Some(&[PassthroughApi::Embeddings])),
            [PassthroughApi::Embeddings]
        );
        assert!(served(EngineKind::Vllm, Some(&[])).is_empty());
    }

    #[test]
    fn validation_refuses_duplicates_and_shapes_the_engine_lacks() {
        let ok = [PassthroughApi::Embeddings];
        assert!(validate("k", EngineKind::Llamacpp, &ok).is_ok());
        let all = [
            PassthroughApi::Embeddings,
            PassthroughApi::Tokenize,
            PassthroughApi::Detokenize,
        ];
        assert!(validate("k", EngineKind::Vllm, &all).is_ok());
        for (engine, apis, want) in [
            (
                EngineKind::Vllm,
                &[PassthroughApi::Tokenize, PassthroughApi::Tokenize][..],
                "twice",
            ),
            (
                EngineKind::Llamacpp,
                &[PassthroughApi::Tokenize][..],
                "{\"content\"}",
            ),
            (
                EngineKind::Warmpath,
                &[PassthroughApi::Embeddings][..],
                "no /v1/embeddings",
            ),
        ] {
            match validate("pools[0].apis", engine, apis) {
                Err(ConfigError::Invalid { key, reason }) => {
                    assert_eq!(key, "pools[0].apis");
                    assert!(reason.contains(want), "{reason}");
                }
                other => panic!("{engine:?} {apis:?}: {other:?}"),
            }
        }
    }
}
