//! Which pass-through APIs ([`PassthroughApi`]) a pool's upstreams serve: the pool's
//! `apis`, or its engine's defaults. The gateway routes a request for one of them only to
//! replicas whose pool serves it, and answers a clear error when no replica of the model
//! does (never the engine's own 404).
//!
//! ```yaml
//! pools:
//!   - name: embed
//!     engine: llamacpp            # llama-server started with --embeddings
//!     upstreams: [http://127.0.0.1:8001]
//!     apis: [embeddings]
//! ```
//!
//! Left out, the list is the engine's default ([`defaults`]): what the engine serves for
//! any model without extra flags. Embeddings need an embedding model (vLLM, SGLang) or a
//! flag (llama.cpp's `--embeddings`), so they are never a default.

use super::apis::PassthroughApi;
use super::error::ConfigError;
use super::pools::{EngineKind, PoolConfig};

/// What `engine` serves without extra flags, in the shape the gateway passes through.
/// llama.cpp's `/tokenize` takes `{"content"}`, not vLLM's shape, so it is not listed.
pub(crate) fn defaults(engine: EngineKind) -> &'static [PassthroughApi] {
    match engine {
        EngineKind::Warmpath | EngineKind::Vllm => {
            &[PassthroughApi::Tokenize, PassthroughApi::Detokenize]
        }
        EngineKind::Sglang | EngineKind::Llamacpp | EngineKind::Openai => &[],
    }
}

/// The APIs a pool of `engine` serves: `configured`, or the engine's defaults.
pub(crate) fn served(
    engine: EngineKind,
    configured: Option<&[PassthroughApi]>,
) -> &[PassthroughApi] {
    configured.unwrap_or(defaults(engine))
}

/// Why `engine` cannot serve `api` in the shape the gateway passes through, if it cannot.
fn refused(engine: EngineKind, api: PassthroughApi) -> Option<&'static str> {
    match (engine, api) {
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

/// Checks one `apis` list (`key` is `pools[i].apis`): no duplicate, and only APIs the
/// engine serves in the shape the gateway passes through.
fn validate(key: &str, engine: EngineKind, apis: &[PassthroughApi]) -> Result<(), ConfigError> {
    let invalid = |reason: String| ConfigError::Invalid {
        key: key.to_string(),
        reason,
    };
    for (i, api) in apis.iter().enumerate() {
        if apis[..i].contains(api) {
            return Err(invalid(format!("lists `{}` twice", api.as_str())));
        }
        if let Some(why) = refused(engine, *api) {
            return Err(invalid(format!(
                "engine `{}` cannot serve `{}`: {why}",
                engine.as_str(),
                api.as_str()
            )));
        }
    }
    Ok(())
}

/// Checks every pool's `apis`.
pub(crate) fn validate_pools(pools: &[PoolConfig]) -> Result<(), ConfigError> {
    for (i, p) in pools.iter().enumerate() {
        if let Some(apis) = &p.apis {
            validate(&format!("pools[{i}].apis"), p.engine, apis)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(validate("k", EngineKind::Llamacpp, &[PassthroughApi::Embeddings]).is_ok());
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

    #[test]
    fn a_config_with_a_bad_list_is_refused_naming_the_pool() {
        let yaml = "pools:\n  - {name: a, engine: vllm, upstreams: [http://127.0.0.1:1]}\n  \
                    - {name: b, engine: llamacpp, upstreams: [http://127.0.0.1:2], \
                    apis: [embeddings, tokenize]}\n";
        let cfg: super::super::Config = serde_yaml::from_str(yaml).unwrap();
        match cfg.validate() {
            Err(ConfigError::Invalid { key, reason }) => {
                assert_eq!(key, "pools[1].apis", "{reason}");
                assert!(reason.contains("`tokenize`"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        let unknown = "pools:\n  - {name: a, engine: vllm, upstreams: [http://127.0.0.1:1], \
                       apis: [embeddings], serves: [x]}\n";
        let err = serde_yaml::from_str::<super::super::Config>(unknown).unwrap_err();
        assert!(err.to_string().contains("unknown field `serves`"), "{err}");
    }
}
