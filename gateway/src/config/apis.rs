//! The pass-through APIs an upstream may serve besides chat and completions
//! (`pools[].apis`): `/v1/embeddings`, `/tokenize` and `/detokenize`. Which engine serves
//! which, and the checks of a pool's list, are in [`super::serves`].

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
        assert_eq!(
            apis.iter().map(|a| a.as_str()).collect::<Vec<_>>(),
            ["embeddings", "tokenize", "detokenize"]
        );
        let err = serde_yaml::from_str::<Vec<PassthroughApi>>("[embedding]").unwrap_err();
        assert!(err.to_string().contains("unknown variant"), "{err}");
    }
}
