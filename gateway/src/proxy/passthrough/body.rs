//! What the gateway reads from a pass-through request's body: the `model`, and for
//! embeddings the `input` whose tokens are reserved against the tenant's limits. The body
//! itself goes upstream unchanged (fields the gateway does not read, `encoding_format`,
//! `dimensions`, `messages`, ..., are the engine's business).

use crate::config::PassthroughApi;
use crate::encoder::PromptEncoder;
use crate::error::GatewayError;
use serde::Deserialize;

/// An embeddings `input`: one text, several, one token list or several.
#[derive(Debug, Deserialize, PartialEq)]
#[serde(untagged)]
pub(crate) enum Input {
    /// `"text"`.
    Text(String),
    /// `["a", "b"]`.
    Texts(Vec<String>),
    /// `[1, 2, 3]`.
    Tokens(Vec<u32>),
    /// `[[1, 2], [3]]`.
    TokenLists(Vec<Vec<u32>>),
}

#[derive(Deserialize)]
struct Fields {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    input: Option<serde_json::Value>,
}

/// The fields read from a pass-through body.
#[derive(Debug, PartialEq)]
pub(crate) struct PassthroughBody {
    /// `model`.
    pub model: String,
    /// `input` (embeddings only).
    pub input: Option<Input>,
}

/// Reads the body of a request for `api`: 400 when it is not a JSON object, names no
/// model, or (embeddings) has no readable `input`.
pub(crate) fn read(api: PassthroughApi, body: &[u8]) -> Result<PassthroughBody, GatewayError> {
    let bad = |m: &str| GatewayError::BadRequest(m.to_string());
    let fields: Fields = serde_json::from_slice(body)
        .map_err(|e| GatewayError::InvalidBody(format!("expected a JSON object: {e}")))?;
    let model = fields
        .model
        .filter(|m| !m.is_empty())
        .ok_or_else(|| bad("`model` is required"))?;
    let input = match api {
        PassthroughApi::Embeddings => {
            let v = fields.input.ok_or_else(|| bad("`input` is required"))?;
            let input: Input = serde_json::from_value(v).map_err(|_| {
                bad("`input` must be a string, an array of strings, an array of token ids or an array of token id arrays")
            })?;
            let empty = match &input {
                Input::Text(_) => false,
                Input::Texts(v) => v.is_empty(),
                Input::Tokens(v) => v.is_empty(),
                Input::TokenLists(v) => v.is_empty() || v.iter().any(Vec::is_empty),
            };
            if empty {
                return Err(bad("`input` must not be empty"));
            }
            Some(input)
        }
        PassthroughApi::Tokenize | PassthroughApi::Detokenize => None,
    };
    Ok(PassthroughBody { model, input })
}

/// The input's tokens as `encoder` counts them (texts with their special tokens, as the
/// engine embeds them): what the request reserves against the tenant's tokens per minute
/// until the engine's `usage.prompt_tokens` settles it.
pub(crate) fn input_tokens(encoder: &PromptEncoder, input: &Input) -> Result<u32, GatewayError> {
    let count = |t: &str| {
        encoder
            .encode(t, true)
            .map(|v| v.len())
            .map_err(|e| GatewayError::BadRequest(format!("cannot tokenize the input: {e}")))
    };
    let n = match input {
        Input::Text(t) => count(t)?,
        Input::Texts(v) => v.iter().map(|t| count(t)).sum::<Result<usize, _>>()?,
        Input::Tokens(v) => v.len(),
        Input::TokenLists(v) => v.iter().map(Vec::len).sum(),
    };
    Ok(u32::try_from(n).unwrap_or(u32::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embeddings_inputs_in_every_shape_and_refusals() {
        let e = PassthroughApi::Embeddings;
        let r = read(
            e,
            br#"{"model":"m","input":"hi","encoding_format":"float"}"#,
        )
        .unwrap();
        assert_eq!(r.model, "m");
        assert_eq!(r.input, Some(Input::Text("hi".into())));
        let r = read(e, br#"{"model":"m","input":["a","b"]}"#).unwrap();
        assert_eq!(r.input, Some(Input::Texts(vec!["a".into(), "b".into()])));
        let r = read(e, br#"{"model":"m","input":[1,2]}"#).unwrap();
        assert_eq!(r.input, Some(Input::Tokens(vec![1, 2])));
        let r = read(e, br#"{"model":"m","input":[[1],[2,3]]}"#).unwrap();
        assert_eq!(r.input, Some(Input::TokenLists(vec![vec![1], vec![2, 3]])));
        for (body, want) in [
            (&br#"{"input":"x"}"#[..], "`model`"),
            (br#"{"model":"","input":"x"}"#, "`model`"),
            (br#"{"model":"m"}"#, "`input` is required"),
            (br#"{"model":"m","input":[]}"#, "must not be empty"),
            (br#"{"model":"m","input":[[]]}"#, "must not be empty"),
            (br#"{"model":"m","input":{"a":1}}"#, "must be a string"),
            (br#"{"model":"m","input":[-1]}"#, "must be a string"),
        ] {
            match read(e, body) {
                Err(GatewayError::BadRequest(m)) => assert!(m.contains(want), "{m}"),
                other => panic!("{}: {other:?}", String::from_utf8_lossy(body)),
            }
        }
        assert!(matches!(read(e, b"[1]"), Err(GatewayError::InvalidBody(_))));
        assert!(matches!(
            read(e, br#"{"model":"m","input":"x""#),
            Err(GatewayError::InvalidBody(_))
        ));
    }

    #[test]
    fn tokenize_bodies_need_only_a_model() {
        let r = read(
            PassthroughApi::Tokenize,
            br#"{"model":"m","messages":[{"role":"user","content":"x"}]}"#,
        )
        .unwrap();
        assert_eq!((r.model.as_str(), r.input), ("m", None));
        let r = read(PassthroughApi::Detokenize, br#"{"model":"m","tokens":[1]}"#).unwrap();
        assert_eq!(r.model, "m");
        assert!(read(PassthroughApi::Detokenize, br#"{"tokens":[1]}"#).is_err());
    }

    #[test]
    fn input_tokens_count_texts_with_the_encoder_and_token_ids_as_given() {
        let spec = warmpath_text::bytelevel::chatml_bpe_spec();
        let tok = crate::tokenize::CachedTokenizer::new(&spec, 64, 1).unwrap();
        let enc = PromptEncoder::from(tok);
        let one = input_tokens(&enc, &Input::Text("hello world".into())).unwrap();
        let want = enc.encode("hello world", true).unwrap().len() as u32;
        assert_eq!(one, want);
        let two = input_tokens(
            &enc,
            &Input::Texts(vec!["hello world".into(), "hello world".into()]),
        )
        .unwrap();
        assert_eq!(two, 2 * want);
        assert_eq!(
            input_tokens(&enc, &Input::TokenLists(vec![vec![1, 2], vec![3]])).unwrap(),
            3
        );
    }
}
