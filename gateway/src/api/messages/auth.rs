//! The tenant key of a Messages request: Anthropic clients send it as `x-api-key: KEY`,
//! OpenAI-style clients as `Authorization: Bearer KEY`; either works, both work when they
//! name the same key, and two different keys (or the header twice) are a 400: two tenants
//! to choose between.

use crate::error::GatewayError;
use http::HeaderMap;
use std::borrow::Cow;

/// The `Authorization` value to authenticate with, from the request's `authorization`
/// (already read once by the framing check) and its `x-api-key` headers.
pub(crate) fn authorization<'a>(
    headers: &HeaderMap,
    authorization: Option<&'a [u8]>,
) -> Result<Option<Cow<'a, [u8]>>, GatewayError> {
    let mut keys = headers.get_all("x-api-key").iter();
    let Some(key) = keys.next() else {
        return Ok(authorization.map(Cow::Borrowed));
    };
    if keys.next().is_some() {
        return Err(GatewayError::BadRequest(
            "more than one x-api-key header".into(),
        ));
    }
    let key = key.as_bytes().trim_ascii();
    if let Some(auth) = authorization {
        let bearer = auth
            .split_once_space()
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case(b"bearer"))
            .map(|(_, k)| k.trim_ascii());
        if bearer != Some(key) {
            return Err(GatewayError::BadRequest(
                "x-api-key and Authorization name different keys; send one".into(),
            ));
        }
    }
    let mut value = b"Bearer ".to_vec();
    value.extend_from_slice(key);
    Ok(Some(Cow::Owned(value)))
}

trait SplitSpace {
    fn split_once_space(&self) -> Option<(&[u8], &[u8])>;
}

impl SplitSpace for [u8] {
    fn split_once_space(&self) -> Option<(&[u8], &[u8])> {
        let i = self.iter().position(|&b| b == b' ')?;
        Some((&self[..i], &self[i + 1..]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(keys: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for k in keys {
            h.append("x-api-key", HeaderValue::from_str(k).unwrap());
        }
        h
    }

    #[test]
    fn x_api_key_becomes_a_bearer_value_and_conflicts_are_refused() {
        let got = authorization(&headers(&["sk-1"]), None).unwrap().unwrap();
        assert_eq!(&*got, b"Bearer sk-1");
        let got = authorization(&headers(&["sk-1"]), Some(b"Bearer sk-1"))
            .unwrap()
            .unwrap();
        assert_eq!(&*got, b"Bearer sk-1");
        let got = authorization(&headers(&[]), Some(b"Bearer sk-2"))
            .unwrap()
            .unwrap();
        assert_eq!(&*got, b"Bearer sk-2");
        assert!(authorization(&headers(&[]), None).unwrap().is_none());
        for (keys, auth) in [
            (&["sk-1"][..], Some(&b"Bearer sk-2"[..])),
            (&["sk-1"][..], Some(&b"Basic sk-1"[..])),
            (&["sk-1", "sk-1"][..], None),
        ] {
            assert!(matches!(
                authorization(&headers(keys), auth),
                Err(GatewayError::BadRequest(_))
            ));
        }
    }
}
