//! The EPP protocol on Envoy's ext_proc messages: what the data plane tells the picker
//! (request headers, the subset hint, the endpoint that served) and the answers it
//! expects (the destination header and `envoy.lb` metadata, body answers in the body
//! mode in force, an immediate error response). Names are the Gateway API Inference
//! Extension's (docs/proposals/004-endpoint-picker-protocol).

use crate::error::ErrorResponse;
use envoy_types::pb::envoy::config::core::v3::{HeaderValue, HeaderValueOption, Metadata};
use envoy_types::pb::envoy::r#type::v3::HttpStatus;
use envoy_types::pb::envoy::service::ext_proc::v3::{
    body_mutation, processing_response, BodyMutation, BodyResponse, CommonResponse, HeaderMutation,
    HeadersResponse, HttpHeaders, ImmediateResponse, ProcessingResponse, StreamedBodyResponse,
};
use envoy_types::pb::google::protobuf::{value::Kind, Struct, Value};

/// Namespace of the answer's metadata (and of the served endpoint Envoy reports).
pub(crate) const DESTINATION_NAMESPACE: &str = "envoy.lb";
/// The chosen endpoints, `ip:port[,ip:port...]`: a header and a metadata key.
pub(crate) const DESTINATION_KEY: &str = "x-gateway-destination-endpoint";
/// The endpoint that produced the response (request metadata, response path).
pub(crate) const SERVED_KEY: &str = "x-gateway-destination-endpoint-served";
/// Namespace of the subset hint in the request's metadata.
pub(crate) const SUBSET_NAMESPACE: &str = "envoy.lb.subset_hint";
/// The endpoints the picker may choose from.
pub(crate) const SUBSET_KEY: &str = "x-gateway-destination-endpoint-subset";

/// A header's value: `raw_value` (what Envoy sends) or the older `value`.
fn header_value(h: &HeaderValue) -> &[u8] {
    if h.raw_value.is_empty() {
        h.value.as_bytes()
    } else {
        &h.raw_value
    }
}

/// The value of header `name` (lower case) in `headers`.
pub(crate) fn header<'a>(headers: &'a HttpHeaders, name: &str) -> Option<&'a [u8]> {
    headers
        .headers
        .as_ref()?
        .headers
        .iter()
        .find(|h| h.key.eq_ignore_ascii_case(name))
        .map(header_value)
}

/// `metadata[namespace][key]`.
fn entry<'a>(md: Option<&'a Metadata>, namespace: &str, key: &str) -> Option<&'a Kind> {
    md?.filter_metadata
        .get(namespace)?
        .fields
        .get(key)?
        .kind
        .as_ref()
}

/// The subset hint: `None` when the data plane sent none (choose from the whole pool);
/// a list (perhaps empty) when it did. A string value is read as a comma-separated list.
pub(crate) fn subset(md: Option<&Metadata>) -> Option<Vec<String>> {
    Some(match entry(md, SUBSET_NAMESPACE, SUBSET_KEY)? {
        Kind::ListValue(l) => l
            .values
            .iter()
            .filter_map(|v| match &v.kind {
                Some(Kind::StringValue(s)) => Some(s.trim().to_string()),
                _ => None,
            })
            .collect(),
        Kind::StringValue(s) => split_endpoints(s),
        _ => Vec::new(),
    })
}

/// The endpoint that served the response, when the data plane reported it.
pub(crate) fn served(md: Option<&Metadata>) -> Option<String> {
    match entry(md, DESTINATION_NAMESPACE, SERVED_KEY)? {
        Kind::StringValue(s) => split_endpoints(s).into_iter().next(),
        _ => None,
    }
}

fn split_endpoints(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(String::from)
        .collect()
}

