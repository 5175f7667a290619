//! The Endpoint Picker under test: `gateway epp` as a process ([`EppProc`]) and an Envoy
//! stand-in that speaks ext_proc to it over real gRPC ([`ExtProc`]), sending the messages
//! Envoy sends in each body mode.

use crate::procs::{bin, free_port};
use anyhow::{bail, Context, Result};
use envoy_types::pb::envoy::config::core::v3::{HeaderMap, HeaderValue, Metadata};
use envoy_types::pb::envoy::service::ext_proc::v3::external_processor_client::ExternalProcessorClient;
use envoy_types::pb::envoy::service::ext_proc::v3::{
    processing_request::Request, processing_response::Response, HttpBody, HttpHeaders,
    ProcessingRequest, ProcessingResponse, ProtocolConfiguration,
};
use envoy_types::pb::google::protobuf::{value::Kind, ListValue, Struct, Value};
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tonic::Streaming;

static SEQ: AtomicU32 = AtomicU32::new(0);

/// `BodySendMode` values (Envoy's ext_proc filter config).
pub const BUFFERED: i32 = 2;
/// `FULL_DUPLEX_STREAMED`.
pub const FULL_DUPLEX_STREAMED: i32 = 4;

/// A running `gateway epp`.
pub struct EppProc {
    child: Child,
    /// The ext_proc gRPC `127.0.0.1:PORT`.
    pub grpc: String,
    /// Admin `127.0.0.1:PORT`.
    pub admin: String,
    dir: PathBuf,
}

impl EppProc {
    /// Starts `gateway epp` with `yaml` (listeners added) and waits until the gRPC port
    /// accepts and `replicas` replicas are registered.
    pub fn spawn(yaml: &str, replicas: usize) -> Result<Self> {
        let (port, grpc_port, admin_port) = (free_port(), free_port(), free_port());
        let dir = std::env::temp_dir().join(format!(
            "warmpath-e2e-epp-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir)?;
        let config = dir.join("gateway.yaml");
        std::fs::write(
            &config,
            format!(
                "listen: 127.0.0.1:{port}\nadmin_listen: 127.0.0.1:{admin_port}\n\
                 epp: {{listen: 127.0.0.1:{grpc_port}}}\n{yaml}"
            ),
        )?;
        let child = Command::new(bin("gateway"))
            .arg("epp")
            .arg("--config")
            .arg(&config)
            .stdout(std::fs::File::create(dir.join("epp.stdout"))?)
            .stderr(std::fs::File::create(dir.join("epp.log"))?)
            .spawn()
            .context("spawn gateway epp")?;
        let p = Self {
            child,
            grpc: format!("127.0.0.1:{grpc_port}"),
            admin: format!("127.0.0.1:{admin_port}"),
            dir,
        };
        p.wait_ready(replicas)?;
        Ok(p)
    }

    fn wait_ready(&self, replicas: usize) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            let registered = crate::http::get(&self.admin, "/admin/replicas", &[])
                .ok()
                .filter(|r| r.status == 200)
                .and_then(|r| r.json().ok())
                .map_or(0, |v| v["replicas"].as_array().map_or(0, Vec::len));
            if registered >= replicas && std::net::TcpStream::connect(&self.grpc).is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        bail!("epp not ready; log: {}", self.log())
    }

    /// Its stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("epp.log")).unwrap_or_default()
    }

    /// `GET path` on the admin listener, as JSON.
    pub fn admin_json(&self, path: &str) -> serde_json::Value {
        crate::http::get(&self.admin, path, &[])
            .and_then(|r| r.json())
            .unwrap_or(serde_json::Value::Null)
    }
}

impl Drop for EppProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A runtime for the gRPC client (the tests themselves are plain threads).
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// One ext_proc stream, as Envoy holds it for one HTTP request.
pub struct ExtProc {
    tx: Option<mpsc::Sender<ProcessingRequest>>,
    rx: Streaming<ProcessingResponse>,
}

impl ExtProc {
    /// Opens a stream to the EPP at `addr`.
    pub async fn open(addr: &str) -> Result<Self> {
        let mut client = ExternalProcessorClient::connect(format!("http://{addr}")).await?;
        let (tx, rx) = mpsc::channel(64);
        let out = client
            .process(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await?
            .into_inner();
        Ok(Self {
            tx: Some(tx),
            rx: out,
        })
    }

    /// Sends one message.
    pub async fn send(&self, m: ProcessingRequest) {
        if let Some(tx) = &self.tx {
            tx.send(m).await.expect("stream open");
        }
    }

    /// The next answer, within `within`.
    pub async fn recv(&mut self, within: Duration) -> Result<ProcessingResponse> {
        match tokio::time::timeout(within, self.rx.message()).await {
            Ok(Ok(Some(m))) => Ok(m),
            Ok(Ok(None)) => bail!("stream closed"),
            Ok(Err(e)) => bail!("stream error: {e}"),
            Err(_) => bail!("no answer within {within:?}"),
        }
    }

    /// Whether no answer comes within `within` (an answer too early is a protocol error).
    pub async fn silent_for(&mut self, within: Duration) -> bool {
        tokio::time::timeout(within, self.rx.message())
            .await
            .is_err()
    }

    /// Half-closes (Envoy is done with the request).
    pub fn close(&mut self) {
        self.tx = None;
    }
}

fn header_map(headers: &[(&str, &str)]) -> HeaderMap {
    HeaderMap {
        headers: headers
            .iter()
            .map(|(k, v)| HeaderValue {
                key: (*k).to_string(),
                raw_value: v.as_bytes().to_vec(),
                ..Default::default()
            })
            .collect(),
    }
}

fn string_struct(ns: &str, key: &str, kind: Kind) -> Metadata {
    Metadata {
        filter_metadata: [(
            ns.to_string(),
            Struct {
                fields: [(key.to_string(), Value { kind: Some(kind) })].into(),
            },
        )]
        .into(),
        ..Default::default()
    }
}

/// The request headers message: `:path`, `authorization` (when `key`), the body mode
/// announced in `protocol_config` (`mode`, 0 for none), and the subset hint.
pub fn request_headers(
    path: &str,
    key: Option<&str>,
    mode: i32,
    subset: Option<&[String]>,
    end_of_stream: bool,
) -> ProcessingRequest {
    let auth = key.map(|k| format!("Bearer {k}"));
    let mut h = vec![
        (":method", "POST"),
        (":path", path),
        (":authority", "inference.example"),
        ("content-type", "application/json"),
        ("x-request-id", "e2e-epp"),
    ];
    if let Some(a) = &auth {
        h.push(("authorization", a.as_str()));
    }
    ProcessingRequest {
        request: Some(Request::RequestHeaders(HttpHeaders {
            headers: Some(header_map(&h)),
            end_of_stream,
            ..Default::default()
        })),
        protocol_config: (mode != 0).then_some(ProtocolConfiguration {
            request_body_mode: mode,
            response_body_mode: mode,
            ..Default::default()
        }),
        metadata_context: subset.map(|s| {
            string_struct(
                "envoy.lb.subset_hint",
                "x-gateway-destination-endpoint-subset",
                Kind::ListValue(ListValue {
                    values: s
                        .iter()
                        .map(|e| Value {
                            kind: Some(Kind::StringValue(e.clone())),
                        })
                        .collect(),
                }),
            )
        }),
        ..Default::default()
    }
}

/// A request body chunk.
pub fn request_body(chunk: &[u8], end_of_stream: bool) -> ProcessingRequest {
    ProcessingRequest {
        request: Some(Request::RequestBody(HttpBody {
            body: chunk.to_vec(),
            end_of_stream,
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// The response headers message, with the endpoint that served in `envoy.lb`.
pub fn response_headers(status: u16, served: &str) -> ProcessingRequest {
    let status = status.to_string();
    ProcessingRequest {
        request: Some(Request::ResponseHeaders(HttpHeaders {
            headers: Some(header_map(&[
                (":status", status.as_str()),
                ("content-type", "application/json"),
            ])),
            ..Default::default()
        })),
        metadata_context: Some(string_struct(
            "envoy.lb",
            "x-gateway-destination-endpoint-served",
            Kind::StringValue(served.to_string()),
        )),
        ..Default::default()
    }
}

/// A response body chunk.
pub fn response_body(chunk: &[u8], end_of_stream: bool) -> ProcessingRequest {
    ProcessingRequest {
        request: Some(Request::ResponseBody(HttpBody {
            body: chunk.to_vec(),
            end_of_stream,
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// The destination an answer carries: (header value, `envoy.lb` metadata value), from the
/// request headers' answer or a request body's answer.
pub fn destination(r: &ProcessingResponse) -> Option<(String, String)> {
    let common = match r.response.as_ref()? {
        Response::RequestHeaders(h) => h.response.as_ref()?,
        Response::RequestBody(b) => b.response.as_ref()?,
        _ => return None,
    };
    let header = common
        .header_mutation
        .as_ref()?
        .set_headers
        .iter()
        .filter_map(|o| o.header.as_ref())
        .find(|h| h.key == "x-gateway-destination-endpoint")?;
    let lb = r.dynamic_metadata.as_ref()?.fields.get("envoy.lb")?;
    let Some(Kind::StructValue(s)) = &lb.kind else {
        return None;
    };
    let Some(Kind::StringValue(md)) = &s.fields.get("x-gateway-destination-endpoint")?.kind else {
        return None;
    };
    Some((
        String::from_utf8_lossy(&header.raw_value).into_owned(),
        md.clone(),
    ))
}

/// The request headers an answer sets (beside the destination) and removes.
pub fn request_mutation(r: &ProcessingResponse) -> (Vec<(String, String)>, Vec<String>) {
    let common = match r.response.as_ref() {
        Some(Response::RequestHeaders(h)) => h.response.as_ref(),
        Some(Response::RequestBody(b)) => b.response.as_ref(),
        _ => None,
    };
    let Some(m) = common.and_then(|c| c.header_mutation.as_ref()) else {
        return (Vec::new(), Vec::new());
    };
    let set = m
        .set_headers
        .iter()
        .filter_map(|o| o.header.as_ref())
        .filter(|h| h.key != "x-gateway-destination-endpoint")
        .map(|h| {
            (
                h.key.clone(),
                String::from_utf8_lossy(&h.raw_value).into_owned(),
            )
        })
        .collect();
    (set, m.remove_headers.clone())
}

/// A header the answer to response headers sets.
pub fn set_header(r: &ProcessingResponse, name: &str) -> Option<String> {
    let Some(Response::ResponseHeaders(h)) = r.response.as_ref() else {
        return None;
    };
    h.response
        .as_ref()?
        .header_mutation
        .as_ref()?
        .set_headers
        .iter()
        .filter_map(|o| o.header.as_ref())
        .find(|h| h.key == name)
        .map(|h| String::from_utf8_lossy(&h.raw_value).into_owned())
}

/// A streamed body chunk handed back on the request path: (bytes, end of stream).
pub fn streamed_request_body(r: &ProcessingResponse) -> Option<(Vec<u8>, bool)> {
    use envoy_types::pb::envoy::service::ext_proc::v3::body_mutation::Mutation;
    let Some(Response::RequestBody(b)) = r.response.as_ref() else {
        return None;
    };
    match b
        .response
        .as_ref()?
        .body_mutation
        .as_ref()?
        .mutation
        .as_ref()?
    {
        Mutation::StreamedResponse(s) => Some((s.body.clone(), s.end_of_stream)),
        _ => None,
    }
}

/// The immediate response's status and JSON body, when the answer is one.
pub fn immediate(r: &ProcessingResponse) -> Option<(i32, serde_json::Value)> {
    let Some(Response::ImmediateResponse(i)) = r.response.as_ref() else {
        return None;
    };
    Some((
        i.status.as_ref().map_or(0, |s| s.code),
        serde_json::from_slice(&i.body).unwrap_or(serde_json::Value::Null),
    ))
}

/// The EPP's answer to response headers.
pub struct ResponseAnswer(pub ProcessingResponse);

impl ResponseAnswer {
    /// A header it adds to the client's response.
    pub fn header(&self, name: &str) -> Option<String> {
        set_header(&self.0, name)
    }
}