fn set_header(key: &str, value: &[u8]) -> HeaderValueOption {
    HeaderValueOption {
        header: Some(HeaderValue {
            key: key.to_string(),
            raw_value: value.to_vec(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// `{envoy.lb: {x-gateway-destination-endpoint: list}}`.
fn destination_metadata(list: &str) -> Struct {
    let inner = Struct {
        fields: [(
            DESTINATION_KEY.to_string(),
            Value {
                kind: Some(Kind::StringValue(list.to_string())),
            },
        )]
        .into(),
    };
    Struct {
        fields: [(
            DESTINATION_NAMESPACE.to_string(),
            Value {
                kind: Some(Kind::StructValue(inner)),
            },
        )]
        .into(),
    }
}

/// What the picker answers for a request: the endpoints in try order, the request headers
/// to set and remove, and the body to forward (`None`: unchanged).
#[derive(Debug, Default)]
pub(crate) struct Destination {
    /// Endpoints, `ip:port`, primary first.
    pub endpoints: Vec<String>,
    /// Request headers to set (the tenant's cache salt).
    pub set: Vec<(String, Vec<u8>)>,
    /// Request headers to remove (credentials, headers only the gateway may send).
    pub remove: Vec<String>,
    /// The body Envoy forwards, when the picker changed it (a completion bound, a salt).
    pub body: Option<bytes::Bytes>,
}

impl Destination {
    /// The comma-separated endpoint list (header and metadata carry the same value).
    pub(crate) fn list(&self) -> String {
        self.endpoints.join(",")
    }

    /// The common response that routes the request: the destination header (and the new
    /// `content-length` when the body changed), the route cache cleared.
    fn common(&self) -> CommonResponse {
        let list = self.list();
        let mut set = vec![set_header(DESTINATION_KEY, list.as_bytes())];
        for (k, v) in &self.set {
            set.push(set_header(k, v));
        }
        if let Some(b) = &self.body {
            set.push(set_header("content-length", b.len().to_string().as_bytes()));
        }
        CommonResponse {
            header_mutation: Some(HeaderMutation {
                set_headers: set,
                remove_headers: self.remove.clone(),
            }),
            clear_route_cache: true,
            ..Default::default()
        }
    }

    /// The answer to the request headers (streamed mode, or a request without a body).
    pub(crate) fn headers_answer(&self) -> ProcessingResponse {
        ProcessingResponse {
            response: Some(processing_response::Response::RequestHeaders(
                HeadersResponse {
                    response: Some(self.common()),
                },
            )),
            dynamic_metadata: Some(destination_metadata(&self.list())),
            ..Default::default()
        }
    }

    /// The answer to a buffered body: the destination rides on the body's answer (Envoy
    /// had the headers' answer before it sent the body), with the new body if any.
    pub(crate) fn buffered_body_answer(&self) -> ProcessingResponse {
        let mut common = self.common();
        if let Some(b) = &self.body {
            common.body_mutation = Some(BodyMutation {
                mutation: Some(body_mutation::Mutation::Body(b.to_vec())),
            });
        }
        ProcessingResponse {
            response: Some(processing_response::Response::RequestBody(BodyResponse {
                response: Some(common),
            })),
            dynamic_metadata: Some(destination_metadata(&self.list())),
            ..Default::default()
        }
    }
}

/// An empty answer to request headers (buffered mode: the decision waits for the body).
pub(crate) fn headers_continue() -> ProcessingResponse {
    ProcessingResponse {
        response: Some(processing_response::Response::RequestHeaders(
            HeadersResponse::default(),
        )),
        ..Default::default()
    }
}

/// The answer to response headers: the gateway's own response headers added
/// (`x-warmpath-replica`, `x-warmpath-predicted-cached-tokens`, `x-ratelimit-*`).
pub(crate) fn response_headers(headers: &[(String, String)]) -> ProcessingResponse {
    let set: Vec<HeaderValueOption> = headers
        .iter()
        .map(|(k, v)| set_header(k, v.as_bytes()))
        .collect();
    ProcessingResponse {
        response: Some(processing_response::Response::ResponseHeaders(
            HeadersResponse {
                response: (!set.is_empty()).then(|| CommonResponse {
                    header_mutation: Some(HeaderMutation {
                        set_headers: set,
                        remove_headers: Vec::new(),
                    }),
                    ..Default::default()
                }),
            },
        )),
        ..Default::default()
    }
}

/// A streamed (FULL_DUPLEX_STREAMED) body chunk handed back to Envoy: on the request path
/// (`request`) or the response path.
pub(crate) fn streamed_body(
    request: bool,
    body: Vec<u8>,
    end_of_stream: bool,
) -> ProcessingResponse {
    let answer = BodyResponse {
        response: Some(CommonResponse {
            body_mutation: Some(BodyMutation {
                mutation: Some(body_mutation::Mutation::StreamedResponse(
                    StreamedBodyResponse {
                        body,
                        end_of_stream,
                        ..Default::default()
                    },
                )),
            }),
            ..Default::default()
        }),
    };
    ProcessingResponse {
        response: Some(if request {
            processing_response::Response::RequestBody(answer)
        } else {
            processing_response::Response::ResponseBody(answer)
        }),
        ..Default::default()
    }
}

/// An unchanged (buffered) response body's answer.
pub(crate) fn response_body_continue() -> ProcessingResponse {
    ProcessingResponse {
        response: Some(processing_response::Response::ResponseBody(
            BodyResponse::default(),
        )),
        ..Default::default()
    }
}

/// An error answered by Envoy itself: the gateway's status, headers and OpenAI-shaped
/// JSON body (`crate::error`'s one mapping).
pub(crate) fn immediate(e: &ErrorResponse) -> ProcessingResponse {
    let mut set: Vec<HeaderValueOption> = e
        .headers
        .iter()
        .map(|(k, v)| set_header(k, v.as_bytes()))
        .collect();
    set.push(set_header("content-type", b"application/json"));
    ProcessingResponse {
        response: Some(processing_response::Response::ImmediateResponse(
            ImmediateResponse {
                status: Some(HttpStatus {
                    code: i32::from(e.status),
                }),
                headers: Some(HeaderMutation {
                    set_headers: set,
                    remove_headers: Vec::new(),
                }),
                body: e.body.clone(),
                details: "warmpath_epp".into(),
                ..Default::default()
            },
        )),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::google::protobuf::ListValue;

    fn md(ns: &str, key: &str, kind: Kind) -> Metadata {
        let inner = Struct {
            fields: [(key.to_string(), Value { kind: Some(kind) })].into(),
        };
        Metadata {
            filter_metadata: [(ns.to_string(), inner)].into(),
            ..Default::default()
        }
    }

    #[test]
    fn subset_as_list_or_string_and_absent() {
        let list = Kind::ListValue(ListValue {
            values: vec![
                Value {
                    kind: Some(Kind::StringValue("10.0.0.1:8000".into())),
                },
                Value {
                    kind: Some(Kind::StringValue(" 10.0.0.2:8000".into())),
                },
            ],
        });
        let m = md(SUBSET_NAMESPACE, SUBSET_KEY, list);
        assert_eq!(
            subset(Some(&m)),
            Some(vec![
                "10.0.0.1:8000".to_string(),
                "10.0.0.2:8000".to_string()
            ])
        );
        let m = md(
            SUBSET_NAMESPACE,
            SUBSET_KEY,
            Kind::StringValue("a:1,b:2".into()),
        );
        assert_eq!(subset(Some(&m)), Some(vec!["a:1".into(), "b:2".into()]));
        assert_eq!(subset(None), None);
        let other = md("envoy.lb", SUBSET_KEY, Kind::StringValue("a:1".into()));
        assert_eq!(subset(Some(&other)), None);
    }

    #[test]
    fn destination_header_and_metadata_agree() {
        let d = Destination {
            endpoints: vec!["10.0.0.1:8000".into(), "10.0.0.2:8000".into()],
            ..Default::default()
        };
        let r = d.headers_answer();
        let Some(processing_response::Response::RequestHeaders(h)) = &r.response else {
            panic!("not a headers answer: {r:?}");
        };
        let common = h.response.as_ref().expect("common");
        assert!(common.clear_route_cache);
        let set = &common
            .header_mutation
            .as_ref()
            .expect("mutation")
            .set_headers;
        let hv = set[0].header.as_ref().expect("header");
        assert_eq!(hv.key, DESTINATION_KEY);
        assert_eq!(hv.raw_value, b"10.0.0.1:8000,10.0.0.2:8000");
        let lb = &r.dynamic_metadata.as_ref().expect("metadata").fields[DESTINATION_NAMESPACE];
        let Some(Kind::StructValue(s)) = &lb.kind else {
            panic!("envoy.lb is not a struct");
        };
        assert_eq!(
            s.fields[DESTINATION_KEY].kind,
            Some(Kind::StringValue("10.0.0.1:8000,10.0.0.2:8000".into()))
        );
    }
}
